"""The tileflight client: TileDB arrays served by flightd, as Arrow.

:func:`connect` returns a :class:`Client`. Reads ask the daemon for a
FlightInfo (``GetFlightInfo``), whose endpoints each cover a disjoint part
of the result; :meth:`Client.read` fetches them in parallel and concatenates
them in endpoint order, :meth:`Client.reader` streams them one after the
other in constant memory. Writes are atomic (all of their rows become visible
together, or none): one ``DoPut``, or above the daemon's ``-max-put-bytes``
several staged ones and one ``commit_fragments``. Everything else is a ``DoAction`` with a
JSON body (docs/protocol.md lists them).
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.flight as fl

from . import _ingest, _progress, _query
from .errors import DeadlineExceeded, TileflightError, from_arrow

__all__ = ["Client", "connect", "WriteResult"]

_ARROW_ERRORS = (pa.ArrowException, fl.FlightError)

# Data accepted by Client.write.
WriteData = Any


class WriteResult(dict):  # type: ignore[type-arg]
    """What a write did: ``{"fragments": [names], "rows": n}`` as the daemon answered.

    A dict, with the two keys also as attributes."""

    @property
    def fragments(self) -> List[str]:
        return list(self.get("fragments") or [])

    @property
    def rows(self) -> int:
        return int(self.get("rows") or 0)


def _read_tls(certs: Union[str, bytes, None]) -> Optional[bytes]:
    if certs is None:
        return None
    if isinstance(certs, str):
        if "-----BEGIN" in certs:
            return certs.encode()
        with open(certs, "rb") as f:
            return f.read()
    return bytes(certs)


def connect(uri: str, token: Optional[str] = None, tls_root_certs: Union[str, bytes, None] = None,
            **kwargs: Any) -> "Client":
    """Connect to a flightd daemon.

    Args:
        uri: ``grpc://host:port`` or ``grpc+tls://host:port`` (``host:port``
            alone means ``grpc://``).
        token: the daemon's token (``-tokens-file``), sent as
            ``authorization: Bearer TOKEN`` on every call.
        tls_root_certs: PEM root certificates (bytes, PEM text or a file
            path) to verify a ``grpc+tls`` daemon with.
        **kwargs: passed to :class:`Client` (``max_workers``; ``compression``:
            ``"zstd"``, the default, lets the daemon send batches zstd-compressed,
            tiles stored with zstd alone without decompressing them; ``"none"``
            asks for plain batches; ``timeout``: seconds every call may take,
            its gRPC deadline, after which it fails with
            :class:`tileflight.DeadlineExceeded` and the daemon cancels it;
            methods take ``timeout=`` for one call) and to
            ``pyarrow.flight.FlightClient`` (e.g. ``disable_server_verification``).

    Connecting is lazy: the first call reaches the daemon.
    """
    return Client(uri, token=token, tls_root_certs=tls_root_certs, **kwargs)


class Client:
    """A connection to one flightd daemon. Thread-safe; close it (or use
    ``with``) when done.

    Every failed call raises a :class:`tileflight.TileflightError` subclass
    that keeps the gRPC code and the daemon's message.
    """

    def __init__(self, uri: str, token: Optional[str] = None,
                 tls_root_certs: Union[str, bytes, None] = None, *,
                 max_workers: Optional[int] = None, compression: Optional[str] = "zstd",
                 timeout: Optional[float] = None, **flight_kwargs: Any) -> None:
        if compression not in (None, "none", "zstd"):
            raise ValueError(f"compression: None, 'none' or 'zstd', not {compression!r}")
        # Reads ask for zstd-compressed batch bodies: pyarrow decompresses
        # them, and the daemon sends tiles stored with zstd as they are.
        self.compression = None if compression == "none" else compression
        if "://" not in uri:
            uri = "grpc://" + uri
        self.uri = uri
        self._token = token
        self._tls = _read_tls(tls_root_certs)
        self._flight_kwargs = flight_kwargs
        self.max_workers = max_workers or min(8, max(2, os.cpu_count() or 2))
        headers = [(b"authorization", b"Bearer " + token.encode())] if token else []
        self._headers = headers
        self.timeout = timeout
        self._options = fl.FlightCallOptions(headers=headers, timeout=timeout)
        self._flight = self._new_flight_client(uri)
        self._peers: Dict[str, fl.FlightClient] = {}
        self._lock = threading.Lock()
        self._server_info: Optional[Dict[str, Any]] = None

    # -- plumbing ---------------------------------------------------------------

    def _err(self, e: BaseException, timeout: Optional[float], t0: float) -> TileflightError:
        """The exception for a failed call; one that failed once its deadline
        had passed is DeadlineExceeded, whatever gRPC said (a deadline that
        hits while a stream is set up surfaces as CANCELLED)."""
        err = from_arrow(e)
        limit = self.timeout if timeout is None else timeout
        if (limit is not None and err.code in ("CANCELLED", "UNAVAILABLE", "UNKNOWN", "INTERNAL")
                and time.monotonic() - t0 >= limit):
            return DeadlineExceeded(f"the call did not finish within its timeout of {limit:g} s "
                                    f"(the daemon's call was cancelled): {err.message}")
        return err

    def _opts(self, timeout: Optional[float] = None) -> fl.FlightCallOptions:
        """Call options with ``timeout`` seconds as the deadline (None: the client's)."""
        if timeout is None:
            return self._options
        return fl.FlightCallOptions(headers=self._headers, timeout=timeout)

    def _new_flight_client(self, uri: str) -> fl.FlightClient:
        kw = dict(self._flight_kwargs)
        if self._tls is not None:
            kw["tls_root_certs"] = self._tls
        try:
            return fl.FlightClient(uri, **kw)
        except _ARROW_ERRORS as e:
            raise from_arrow(e) from e

    def connection_args(self) -> Dict[str, Any]:
        """What :func:`connect` needs to open this connection again (picklable;
        Spark and Dask workers use it)."""
        return {"uri": self.uri, "token": self._token, "tls_root_certs": self._tls,
                "compression": self.compression or "none", "timeout": self.timeout,
                **self._flight_kwargs}

    def _for_endpoint(self, ep: fl.FlightEndpoint) -> fl.FlightClient:
        # An endpoint without locations (tileflight's own) is read from this
        # daemon; one with locations from the first of them.
        for loc in ep.locations:
            return self._for_location(loc)
        return self._flight

    def _for_location(self, loc: Optional[fl.Location]) -> fl.FlightClient:
        if loc is None:
            return self._flight
        uri = loc.uri.decode() if isinstance(loc.uri, bytes) else str(loc.uri)
        if not uri or uri.startswith("arrow-flight-reuse-connection:") or uri == self.uri:
            return self._flight
        with self._lock:
            c = self._peers.get(uri)
            if c is None:
                c = self._peers[uri] = self._new_flight_client(uri)
        return c

    def close(self) -> None:
        """Close the connection (and those opened to other endpoints' locations)."""
        with self._lock:
            peers, self._peers = list(self._peers.values()), {}
        for c in [self._flight, *peers]:
            try:
                c.close()
            except _ARROW_ERRORS:
                pass

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"tileflight.Client({self.uri!r})"

    def action(self, name: str, body: Any = None, *, timeout: Optional[float] = None) -> Any:
        """Run a DoAction and return its JSON result (the escape hatch for
        actions without a method of their own)."""
        raw = b"" if body is None else _query.dumps(body)
        t0 = time.monotonic()
        try:
            results = list(self._flight.do_action(fl.Action(name, raw), options=self._opts(timeout)))
        except _ARROW_ERRORS as e:
            raise self._err(e, timeout, t0) from e
        if not results:
            return None
        return json.loads(results[0].body.to_pybytes())

    def list_actions(self, *, timeout: Optional[float] = None) -> Dict[str, str]:
        """The daemon's actions: name -> description."""
        try:
            return {a.type: a.description for a in self._flight.list_actions(options=self._opts(timeout))}
        except _ARROW_ERRORS as e:
            raise from_arrow(e) from e

    # -- arrays and their schemas --------------------------------------------------

    def arrays(self, prefix: Optional[str] = None, *, timeout: Optional[float] = None) -> List[str]:
        """The names of the arrays the daemon serves (under ``prefix``)."""
        return list(self.action("list_arrays", {"prefix": prefix} if prefix else None, timeout=timeout))

    def describe(self, name: str, timestamp: Optional[_query.Timestamp] = None, *,
                 timeout: Optional[float] = None) -> Dict[str, Any]:
        """The array's schema JSON (dimensions, attributes, filters, orders)."""
        return dict(self.action("describe", _query.build(name, timestamp=timestamp), timeout=timeout))

    def create(self, schema: Mapping[str, Any], name: Optional[str] = None,
               encrypted: Optional[bool] = None, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Create an array from schema JSON (the form :meth:`describe`
        returns); ``name`` overrides ``schema["array"]``. Returns the schema
        as created, TileDB's defaults filled in."""
        body = dict(schema)
        if name is not None:
            body["array"] = name
        if encrypted is not None:
            body["encrypted"] = encrypted
        if "array" not in body:
            raise TypeError('create: the schema needs "array" (or pass name=)')
        return dict(self.action("create_array", body, timeout=timeout))

    def drop(self, name: str, *, timeout: Optional[float] = None) -> None:
        """Delete an array and all of its data."""
        self.action("drop_array", {"array": name}, timeout=timeout)

    def fragments(self, name: str, timestamp: Optional[_query.Timestamp] = None, *,
                  timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """The array's visible fragments, oldest first."""
        return list(self.action("list_fragments", _query.build(name, timestamp=timestamp), timeout=timeout))

    def metadata(self, name: str, timestamp: Optional[_query.Timestamp] = None, *,
                 timeout: Optional[float] = None) -> Dict[str, Any]:
        """The array's metadata as a dict (a scalar per one-value key, a list for several)."""
        return dict(self.action("get_metadata", _query.build(name, timestamp=timestamp), timeout=timeout))

    def put_metadata(self, name: str, metadata: Mapping[str, Any],
                     timestamp: Optional[int] = None, *, timeout: Optional[float] = None) -> int:
        """Write array metadata (merged into what is there); returns the number of keys written."""
        body = _query.build(name, timestamp=timestamp)
        body["metadata"] = dict(metadata)
        return int(self.action("put_metadata", body, timeout=timeout)["keys"])

    # -- lifecycle (docs/protocol.md, "Array lifecycle") -------------------------------------------

    def consolidate(self, name: str, mode: str = "fragments",
                    timestamp: Optional[_query.Timestamp] = None, *,
                    timeout: Optional[float] = None) -> Dict[str, Any]:
        """Consolidate the array as TileDB does (``mode``: fragments, commits,
        fragment_meta, array_meta); returns ``{"mode", "consolidated", "written"}``."""
        return self.action("consolidate", _query.build(name, mode=mode, timestamp=timestamp), timeout=timeout)

    def vacuum(self, name: str, mode: str = "fragments", *,
               timeout: Optional[float] = None) -> Dict[str, Any]:
        """Remove what consolidation made obsolete (and, for fragments,
        uncommitted fragments older than the daemon's ``-vacuum-grace``);
        returns ``{"mode", "removed", "uncommitted"}``."""
        return self.action("vacuum", _query.build(name, mode=mode), timeout=timeout)

    def delete(self, name: str, filter: str, timestamp: Optional[int] = None, *,
               timeout: Optional[float] = None) -> Any:
        """Delete the cells matching ``filter`` (a TileDB QueryCondition) from
        a sparse array, as TileDB's delete does: reads at or after
        ``timestamp`` (default now) no longer see them."""
        return self.action("delete", _query.build(name, filter=filter, timestamp=timestamp), timeout=timeout)

    def evolve_schema(self, name: str, add_attributes: Optional[Sequence[Mapping[str, Any]]] = None,
                      drop_attributes: Optional[Sequence[str]] = None,
                      timestamp: Optional[int] = None, *,
                      timeout: Optional[float] = None) -> Dict[str, Any]:
        """Add attributes (schema JSON attribute objects) and/or drop them by
        name; returns the new schema."""
        return dict(self.action("evolve_schema", _query.build(
            name, add_attributes=list(add_attributes) if add_attributes else None,
            drop_attributes=list(drop_attributes) if drop_attributes else None, timestamp=timestamp),
            timeout=timeout))

    def commit_fragments(self, name: str, fragments: Sequence[str], *,
                         timeout: Optional[float] = None) -> Any:
        """Make staged fragments (``write(..., stage=True)``) visible, all at once."""
        return self.action("commit_fragments", {"array": name, "fragments": list(fragments)}, timeout=timeout)

    def abort_fragments(self, name: str, fragments: Sequence[str], *,
                        timeout: Optional[float] = None) -> Any:
        """Delete staged fragments that were never committed."""
        return self.action("abort_fragments", {"array": name, "fragments": list(fragments)}, timeout=timeout)

    # -- reads -----------------------------------------------------------------------

    def query(self, name: str, columns: Optional[Sequence[str]] = None,
              subarray: Optional[_query.Subarray] = None, filter: Optional[str] = None,
              timestamp: Optional[_query.Timestamp] = None, layout: Optional[str] = None,
              batch_rows: Optional[int] = None, limit: Optional[int] = None,
              **extra: Any) -> Dict[str, Any]:
        """The query JSON (a ticket) these arguments make; ``extra`` keys are passed as they are."""
        return _query.build(name, columns=columns, subarray=subarray, filter=filter,
                            timestamp=timestamp, layout=layout, batch_rows=batch_rows,
                            limit=limit, **extra)

    def schema(self, name: str, columns: Optional[Sequence[str]] = None, *,
               timeout: Optional[float] = None, **query: Any) -> pa.Schema:
        """The Arrow schema of a read (GetSchema)."""
        q = self.query(name, columns=columns, **query)
        try:
            return self._flight.get_schema(fl.FlightDescriptor.for_command(_query.dumps(q)),
                                           options=self._opts(timeout)).schema
        except _ARROW_ERRORS as e:
            raise from_arrow(e) from e

    def flight_info(self, name: str, columns: Optional[Sequence[str]] = None,
                    partitions: Optional[int] = None, *, timeout: Optional[float] = None,
                    **query: Any) -> fl.FlightInfo:
        """The FlightInfo of a read: schema, ``total_records`` and endpoints
        (``partitions`` asks for that many). Its tickets carry the client's
        ``compression`` unless ``query`` gives one."""
        q = self.query(name, columns=columns, partitions=partitions, **query)
        if self.compression and "compression" not in q:
            q["compression"] = self.compression
        t0 = time.monotonic()
        try:
            return self._flight.get_flight_info(fl.FlightDescriptor.for_command(_query.dumps(q)),
                                                options=self._opts(timeout))
        except _ARROW_ERRORS as e:
            raise self._err(e, timeout, t0) from e

    def endpoint_batches(self, ep: fl.FlightEndpoint, *,
                         timeout: Optional[float] = None) -> Iterator[pa.RecordBatch]:
        """The record batches of one endpoint, as they arrive.

        An endpoint of a cluster lists several locations (its preferred node
        first). A location that cannot be reached, or whose stream breaks off
        (UNAVAILABLE, a timeout), is left for the next one; a stream cut
        mid-way resumes there after the rows already yielded. That is sound
        because a ticket is a query pinned to one timestamp, which every node
        answers with the same rows in the same order."""
        locs: List[Optional[fl.Location]] = list(ep.locations) or [None]
        done = 0
        for i, loc in enumerate(locs):
            skip = done
            t0 = time.monotonic()
            try:
                stream = self._for_location(loc).do_get(ep.ticket, options=self._opts(timeout))
                for chunk in stream:
                    b = chunk.data
                    if b is None:
                        continue
                    if skip:
                        if b.num_rows <= skip:
                            skip -= b.num_rows
                            continue
                        b, skip = b.slice(skip), 0
                    done += b.num_rows
                    yield b
                if skip:
                    raise TileflightError(f"endpoint read again from {loc.uri!r} has fewer rows than "
                                          "the location that failed had already sent")
                return
            except (fl.FlightUnavailableError, fl.FlightTimedOutError) as e:
                if i + 1 < len(locs) and not (timeout is not None and isinstance(e, fl.FlightTimedOutError)):
                    continue  # fail over to the next location
                raise self._err(e, timeout, t0) from e
            except _ARROW_ERRORS as e:
                raise self._err(e, timeout, t0) from e

    def read(self, name: str, columns: Optional[Sequence[str]] = None,
             subarray: Optional[_query.Subarray] = None, filter: Optional[str] = None,
             timestamp: Optional[_query.Timestamp] = None, layout: Optional[str] = None, *,
             batch_rows: Optional[int] = None, limit: Optional[int] = None,
             partitions: Optional[int] = None, max_workers: Optional[int] = None,
             progress: Optional[bool] = None, timeout: Optional[float] = None) -> pa.Table:
        """Read (a slice of) an array into a ``pyarrow.Table``.

        Args:
            name: the array.
            columns: dimensions and/or attributes, in output order (default: all).
            subarray: ``{dim: ranges}``; a range is an inclusive ``(lo, hi)``
                pair, a dimension may take a list of ranges or a single value.
                Left-out dimensions span the non-empty domain.
            filter: a TileDB QueryCondition, e.g. ``"v > 0.5 and s == 'a'"``.
            timestamp: open the array at ``t`` ms, or ``(start, end)``.
            layout: ``row-major``, ``col-major``, ``global`` or ``unordered``.
            batch_rows, limit: most rows per batch, in the result.
            partitions: endpoints to ask the daemon for (default: its choice).
            max_workers: endpoints fetched at once (default: the client's).
            progress: a progress bar (None: when interactive).
            timeout: seconds each call (the FlightInfo, each endpoint's
                DoGet) may take (None: the client's ``timeout``).

        The endpoints are fetched in parallel; the table holds them in
        endpoint order (for row-major reads, the array's row-major order).
        """
        info = self.flight_info(name, columns=columns, partitions=partitions, subarray=subarray,
                                filter=filter, timestamp=timestamp, layout=layout,
                                batch_rows=batch_rows, limit=limit, timeout=timeout)
        return self.read_info(info, max_workers=max_workers, progress=progress, desc=name,
                              timeout=timeout)

    def read_info(self, info: fl.FlightInfo, max_workers: Optional[int] = None,
                  progress: Optional[bool] = None, desc: str = "read", *,
                  timeout: Optional[float] = None) -> pa.Table:
        """Fetch every endpoint of a FlightInfo in parallel into one table, in endpoint order."""
        eps = list(info.endpoints)
        schema = info.schema
        with _progress.bar(progress, info.total_records, desc) as bar:
            def fetch(ep: fl.FlightEndpoint) -> List[pa.RecordBatch]:
                out = []
                for b in self.endpoint_batches(ep, timeout=timeout):
                    out.append(b)
                    bar.update(b.num_rows)
                return out

            workers = max(1, min(len(eps), max_workers or self.max_workers))
            if workers == 1:
                parts = [fetch(ep) for ep in eps]
            else:
                with ThreadPoolExecutor(workers, thread_name_prefix="tileflight-read") as pool:
                    parts = list(pool.map(fetch, eps))
        batches = [b for part in parts for b in part]
        return pa.Table.from_batches(batches, schema=schema)

    def read_pandas(self, name: str, columns: Optional[Sequence[str]] = None,
                    subarray: Optional[_query.Subarray] = None, filter: Optional[str] = None,
                    timestamp: Optional[_query.Timestamp] = None, layout: Optional[str] = None, *,
                    index: Union[bool, Sequence[str]] = False, **kwargs: Any) -> Any:
        """:meth:`read` into a pandas DataFrame.

        ``index=True`` makes the dimensions the DataFrame's index (as
        TileDB-Py's ``.df[]`` does); a list of names makes those columns it.
        Other keyword arguments go to :meth:`read`."""
        table = self.read(name, columns=columns, subarray=subarray, filter=filter,
                          timestamp=timestamp, layout=layout, **kwargs)
        df = table.to_pandas()
        if index is True:
            keys = [f.name for f in table.schema
                    if (f.metadata or {}).get(b"tiledb.role") == b"dimension"]
        elif index:
            keys = list(index)  # type: ignore[arg-type]
        else:
            keys = []
        return df.set_index(keys) if keys else df

    def reader(self, name: str, columns: Optional[Sequence[str]] = None,
               subarray: Optional[_query.Subarray] = None, filter: Optional[str] = None,
               timestamp: Optional[_query.Timestamp] = None, layout: Optional[str] = None, *,
               batch_rows: Optional[int] = None, limit: Optional[int] = None,
               partitions: Optional[int] = None,
               progress: Optional[bool] = None, timeout: Optional[float] = None) -> pa.RecordBatchReader:
        """Stream a read as a ``pyarrow.RecordBatchReader``.

        Endpoints are read one after the other and batches handed on as they
        arrive, so memory stays at a few batches whatever the result's size.
        DuckDB, polars and pyarrow.dataset take the reader as it is."""
        info = self.flight_info(name, columns=columns, partitions=partitions, subarray=subarray,
                                filter=filter, timestamp=timestamp, layout=layout,
                                batch_rows=batch_rows, limit=limit, timeout=timeout)
        eps = list(info.endpoints)

        def gen() -> Iterator[pa.RecordBatch]:
            with _progress.bar(progress, info.total_records, name) as bar:
                for ep in eps:
                    for b in self.endpoint_batches(ep, timeout=timeout):
                        bar.update(b.num_rows)
                        yield b

        return pa.RecordBatchReader.from_batches(info.schema, gen())

    # -- arrays as NumPy, xarray and SQL ----------------------------------------------------

    def array(self, name: str, timestamp: Optional[_query.Timestamp] = None, *,
              timeout: Optional[float] = None) -> Any:
        """The array as TileDB-Py's ``tiledb.open(uri)`` gives it: ``A[...]``,
        ``A.multi_index[...]``, ``A.df[...]``, ``A.query(...)``, ``A.schema``,
        ``A.meta``, ``A.nonempty_domain()`` and writes ``A[...] = {...}``
        (see :class:`tileflight.array.Array`)."""
        from .array import Array
        return Array(self, name, timestamp=timestamp, timeout=timeout)

    def read_xarray(self, name: str, attrs: Optional[Sequence[str]] = None,
                    timestamp: Optional[_query.Timestamp] = None, *, chunks: Any = None,
                    timeout: Optional[float] = None) -> Any:
        """The array as an ``xarray.Dataset`` (lazy; see :mod:`tileflight.xarray_backend`)."""
        from .xarray_backend import open_dataset
        return open_dataset(self, name, attrs=attrs, timestamp=timestamp, chunks=chunks, timeout=timeout)

    def sql(self, text: str, params: Optional[Sequence[Any]] = None, *,
            timeout: Optional[float] = None) -> pa.Table:
        """Run one SQL statement through the daemon's Flight SQL service and
        return the result as a ``pyarrow.Table`` (``params`` bind ``?``
        placeholders, as a sequence of values or a list of such rows)."""
        from ._sql import run
        return run(self, text, params, timeout=timeout)

    # -- writes ------------------------------------------------------------------------

    def server_info(self, *, refresh: bool = False, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The daemon's ``server_info``: ``{"version", "limits": {...}, "features": [...]}``,
        cached per client (``refresh=True`` asks again). A daemon older than
        the action gets the defaults (64 MiB messages, 1 GiB per DoPut) and
        no features."""
        with self._lock:
            if self._server_info is not None and not refresh:
                return self._server_info
        try:
            info = dict(self.action("server_info", timeout=timeout))
        except TileflightError as e:
            # A tileflight daemon older than the action: INVALID_ARGUMENT,
            # "unknown action"; another Flight server: UNIMPLEMENTED.
            unknown = (e.code == "UNIMPLEMENTED" or "unknown action" in str(e)
                       or isinstance(e.__cause__, pa.ArrowNotImplementedError))
            if not unknown:
                raise
            info = {"version": None, "limits": {}, "features": []}
        limits = dict(_ingest.DEFAULT_LIMITS)
        limits.update(info.get("limits") or {})
        info["limits"] = limits
        with self._lock:
            self._server_info = info
        return info

    def write(self, name: str, data: WriteData, subarray: Optional[_query.Subarray] = None, *,
              timestamp: Optional[int] = None, layout: Optional[str] = None, stage: bool = False,
              batch_rows: int = 65536, max_batch_bytes: Optional[int] = None,
              staged: Optional[int] = None, progress: Optional[bool] = None,
              timeout: Optional[float] = None) -> WriteResult:
        """Write rows into an array, atomically: all of them become visible
        together, or none.

        A write up to the daemon's ``-max-put-bytes`` is one DoPut. A larger
        one is sent as several DoPuts with ``"stage": true``, all stamped
        with one timestamp, then made visible with one ``commit_fragments``;
        if any piece fails, the staged ones are aborted, and if the client
        dies before the commit they stay invisible until a fragments vacuum
        removes them (after the daemon's ``-vacuum-grace``). Record batches
        are cut by bytes as well as rows, under the daemon's
        ``-max-message-bytes`` (both limits come from :meth:`server_info`).

        Args:
            name: the array.
            data: a ``pyarrow.Table``, ``RecordBatch`` or ``RecordBatchReader``,
                a pandas DataFrame (a named index is written as columns, so
                ``read_pandas(index=True)`` output writes back), a dict of
                columns, an iterable of record batches, or anything with
                ``__arrow_c_stream__`` (polars, DuckDB results). Readers and
                iterables are streamed; DataFrames are converted slice by slice.
            subarray: dense arrays: the box the rows fill, one ``(lo, hi)``
                per dimension, rows in row-major order (``layout="col-major"``
                for column-major). Sparse arrays take the dimensions as columns.
                A dense write larger than one DoPut is split along the first
                dimension (row-major only), each piece held in memory until sent.
            timestamp: the fragments' timestamp (ms; default now).
            stage: write the fragments but do not commit them; pass the
                result's ``fragments`` to :meth:`commit_fragments` (or
                :meth:`abort_fragments`).
            batch_rows: rows per record batch sent, at most.
            max_batch_bytes: bytes per record batch sent, at most (default:
                the daemon's ``-max-message-bytes`` less room for framing).
            staged: a write larger than this many bytes is staged in pieces of
                this size (default, and at most: the daemon's ``-max-put-bytes``
                less a margin).
            progress: a progress bar (None: when interactive).

        Returns:
            ``{"fragments": [...], "rows": n}`` as a :class:`WriteResult`
            (a staged write adds ``"puts"``, the DoPuts it took).
        """
        schema, batches, total = _as_batches(data, batch_rows)
        limits = self.server_info(timeout=timeout)["limits"]
        msg = int(max_batch_bytes) if max_batch_bytes else _ingest.message_budget(int(limits["max_message_bytes"]))
        threshold = _ingest.put_budget(int(limits["max_put_bytes"]))
        if staged is not None:
            threshold = max(1, min(int(staged), threshold))
        src = _ingest.Pushback(_ingest.cut(batches, msg, name))
        # Input already in memory is measured whole; a stream is held back
        # only so far.
        known = isinstance(data, (pa.Table, pa.RecordBatch, dict))
        held, fits = _ingest.lookahead(src, threshold if known else min(threshold, _ingest.LOOKAHEAD_BYTES))
        held_rows, held_bytes = sum(b.num_rows for b, _ in held), sum(n for _, n in held)
        for item in reversed(held):
            src.push(item)
        del held  # src holds them now, and lets each go once it is sent
        desc = None if fits else self.describe(name, timeout=timeout)
        if desc is not None and desc.get("type") == "dense" and not known:
            # A dense stream's staged pieces are held in memory; one whose
            # cells (known from the box) look to fit one DoPut streams
            # through it instead.
            _, ranges = _ingest.dense_box(desc, _query.normalize_subarray(subarray))
            cells = 1
            for lo, hi in ranges:
                cells *= hi - lo + 1
            if held_rows and held_bytes / held_rows * cells <= 0.8 * threshold:
                desc = None
        with _progress.bar(progress, total, name) as bar:
            if desc is None or desc.get("type") not in ("sparse", "dense"):
                # One DoPut (a .b2nd array's writes are never staged).
                q = _query.build(name, subarray=subarray, timestamp=timestamp, layout=layout,
                                 stage=True if stage else None)
                return self._put(q, schema, (b for b, _ in src), bar, timeout)
            return self._write_staged(name, desc, schema, src, subarray, timestamp, layout, stage, threshold,
                                      bar, timeout)

    def _write_staged(self, name: str, desc: Dict[str, Any], schema: pa.Schema, src: "_ingest.Pushback",
                      subarray: Optional[_query.Subarray], timestamp: Optional[int], layout: Optional[str],
                      stage: bool, budget: int, bar: Any, timeout: Optional[float]) -> WriteResult:
        """A write over one DoPut: staged pieces, then one commit (unless ``stage``)."""
        ts = timestamp if timestamp is not None else int(time.time() * 1000)
        frags: List[str] = []
        rows = puts = 0
        try:
            if desc.get("type") == "dense":
                if layout not in (None, "row-major"):
                    raise TileflightError(f"write to dense array {name!r}: a write over the daemon's -max-put-bytes "
                                          "is split along the first dimension, which needs row-major rows; raise "
                                          "-max-put-bytes or write smaller subarrays", "UNIMPLEMENTED")
                dims, ranges = _ingest.dense_box(desc, _query.normalize_subarray(subarray))
                split = _ingest.DenseSplit(dims, ranges, budget, name)
                for held, n in split.pieces(src):
                    sub = split.subarray(n)
                    q = _query.build(name, subarray=sub, timestamp=ts, layout=layout, stage=True)
                    res = self._put(q, schema, iter(held), bar, timeout)
                    frags += res.fragments
                    rows += res.rows
                    puts += 1
                split.check_done()
            else:
                for piece in _ingest.sparse_pieces(src, budget):
                    q = _query.build(name, subarray=subarray, timestamp=ts, layout=layout, stage=True)
                    res = self._put(q, schema, piece, bar, timeout)
                    frags += res.fragments
                    rows += res.rows
                    puts += 1
            if frags and not stage:
                self.commit_fragments(name, frags, timeout=timeout)
        except BaseException:
            if frags:
                try:
                    self.abort_fragments(name, frags, timeout=timeout)
                except TileflightError:
                    pass  # left for a fragments vacuum: staged, never visible
            raise
        return WriteResult({"fragments": frags, "rows": rows, "puts": puts})

    def _put(self, q: Dict[str, Any], schema: pa.Schema, batches: Iterable[pa.RecordBatch], bar: Any,
             timeout: Optional[float]) -> WriteResult:
        """One DoPut of ``batches`` under the descriptor ``q``."""
        desc = fl.FlightDescriptor.for_command(_query.dumps(q))
        try:
            writer, meta_reader = self._flight.do_put(desc, schema, options=self._opts(timeout))
        except _ARROW_ERRORS as e:
            raise from_arrow(e) from e
        try:
            pool = pa.default_memory_pool()
            for b in batches:
                writer.write_batch(b)
                bar.update(b.num_rows)
                del b  # sent: not held while the next batch is made
                # Arrow's allocator (mimalloc) keeps freed pages; a long
                # streamed write would hold several batches' worth of RSS
                # it no longer uses. Giving them back costs about 1 us.
                pool.release_unused()
            writer.done_writing()
            buf = meta_reader.read()
        except _ARROW_ERRORS as e:
            # A refused stream surfaces on the next write as a generic
            # error; closing the writer reports the daemon's status.
            try:
                writer.close()
            except _ARROW_ERRORS as e2:
                raise from_arrow(e2) from e
            raise from_arrow(e) from e
        except BaseException:
            # The caller's data failed (or Ctrl-C): hang up so the daemon
            # deletes what it wrote; nothing becomes visible.
            _cancel(writer)
            raise
        try:
            writer.close()
        except _ARROW_ERRORS as e:
            raise from_arrow(e) from e
        if buf is None:
            raise TileflightError("DoPut answered no PutResult", "INTERNAL")
        return WriteResult(json.loads(buf.to_pybytes()))


def _cancel(writer: Any) -> None:
    # pyarrow's DoPut writer cannot cancel its call, and closing it ends the
    # stream cleanly, which would commit the rows sent so far. A message
    # that carries no record batch makes the daemon refuse the stream
    # instead (reading it fails), so it deletes what it wrote and nothing
    # becomes visible; test_client.py holds the daemon to this.
    try:
        writer.write_metadata(b"tileflight: the client aborted this write")
        writer.done_writing()
    except _ARROW_ERRORS:
        pass
    try:
        writer.close()
    except _ARROW_ERRORS:
        pass


def _as_batches(data: WriteData, batch_rows: int) -> Tuple[pa.Schema, Iterable[pa.RecordBatch], Optional[int]]:
    """The schema, the batches and (when known) the row count of write input."""
    if isinstance(data, pa.Table):
        return data.schema, data.to_batches(max_chunksize=batch_rows), data.num_rows
    if isinstance(data, pa.RecordBatch):
        return data.schema, pa.Table.from_batches([data]).to_batches(max_chunksize=batch_rows), data.num_rows
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, iter(data), None
    if isinstance(data, dict):
        t = pa.table(data)
        return t.schema, t.to_batches(max_chunksize=batch_rows), t.num_rows
    if type(data).__module__.split(".")[0] == "pandas" and type(data).__name__ == "DataFrame":
        return _pandas_batches(data, batch_rows)
    if hasattr(data, "__arrow_c_stream__"):
        r = pa.RecordBatchReader.from_stream(data)
        return r.schema, iter(r), None
    if isinstance(data, Iterable):
        it = iter(data)
        try:
            first = next(it)
        except StopIteration:
            raise TypeError("write: an empty iterable of record batches has no schema") from None
        if not isinstance(first, pa.RecordBatch):
            raise TypeError(f"write: an iterable must yield pyarrow.RecordBatch, got {type(first).__name__}")

        def chain() -> Iterator[pa.RecordBatch]:
            yield first
            yield from it
        return first.schema, chain(), None
    raise TypeError(f"write: cannot write a {type(data).__name__} (want a pyarrow Table, RecordBatch, "
                    "RecordBatchReader, pandas DataFrame, dict of columns or iterable of batches)")


def _pandas_batches(df: Any, batch_rows: int) -> Tuple[pa.Schema, Iterable[pa.RecordBatch], int]:
    # A named index (e.g. dimensions set as the index) is written as columns.
    keep_index = any(n is not None for n in df.index.names)
    schema = pa.Schema.from_pandas(df, preserve_index=keep_index).remove_metadata()

    def gen() -> Iterator[pa.RecordBatch]:
        # Converting slice by slice keeps one slice's Arrow copy in memory,
        # not the whole frame's.
        for i in range(0, len(df), batch_rows):
            b = pa.RecordBatch.from_pandas(df.iloc[i:i + batch_rows], schema=schema,
                                           preserve_index=keep_index)
            yield b.replace_schema_metadata(None)
    return schema, gen(), len(df)
