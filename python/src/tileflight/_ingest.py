"""Sizing writes by the daemon's limits (the ``server_info`` action).

Two limits shape a write. ``max_message_bytes`` (the daemon's
``-max-message-bytes``) bounds one gRPC message, so every record batch is
cut by bytes as well as by rows to stay under it. ``max_put_bytes``
(``-max-put-bytes``) bounds one DoPut, so a larger write is sent as several
DoPuts with ``"stage": true`` (one timestamp for all) and made visible with
one ``commit_fragments``; on any failure the staged fragments are aborted,
and if the client dies before the commit they stay invisible until a
fragments vacuum removes them (after the daemon's ``-vacuum-grace``).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import pyarrow as pa

from .errors import TileflightError

# What an older daemon without server_info uses by default.
DEFAULT_LIMITS: Dict[str, int] = {"max_message_bytes": 64 << 20, "max_put_bytes": 1 << 30}

# Streamed input (readers, iterables, DataFrames) is held back up to this
# many bytes to learn whether it fits one DoPut; beyond it the write is
# staged (pieces stream through, so a write's memory stays about this).
LOOKAHEAD_BYTES = 4 << 20


def message_budget(max_message_bytes: int) -> int:
    """The record-batch size kept under a message limit: the IPC metadata,
    the Flight framing and gRPC's header need a little room."""
    head = max(16 << 10, min(1 << 20, max_message_bytes // 16))
    return max(1, max_message_bytes - head)


def put_budget(max_put_bytes: int) -> int:
    """The bytes one staged DoPut carries under a put limit."""
    return max(1, max_put_bytes - max(64 << 10, max_put_bytes // 32))


def batch_bytes(b: pa.RecordBatch) -> int:
    """The size of ``b`` as an Arrow IPC message body and metadata."""
    return int(pa.ipc.get_record_batch_size(b))


def cut(batches: Iterable[pa.RecordBatch], limit: int, array: str, option_name: str = "max_batch_bytes",
        ) -> Iterator[Tuple[pa.RecordBatch, int]]:
    """Each batch, cut into slices whose IPC size is at most ``limit``, with
    that size. A single row over the limit is an error naming the flag and
    the client option."""
    for b in batches:
        yield from _cut_one(b, limit, array, option_name)
        del b  # not held while the next batch is made: a stream's memory stays one batch


def _cut_one(b: pa.RecordBatch, limit: int, array: str, option_name: str) -> Iterator[Tuple[pa.RecordBatch, int]]:
    size = batch_bytes(b)
    if size <= limit:
        if b.num_rows:
            yield b, size
        return
    if b.num_rows == 1:
        raise TileflightError(
            f"write to {array!r}: one row is {size:,} bytes as an Arrow message, over the {limit:,}-byte "
            f"batch limit: raise the daemon's -max-message-bytes flag (the client learns it from server_info) "
            f"and the client's {option_name}= option if it was set lower", "RESOURCE_EXHAUSTED")
    step = max(1, int(b.num_rows * limit / size * 0.9))
    for off in range(0, b.num_rows, step):
        yield from _cut_one(b.slice(off, step), limit, array, option_name)


class Pushback:
    """An iterator of (batch, size) that takes items back."""

    def __init__(self, it: Iterable[Tuple[pa.RecordBatch, int]]) -> None:
        self._it = iter(it)
        self._back: List[Tuple[pa.RecordBatch, int]] = []

    def __iter__(self) -> "Pushback":
        return self

    def __next__(self) -> Tuple[pa.RecordBatch, int]:
        if self._back:
            return self._back.pop()
        return next(self._it)

    def push(self, item: Tuple[pa.RecordBatch, int]) -> None:
        self._back.append(item)

    def empty(self) -> bool:
        if self._back:
            return False
        try:
            self._back.append(next(self._it))
        except StopIteration:
            return True
        return False


def lookahead(src: Pushback, limit: Optional[int]) -> Tuple[List[Tuple[pa.RecordBatch, int]], bool]:
    """Takes items from ``src`` until more than ``limit`` bytes are held (None:
    no bound); returns them and whether ``src`` ended within the limit."""
    held: List[Tuple[pa.RecordBatch, int]] = []
    n = 0
    for item in src:
        held.append(item)
        n += item[1]
        if limit is not None and n > limit:
            return held, False
    return held, True


def sparse_pieces(src: Pushback, budget: int) -> Iterator[Iterator[pa.RecordBatch]]:
    """The stream in pieces of at most ``budget`` bytes (each a generator
    to be consumed before the next piece is asked for)."""
    while not src.empty():
        yield _piece(src, budget)


def _piece(src: Pushback, budget: int) -> Iterator[pa.RecordBatch]:
    n = 0
    for b, size in src:
        if n and n + size > budget:
            src.push((b, size))
            return
        n += size
        yield b
        del b


class DenseSplit:
    """Cuts a row-major dense write of the box ``ranges`` (one (lo, hi) per
    dimension, in the schema's order) into pieces along the first
    dimension: each piece is whole slabs (first-dimension indices), at most
    ``budget`` bytes, with its own sub-box."""

    def __init__(self, dims: List[str], ranges: List[Tuple[int, int]], budget: int, array: str) -> None:
        self.dims, self.ranges, self.budget, self.array = dims, ranges, budget, array
        self.slab = 1
        for lo, hi in ranges[1:]:
            self.slab *= hi - lo + 1
        self.next_lo = ranges[0][0]

    def subarray(self, rows: int) -> Dict[str, List[List[int]]]:
        lo = self.next_lo
        hi = lo + rows // self.slab - 1
        if hi > self.ranges[0][1]:
            raise TileflightError(
                f"write to dense array {self.array!r}: more rows than the subarray's "
                f"{(self.ranges[0][1] - self.ranges[0][0] + 1) * self.slab:,} cells", "INVALID_ARGUMENT")
        self.next_lo = hi + 1
        sub = {self.dims[0]: [[lo, hi]]}
        for d, (a, b) in zip(self.dims[1:], self.ranges[1:]):
            sub[d] = [[a, b]]
        return sub

    def check_done(self) -> None:
        """Refuses a write that left cells of the box without rows."""
        if self.next_lo != self.ranges[0][1] + 1:
            got = (self.next_lo - self.ranges[0][0]) * self.slab
            want = (self.ranges[0][1] - self.ranges[0][0] + 1) * self.slab
            raise TileflightError(f"write to dense array {self.array!r}: the subarray holds {want:,} cells "
                                  f"but the stream has {got:,} rows", "INVALID_ARGUMENT")

    def pieces(self, src: Pushback) -> Iterator[Tuple[List[pa.RecordBatch], int]]:
        """Each piece's batches and row count. A piece is held in memory (up
        to ``budget`` bytes) until its last slab is known."""
        while not src.empty():
            held: List[pa.RecordBatch] = []
            rows = n = 0
            for b, size in src:
                if n + size <= self.budget:
                    held.append(b)
                    rows += b.num_rows
                    n += size
                    continue
                # The piece ends inside b, at the last slab boundary whose
                # rows still fit.
                take = ((rows + b.num_rows) // self.slab) * self.slab - rows
                while take > 0 and n + batch_bytes(b.slice(0, take)) > self.budget:
                    take = ((rows + take - 1) // self.slab) * self.slab - rows
                if take > 0:
                    held.append(b.slice(0, take))
                    rows += take
                    rest = b.slice(take)
                    if rest.num_rows:
                        src.push((rest, batch_bytes(rest)))
                    break
                if rows and rows % self.slab == 0:
                    src.push((b, size))
                    break
                raise TileflightError(
                    f"write to dense array {self.array!r}: one slab of the first dimension "
                    f"({self.slab:,} cells) is over the {self.budget:,} bytes one DoPut may carry: raise the "
                    f"daemon's -max-put-bytes, or write smaller subarrays", "RESOURCE_EXHAUSTED")
            if rows % self.slab:
                raise TileflightError(
                    f"write to dense array {self.array!r}: the rows do not fill the subarray's slabs "
                    f"({rows} rows in the last piece, slabs of {self.slab})", "INVALID_ARGUMENT")
            if rows:
                yield held, rows


def dense_box(desc: Dict[str, Any], subarray: Optional[Dict[str, List[List[Any]]]]) -> Tuple[List[str], List[Tuple[int, int]]]:
    """The dims and one (lo, hi) per dimension of a dense write."""
    dims, ranges = [], []
    for d in desc["dimensions"]:
        dims.append(d["name"])
        r = (subarray or {}).get(d["name"])
        if r is not None:
            if len(r) != 1:
                raise TileflightError(f"dimension {d['name']!r}: a dense write takes one [lo, hi] range",
                                      "INVALID_ARGUMENT")
            lo, hi = r[0]
        else:
            lo, hi = d["domain"]
        ranges.append((int(lo), int(hi)))
    return dims, ranges
