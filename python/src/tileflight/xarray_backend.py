"""An xarray backend: dense tileflight arrays as lazy ``xarray.Dataset``s.

>>> import xarray as xr
>>> ds = xr.open_dataset("grpc://127.0.0.1:8815/climate/temp", engine="tileflight")
>>> ds.temp.isel(time=slice(0, 10)).values      # reads only those cells

The package registers the entry point ``tileflight`` under
``xarray.backends`` (python/pyproject.toml); :class:`TileflightBackendEntrypoint`
can also be given as ``engine=`` itself. Each dimension becomes a
coordinate over the schema domain (integers, or ``datetime64`` for datetime
dimensions), each attribute a variable. Variables are lazy: indexing one
reads the box asked for and nothing else (one read per index). ``chunks=``
makes dask arrays; ``chunks={}`` gives one chunk per space tile
(``preferred_chunks`` is the tile extents, so ``"auto"`` chunks are tile
multiples). Nullable attributes come back as floats with NaN for null (as
xarray decodes a ``_FillValue``), integers as float64. The array's metadata
is the Dataset's ``attrs``. Sparse arrays have no grid to put in a Dataset:
read them with ``client.array(name).df[...]``.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterable, Optional, Tuple
from urllib.parse import urlsplit

import numpy as np

from . import _query
from .array import Array, _Sel

__all__ = ["TileflightBackendEntrypoint", "open_dataset", "split_uri"]

try:
    from xarray.backends import BackendArray, BackendEntrypoint
    from xarray.core import indexing
except ImportError as _e:  # pragma: no cover - only without xarray
    raise ImportError("tileflight's xarray backend needs xarray (pip install 'tileflight[xarray]')") from _e


def split_uri(uri: str) -> Tuple[str, str]:
    """``grpc://host:port/path/array`` -> (``grpc://host:port``, ``path/array``)."""
    u = urlsplit(uri)
    if u.scheme not in ("grpc", "grpc+tls", "grpc+tcp") or not u.netloc or not u.path.strip("/"):
        raise ValueError(f"not a tileflight array URI (grpc://host:port/path/array): {uri!r}")
    return f"{u.scheme}://{u.netloc}", u.path.strip("/")


_CLIENTS: Dict[Tuple[Any, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _shared_client(server: str, token: Optional[str], timeout: Optional[float]) -> Any:
    # One connection per daemon and process: a Dataset's variables (and the
    # dask tasks reading them) share it, and it outlives the open call.
    from .client import connect
    key = (server, token, timeout)
    with _CLIENTS_LOCK:
        c = _CLIENTS.get(key)
        if c is None:
            c = _CLIENTS[key] = connect(server, token=token, timeout=timeout)
    return c


def _float_dtype(dt: np.dtype) -> np.dtype:
    return dt if dt.kind in "fcMm" else np.dtype(np.float64)


class TileflightArray(BackendArray):
    """One attribute of a dense array, read lazily box by box."""

    def __init__(self, array: Array, attr: str) -> None:
        self.array = array
        self.attr = attr
        at = array.schema.attr(attr)
        self.nullable = at.isnullable
        self.shape = tuple(int(d.shape[0]) for d in array.schema.domain)
        self.dtype = _float_dtype(at.dtype) if self.nullable else at.dtype
        self.reads = 0  # how many reads indexing made (tests look)

    def __getitem__(self, key: Any) -> Any:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC,
                                                  self._raw)

    def _raw(self, key: Tuple[Any, ...]) -> np.ndarray:
        sels = []
        for d, k, n in zip(self.array.schema.domain, key, self.shape):
            lo = int(d._json["domain"][0])
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if stop <= start:
                    return np.empty(tuple(0 for _ in key), dtype=self.dtype)[
                        tuple(0 if not isinstance(x, slice) else slice(None) for x in key)]
                sels.append(_Sel([[lo + start, lo + stop - 1]], stop - start, False, step if step != 1 else None))
            else:
                i = int(k)
                sels.append(_Sel([[lo + i, lo + i]], 1, True))
        q = self.array.query(attrs=[self.attr])
        self.reads += 1
        v = q._read(sels, attrs_first=True, dims=[], shaped=True)[self.attr]
        if self.nullable:
            m = np.ma.getmaskarray(v)
            v = np.asarray(v.data, dtype=self.dtype)
            if m.any():
                v = v.copy()
                v[m] = np.datetime64("NaT") if self.dtype.kind == "M" else np.nan
        return v


def _coords(array: Array) -> Dict[str, np.ndarray]:
    out = {}
    for d in array.schema.domain:
        lo, hi = int(d._json["domain"][0]), int(d._json["domain"][1])
        vals = np.arange(lo, hi + 1, dtype=np.int64)
        out[d.name] = vals.view(d.dtype) if d.dtype.kind == "M" else vals.astype(d.dtype)
    return out


def dataset(array: Array, attrs: Optional[Iterable[str]] = None,
            drop_variables: Optional[Iterable[str]] = None) -> Any:
    """The (lazy) Dataset of a dense array's attributes."""
    import xarray as xr
    sch = array.schema
    if sch.sparse:
        raise ValueError(f"{array.uri!r} is a sparse array: xarray Datasets need a dense grid "
                         "(read it with client.array(name).df[...])")
    names = list(attrs) if attrs is not None else sch.attr_names
    drop = set(drop_variables or ())
    dims = sch.dim_names
    tiles = {d.name: int(d.tile) for d in sch.domain}
    variables = {}
    for n in names:
        if n in drop:
            continue
        at = sch.attr(n)
        if at.isvar or at.ncells != 1 and at.dtype.kind != "c" or at.dtype.kind in "OSUV":
            continue  # no fixed NumPy element: such attributes have no xarray variable
        data = indexing.LazilyIndexedArray(TileflightArray(array, n))
        v = xr.Variable(dims, data)
        v.encoding["preferred_chunks"] = tiles
        if at.isnullable:
            v.attrs["nullable"] = 1
        variables[n] = v
    meta = {}
    for k, v in array.meta.items():
        meta[k] = list(v) if isinstance(v, tuple) else v
    return xr.Dataset(variables, coords=_coords(array), attrs=meta)


class TileflightBackendEntrypoint(BackendEntrypoint):
    """``engine="tileflight"``: open ``grpc://host:port/path/array`` lazily.

    Backend keywords: ``attrs`` (which attributes), ``timestamp`` (time
    travel, ms or ``(start, end)``), ``token``, ``timeout`` (seconds per
    call), ``client`` (a :class:`tileflight.Client` to use, then the path
    may be the array's name alone)."""

    description = "TileDB and .b2nd arrays served by a tileflight daemon (Arrow Flight)"
    url = "https://github.com/tileflight/tileflight/blob/main/docs/python.md"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "attrs", "timestamp", "token",
                               "timeout", "client")

    def open_dataset(self, filename_or_obj: Any, *, drop_variables: Any = None, attrs: Any = None,
                     timestamp: Optional[_query.Timestamp] = None, token: Optional[str] = None,
                     timeout: Optional[float] = None, client: Any = None) -> Any:
        if client is None:
            server, name = split_uri(str(filename_or_obj))
            client = _shared_client(server, token, timeout)
        else:
            name = str(filename_or_obj)
            if "://" in name:
                name = split_uri(name)[1]
        array = Array(client, name, timestamp=timestamp, timeout=timeout)
        return dataset(array, attrs=attrs, drop_variables=drop_variables)

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        return isinstance(filename_or_obj, str) and filename_or_obj.startswith(("grpc://", "grpc+tls://"))


def open_dataset(client: Any, name: str, attrs: Any = None, timestamp: Any = None, chunks: Any = None,
                 timeout: Optional[float] = None) -> Any:
    """``client.read_xarray``: the Dataset through xarray's own open_dataset
    (so ``chunks=`` behaves as it does for every backend)."""
    import xarray as xr
    return xr.open_dataset(name, engine=TileflightBackendEntrypoint, chunks=chunks, client=client,
                           attrs=attrs, timestamp=timestamp, timeout=timeout)
