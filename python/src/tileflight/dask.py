"""Dask over tileflight: DataFrames (one partition per Flight endpoint) and
arrays (one block per space tile).

>>> import tileflight.dask
>>> ddf = tileflight.dask.read("grpc://flightd:8815", "climate/temp",
...                            columns=["x", "temp"], subarray={"x": (0, 999)})
>>> ddf.temp.mean().compute()
>>> darr = tileflight.dask.read_array("grpc://flightd:8815", "climate/grid", "temp")
>>> darr.chunks          # the space tiles, clipped to the selection

The FlightInfo is taken when :func:`read` is called (its tickets pin the
array's timestamp, so every partition reads the same snapshot); each
partition fetches its endpoint when computed, from any worker.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import pyarrow as pa
import pyarrow.flight as fl

from . import _query
from .client import Client, connect

__all__ = ["read", "read_array"]


def _fetch(ticket: bytes, locations: Sequence[str], conn: Dict[str, Any], schema: pa.Schema) -> Any:
    ep = fl.FlightEndpoint(ticket, [fl.Location(u) for u in locations])
    with connect(**conn) as c:
        batches = list(c.endpoint_batches(ep))
    return pa.Table.from_batches(batches, schema=schema).to_pandas()


def read(client_or_uri: Any, name: str, columns: Optional[Sequence[str]] = None,
         subarray: Optional[_query.Subarray] = None, filter: Optional[str] = None,
         timestamp: Optional[_query.Timestamp] = None, layout: Optional[str] = None, *,
         partitions: Optional[int] = None, batch_rows: Optional[int] = None,
         token: Optional[str] = None) -> Any:
    """A dask DataFrame of a read, one partition per endpoint, in endpoint order.

    ``client_or_uri`` is a :class:`tileflight.Client` or a URI (then
    ``token`` may be given). The other arguments are :meth:`Client.read`'s.
    """
    import dask.dataframe as dd

    own = not isinstance(client_or_uri, Client)
    client = connect(client_or_uri, token=token) if own else client_or_uri
    try:
        info = client.flight_info(name, columns=columns, partitions=partitions, subarray=subarray,
                                  filter=filter, timestamp=timestamp, layout=layout,
                                  batch_rows=batch_rows)
        conn = client.connection_args()
    finally:
        if own:
            client.close()
    schema = info.schema
    meta = schema.empty_table().to_pandas()
    eps = [(ep.ticket.ticket, [(loc.uri.decode() if isinstance(loc.uri, bytes) else str(loc.uri))
                               for loc in ep.locations]) for ep in info.endpoints]
    if not eps:
        return dd.from_pandas(meta, npartitions=1)
    return dd.from_map(_fetch, [t for t, _ in eps], [loc for _, loc in eps],
                       conn=conn, schema=schema, meta=meta, enforce_metadata=False,
                       label="tileflight-read")


_WORKER_CLIENTS: Dict[Any, Client] = {}


def _worker_client(conn: Dict[str, Any]) -> Client:
    # One connection per worker process and daemon, reused by every block.
    key = tuple(sorted((k, repr(v)) for k, v in conn.items()))
    c = _WORKER_CLIENTS.get(key)
    if c is None:
        c = _WORKER_CLIENTS[key] = connect(**conn)
    return c


def _block(conn: Dict[str, Any], name: str, attr: str, ranges: Sequence[Sequence[int]],
           timestamp: Any, fill_nulls: Any) -> Any:
    from .array import Array, _Sel
    import numpy as np
    a = Array(_worker_client(conn), name, timestamp=timestamp)
    sels = [_Sel([[lo, hi]], hi - lo + 1) for lo, hi in ranges]
    v = a.query(attrs=[attr])._read(sels, attrs_first=True, dims=[], shaped=True)[attr]
    if isinstance(v, np.ma.MaskedArray) and fill_nulls is not None:
        v = v.astype(np.result_type(v.dtype, np.float64) if v.dtype.kind in "iub" else v.dtype).filled(fill_nulls)
    return v


def read_array(client_or_uri: Any, name: str, attr: Optional[str] = None,
               subarray: Optional[Dict[str, Sequence[int]]] = None,
               timestamp: Optional[_query.Timestamp] = None, *, chunks: Any = None,
               token: Optional[str] = None, timeout: Optional[float] = None,
               fill_nulls: Any = float("nan")) -> Any:
    """One attribute of a dense array (or ``.b2nd``) as a ``dask.array``.

    Blocks are the array's space tiles (tile extents on the grid that starts
    at the domain's lower bound), clipped to ``subarray`` (``{dim: (lo,
    hi)}``, inclusive; default the schema domain); ``chunks`` (an int or a
    tuple per dimension) asks for that many tiles per block instead of one.
    Each block is one read, run when computed on any worker. Nullable
    attributes: nulls become ``fill_nulls`` (NaN, in float64 for integers;
    ``None`` keeps masked blocks)."""
    import dask.array as da
    import numpy as np
    from dask.base import tokenize
    from .array import Array

    own = not isinstance(client_or_uri, Client)
    client = connect(client_or_uri, token=token, timeout=timeout) if own else client_or_uri
    try:
        a = Array(client, name, timestamp=timestamp, timeout=timeout)
        conn = client.connection_args()
    finally:
        if own:
            client.close()
    sch = a.schema
    if sch.sparse:
        raise ValueError(f"{name!r} is a sparse array: read it with tileflight.dask.read (a DataFrame)")
    attr = attr or sch.attr(0).name
    at = sch.attr(attr)
    if at.isvar:
        raise ValueError(f"attribute {attr!r} is var-sized: it has no dask.array form")
    per = chunks if isinstance(chunks, (tuple, list)) else (chunks or 1,) * sch.ndim
    sub = dict(subarray or {})
    axes = []
    for d, k in zip(sch.domain, per):
        dlo, dhi = int(d._json["domain"][0]), int(d._json["domain"][1])
        lo, hi = (int(sub[d.name][0]), int(sub[d.name][1])) if d.name in sub else (dlo, dhi)
        if lo < dlo or hi > dhi or hi < lo:
            raise IndexError(f"subarray {d.name}: ({lo}, {hi}) is outside the domain ({dlo}, {dhi})")
        step = int(d.tile) * int(k)
        bounds = []
        start = lo
        while start <= hi:
            end = min(hi, dlo + ((start - dlo) // step + 1) * step - 1)
            bounds.append((start, end))
            start = end + 1
        axes.append(bounds)
    dtype = at.dtype
    if at.isnullable and fill_nulls is not None and dtype.kind in "iub":
        dtype = np.dtype(np.float64)
    key = "tileflight-array-" + tokenize(conn.get("uri"), name, attr, axes, timestamp)
    dsk = {}
    for idx in np.ndindex(*[len(b) for b in axes]):
        ranges = [axes[i][j] for i, j in enumerate(idx)]
        dsk[(key,) + tuple(idx)] = (_block, conn, name, attr, ranges, a.timestamp if timestamp is None
                                   else timestamp, fill_nulls if at.isnullable else None)
    chunk_sizes = tuple(tuple(e - s + 1 for s, e in b) for b in axes)
    meta = np.ma.masked_array(np.empty((0,) * sch.ndim, dtype=dtype)) if (at.isnullable and fill_nulls is None) \
        else np.empty((0,) * sch.ndim, dtype=dtype)
    return da.Array(dsk, key, chunk_sizes, meta=meta)
