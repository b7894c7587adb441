"""Arrays as TileDB-Py users know them: ``A[...]``, ``multi_index``, ``df``, ``query``.

>>> A = client.array("demo/dense")
>>> A[0:2, 0:3]["v"].shape          # half-open slices of domain coordinates
(2, 3)
>>> A.multi_index[0:1, [2, (5, 6)]]  # inclusive ranges and points
>>> A.query(attrs=["v"], cond="v > 0.5").df[:]

Every read is one GetFlightInfo whose endpoints are fetched in parallel
(:meth:`tileflight.Client.read`); results come back in TileDB-Py's NumPy
form (:mod:`tileflight._numpy`): dense reads shaped by the selection,
sparse reads flat, nullable attributes as masked arrays. Indexing follows
TileDB-Py 0.36: ``A[...]`` takes domain coordinates with Python's half-open
slices on integer dimensions (negative values wrap from the domain's upper
bound, a stop past it is clamped, a start below the domain is
``IndexError``), inclusive ranges on float, datetime and string dimensions;
``multi_index`` takes inclusive ranges. A dense ``A[:]`` reads the whole
schema domain (fill values where nothing was written), as TileDB-Py does.
"""

from __future__ import annotations

import collections
import json
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

from . import _numpy, _query
from .errors import TileflightError, from_arrow

__all__ = ["Array", "ArraySchema", "Domain", "Dim", "Attr", "Metadata", "Query"]

_LAYOUTS = {"C": "row-major", "F": "col-major", "G": "global", "U": "unordered", None: None}


def _np_scalar(v: Any, dtype: np.dtype) -> Any:
    if v is None:
        return None
    if dtype.kind in "Mm":
        return np.array(int(v), dtype=np.int64).view(dtype)[()]
    if dtype.kind == "S":
        return v.encode("utf-8") if isinstance(v, str) else bytes(v)
    if isinstance(v, str) and dtype.kind == "f":
        return dtype.type(float(v))
    return dtype.type(v)


class Dim:
    """A dimension, as ``tiledb.Dim`` describes it (``name``, ``dtype``,
    ``domain``, ``tile``, ``shape``, ``isvar``)."""

    def __init__(self, d: Mapping[str, Any]) -> None:
        self._json = dict(d)
        self.name: str = d["name"]
        self.type: str = d["type"]
        self.isvar = d.get("cell_val_num") == "var" or self.type in ("string_ascii", "string_utf8")
        self.dtype = np.dtype("S") if self.isvar else _numpy.numpy_dtype(self.type)
        dom = d.get("domain")
        self.domain: Tuple[Any, Any] = ((None, None) if dom is None else
                                        (_np_scalar(dom[0], self.dtype), _np_scalar(dom[1], self.dtype)))
        t = d.get("tile")
        self.tile = None if t is None else _np_scalar(t, np.dtype(np.int64) if self.dtype.kind in "Mm" else self.dtype)
        self.filters = d.get("filters", [])

    @property
    def shape(self) -> Tuple[int, ...]:
        if self.dtype.kind not in "iuMm":
            raise TypeError(f"dimension {self.name!r} of type {self.type} has no integral shape")
        return (int(self._json["domain"][1]) - int(self._json["domain"][0]) + 1,)

    @property
    def size(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"Dim(name={self.name!r}, domain={self.domain!r}, tile={self.tile!r}, dtype='{self.dtype}')"


class Attr:
    """An attribute, as ``tiledb.Attr`` describes it (``name``, ``dtype``,
    ``fill``, ``isnullable``, ``isvar``, ``ncells``)."""

    def __init__(self, a: Mapping[str, Any]) -> None:
        self._json = dict(a)
        self.name: str = a["name"]
        if "type" not in a and "dtype" in a:
            # A .b2nd field: its NumPy dtype is the whole story.
            self.type = "b2nd:" + a["dtype"]
            try:
                self.dtype = np.dtype(a["dtype"])
            except TypeError:
                self.dtype = np.dtype(object)
            self.cell_val_num, self.isvar, self.ncells, self.isnullable = 1, False, 1, False
            self.enum_label, self.filters = None, []
            return
        self.type: str = a["type"]
        cvn = a.get("cell_val_num", 1)
        self.cell_val_num = cvn
        self.isvar = cvn == "var"
        self.ncells = None if self.isvar else int(cvn)
        self.isnullable = bool(a.get("nullable", False))
        self.dtype = _numpy.numpy_dtype(self.type, cvn)
        self.enum_label = a.get("enumeration")
        self.filters = a.get("filters", [])

    @property
    def fill(self) -> Any:
        """The fill value in the attribute's dtype (TileDB-Py's ``Attr.fill``)."""
        f = self._json.get("fill")
        if f is None:
            return None
        if self.dtype.kind in "US" or self.isvar and self.type.startswith(("string", "char", "blob")):
            b = f.encode("utf-8") if isinstance(f, str) else bytes(f)
            return b
        if isinstance(f, list):
            base = np.dtype(self.type)
            arr = np.array([float(x) if isinstance(x, str) else x for x in f], dtype=base)
            return arr.view(self.dtype)[0] if not self.isvar else arr
        return _np_scalar(f, self.dtype)

    def __repr__(self) -> str:
        return (f"Attr(name={self.name!r}, dtype='{self.dtype}', var={self.isvar}, "
                f"nullable={self.isnullable})")


class Domain:
    """The dimensions (``tiledb.Domain``): ``ndim``, ``dim(i or name)``, iteration, ``shape``."""

    def __init__(self, dims: Sequence[Dim]) -> None:
        self._dims = list(dims)

    @property
    def ndim(self) -> int:
        return len(self._dims)

    def dim(self, key: Any) -> Dim:
        if isinstance(key, str):
            for d in self._dims:
                if d.name == key:
                    return d
            raise KeyError(f"no dimension {key!r}")
        return self._dims[key]

    def has_dim(self, name: str) -> bool:
        return any(d.name == name for d in self._dims)

    def __iter__(self) -> Iterator[Dim]:
        return iter(self._dims)

    def __len__(self) -> int:
        return len(self._dims)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(d.shape[0] for d in self._dims)

    def __repr__(self) -> str:
        return "Domain(" + ", ".join(map(repr, self._dims)) + ")"


class ArraySchema:
    """The array's schema, close to ``tiledb.ArraySchema``: ``domain``,
    ``attr(i or name)``, ``nattr``, ``ndim``, ``sparse``, ``shape``,
    ``cell_order``, ``tile_order``, ``capacity``, ``allows_duplicates``;
    ``json`` is the daemon's schema JSON (docs/protocol.md, "Schema JSON")."""

    def __init__(self, desc: Mapping[str, Any]) -> None:
        self.json = dict(desc)
        self.domain = Domain([Dim(d) for d in desc["dimensions"]])
        self._attrs = [Attr(a) for a in desc["attributes"]]
        self.kind = desc.get("type", "dense")
        self.sparse = self.kind == "sparse"
        self.cell_order = desc.get("cell_order", "row-major")
        # TileDB-Py reports no tile order for Hilbert cell order.
        self.tile_order = None if self.cell_order == "hilbert" else desc.get("tile_order", "row-major")
        self.capacity = desc.get("capacity", 0)
        self.allows_duplicates = bool(desc.get("allows_duplicates", False))

    @property
    def ndim(self) -> int:
        return self.domain.ndim

    @property
    def nattr(self) -> int:
        return len(self._attrs)

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.domain.shape

    def attr(self, key: Any) -> Attr:
        if isinstance(key, str):
            for a in self._attrs:
                if a.name == key:
                    return a
            raise KeyError(f"no attribute {key!r}")
        return self._attrs[key]

    def has_attr(self, name: str) -> bool:
        return any(a.name == name for a in self._attrs)

    @property
    def attr_names(self) -> List[str]:
        return [a.name for a in self._attrs]

    @property
    def dim_names(self) -> List[str]:
        return [d.name for d in self.domain]

    def attr_or_dim_dtype(self, name: str) -> np.dtype:
        return self.attr(name).dtype if self.has_attr(name) else self.domain.dim(name).dtype

    def __repr__(self) -> str:
        return (f"ArraySchema(domain={self.domain!r}, attrs={self._attrs!r}, "
                f"cell_order={self.cell_order!r}, tile_order={self.tile_order!r}, sparse={self.sparse})")


class Metadata(collections.abc.MutableMapping):  # type: ignore[type-arg]
    """``A.meta``: the array's metadata as a mapping (values of several
    numbers are tuples, as TileDB-Py returns them). Setting a key writes it
    (``put_metadata``); deleting is not supported by the protocol."""

    def __init__(self, array: "Array") -> None:
        self._array = array
        self._cache: Optional[Dict[str, Any]] = None

    def _load(self) -> Dict[str, Any]:
        if self._cache is None:
            a = self._array
            raw = a._client.metadata(a.uri, timestamp=a.timestamp, timeout=a.timeout)
            # TileDB-Py's forms: several values as a tuple, one number as a
            # NumPy scalar (int64 or float64: what the protocol stores).
            self._cache = {k: tuple(v) if isinstance(v, list) else
                           np.float64(v) if isinstance(v, float) else
                           np.int64(v) if isinstance(v, int) and not isinstance(v, bool) else v
                           for k, v in raw.items()}
        return self._cache

    def __getitem__(self, key: str) -> Any:
        return self._load()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, tuple):
            value = list(value)
        if isinstance(value, np.ndarray):
            value = value.tolist()
        a = self._array
        a._client.put_metadata(a.uri, {key: value}, timeout=a.timeout)
        self._cache = None

    def __delitem__(self, key: str) -> None:
        raise NotImplementedError("deleting metadata keys is not in the tileflight protocol")

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"Metadata({self._load()!r})"


# ---- selections ----------------------------------------------------------------------------


class _Sel:
    """One dimension's part of a selection: wire ranges, result length, and
    what to do to the result afterwards (drop the axis, take a step)."""

    def __init__(self, ranges: Optional[List[List[Any]]], count: Optional[int], squeeze: bool = False,
                 step: Optional[int] = None) -> None:
        self.ranges = ranges
        self.count = count
        self.squeeze = squeeze
        self.step = step


def _wire(v: Any, dim: Dim) -> Any:
    """A coordinate in the wire form of the dimension (ints in the unit for datetimes)."""
    if dim.dtype.kind == "M":
        if not isinstance(v, np.datetime64):
            raise IndexError("cannot index datetime dimension with non-datetime interval")
        return int(v.astype(dim.dtype).astype(np.int64))
    if dim.isvar:
        if isinstance(v, bytes):
            return v.decode("utf-8")
        if not isinstance(v, str):
            raise TileflightError(f"Non-string value {v!r} provided for string dimension '{dim.name}'",
                                  "INVALID_ARGUMENT")
        return v
    if isinstance(v, np.generic):
        v = v.item()
    return v


def _check_int(v: Any, dim: Dim) -> None:
    if dim.dtype.kind in "iu":
        if isinstance(v, (float, np.floating)):
            raise IndexError("cannot index integral domain dimension with floating point slice")
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise IndexError("cannot index integral domain dimension with non-integral slice "
                             f"(dtype: {type(v)})")


def _normalize_idx(idx: Any, ndim: int) -> Tuple[Any, ...]:
    if not isinstance(idx, tuple):
        idx = (idx,)
    if any(i is Ellipsis for i in idx):
        k = idx.index(Ellipsis)
        idx = idx[:k] + (slice(None),) * (ndim - len(idx) + 1) + idx[k + 1:]
    if len(idx) > ndim:
        raise IndexError("too many indices for array")
    return idx + (slice(None),) * (ndim - len(idx))


class Array:
    """An array served by a flightd daemon, with TileDB-Py's read and write
    surface. Made by :meth:`tileflight.Client.array`; opening it reads its
    schema (``describe``). ``timestamp`` pins every read (and is the
    timestamp of writes when it is a single value); ``timeout`` bounds
    every call (seconds)."""

    def __init__(self, client: Any, name: str, timestamp: Optional[_query.Timestamp] = None,
                 timeout: Optional[float] = None) -> None:
        self._client = client
        self.uri = name
        self.timestamp = timestamp
        self.timeout = timeout
        self.schema = ArraySchema(client.describe(name, timestamp=timestamp, timeout=timeout))
        self.meta = Metadata(self)
        self._ned: Any = False

    # -- TileDB-Py's Array basics ---------------------------------------------------------------

    def __enter__(self) -> "Array":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release: kept for ``with`` and TileDB-Py's habits."""

    def __repr__(self) -> str:
        return f"tileflight.Array({self.uri!r}, sparse={self.schema.sparse})"

    @property
    def ndim(self) -> int:
        return self.schema.ndim

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.schema.shape

    @property
    def nattr(self) -> int:
        return self.schema.nattr

    def dim(self, key: Any) -> Dim:
        return self.schema.domain.dim(key)

    def attr(self, key: Any) -> Attr:
        return self.schema.attr(key)

    @property
    def dtype(self) -> np.dtype:
        return self.schema.attr(0).dtype

    def nonempty_domain(self) -> Optional[Tuple[Tuple[Any, Any], ...]]:
        """Per dimension the ``(lo, hi)`` the visible fragments wrote (None
        when nothing is written), typed as TileDB-Py types it."""
        if self._ned is not False:
            return self._ned
        dims = list(self.schema.domain)
        if self.schema.kind == "b2nd":
            self._ned = tuple(d.domain for d in dims)
            return self._ned
        frags = self._client.fragments(self.uri, timestamp=self.timestamp, timeout=self.timeout)
        if not frags:
            self._ned = None
            return None
        out = []
        for d in dims:
            los = [f["non_empty_domain"][d.name][0] for f in frags if d.name in f.get("non_empty_domain", {})]
            his = [f["non_empty_domain"][d.name][1] for f in frags if d.name in f.get("non_empty_domain", {})]
            lo, hi = min(los), max(his)
            if d.isvar:
                out.append((lo.encode("utf-8"), hi.encode("utf-8")))
            elif d.dtype.kind in "Mm":
                out.append((_np_scalar(lo, d.dtype), _np_scalar(hi, d.dtype)))
            else:
                out.append((d.dtype.type(lo).item(), d.dtype.type(hi).item()))
        self._ned = tuple(out)
        return self._ned

    # -- reads ------------------------------------------------------------------------------------

    def __getitem__(self, idx: Any) -> Dict[str, np.ndarray]:
        return self.query()[idx]

    @property
    def multi_index(self) -> "_MultiIndexer":
        """Inclusive ranges and points per dimension: ``A.multi_index[1:3, [4, (6, 8)]]``."""
        return self.query().multi_index

    @property
    def df(self) -> "_DataFrameIndexer":
        """``multi_index`` into a pandas DataFrame (dimensions, then attributes)."""
        return self.query().df

    def query(self, attrs: Optional[Sequence[str]] = None, dims: Any = None, cond: Any = None,
              order: Optional[str] = None, coords: Optional[bool] = None,
              timeout: Optional[float] = None, **unsupported: Any) -> "Query":
        """A query with TileDB-Py's options: ``attrs`` (default all; ``[]``
        none), ``dims`` (names, or True/False; default: sparse arrays all,
        dense none), ``cond`` (a QueryCondition string), ``order`` (``"C"``,
        ``"F"``, ``"G"``, ``"U"``), ``coords`` (True: every dimension)."""
        if unsupported:
            raise TypeError(f"query: unsupported argument(s) {sorted(unsupported)}")
        return Query(self, attrs=attrs, dims=dims, cond=cond, order=order, coords=coords,
                     timeout=timeout if timeout is not None else self.timeout)

    # -- writes -----------------------------------------------------------------------------------

    def __setitem__(self, idx: Any, value: Any) -> None:
        """Dense: ``A[box] = {attr: array}`` (each array shaped like the box or
        flat in row-major order); sparse: ``A[coords_0, coords_1] = {attr: values}``.
        One atomic DoPut. A single array is accepted for a one-attribute array."""
        if not isinstance(value, Mapping):
            if self.schema.nattr != 1:
                raise TypeError("assign a dict {attribute: values} to an array of several attributes")
            value = {self.schema.attr(0).name: value}
        for k in value:
            if not self.schema.has_attr(k):
                raise KeyError(f"array {self.uri!r} has no attribute {k!r}")
        ts = self.timestamp if isinstance(self.timestamp, (int, np.integer)) else None
        arrow_schema = self._client.schema(self.uri, timeout=self.timeout)
        cols: Dict[str, pa.Array] = {}
        if self.schema.sparse:
            idx = idx if isinstance(idx, tuple) else (idx,)
            if len(idx) != self.ndim:
                raise IndexError(f"a sparse write takes {self.ndim} coordinate arrays, got {len(idx)}")
            for d, c in zip(self.schema.domain, idx):
                cols[d.name] = _to_arrow(np.asarray(c) if not d.isvar else list(c),
                                         arrow_schema.field(d.name).type, d.type)
            for a in self.schema._attrs:
                if a.name in value:
                    cols[a.name] = _to_arrow(value[a.name], arrow_schema.field(a.name).type, a.type)
            self._client.write(self.uri, pa.table(cols), timestamp=ts, timeout=self.timeout)
            return
        sels = self._dense_sels(_normalize_idx(idx, self.ndim), for_write=True)
        for d, s in zip(self.schema.domain, sels):
            if s.ranges is None or len(s.ranges) != 1 or s.step:
                raise IndexError(f"a dense write fills one box: dimension {d.name!r} needs one "
                                 "step-free range")
        sub = {d.name: s.ranges[0] for d, s in zip(self.schema.domain, sels)}
        for a in self.schema._attrs:
            if a.name not in value:
                raise KeyError(f"a dense write sets every attribute: {a.name!r} is missing")
            cols[a.name] = _to_arrow(value[a.name], arrow_schema.field(a.name).type, a.type)
        self._client.write(self.uri, pa.table(cols), subarray={k: tuple(v) for k, v in sub.items()},
                           timestamp=ts, timeout=self.timeout)

    # -- selections -------------------------------------------------------------------------------

    def _dense_sels(self, idx: Tuple[Any, ...], for_write: bool = False) -> List[_Sel]:
        """``A[...]``'s selection rules (TileDB-Py's index_domain_subarray)."""
        out = []
        ned = None
        for d, i in zip(self.schema.domain, idx):
            lb, ub = d.domain
            if d.isvar:
                if ned is None:
                    ned = self.nonempty_domain() or ()
                k = self.schema.dim_names.index(d.name)
                lb, ub = ned[k] if ned else (None, None)
            if isinstance(i, (list, np.ndarray)) or isinstance(i, pa.Array):
                vals = i.to_pylist() if isinstance(i, pa.Array) else list(np.asarray(i).tolist()
                                                                           if not d.isvar else i)
                out.append(_Sel([[_wire(v, d), _wire(v, d)] for v in vals], len(vals)))
                continue
            squeeze = False
            if not isinstance(i, slice):
                if d.isvar or d.dtype.kind in "fM":
                    i = slice(i, i)
                else:
                    _check_int(i, d)
                    j = int(i) + int(ub) + 1 if int(i) < 0 else int(i)  # negative: from the upper bound
                    if j < lb or j > ub:
                        raise IndexError(f"index {i!r} is outside the domain ({lb!r}, {ub!r}) "
                                         f"of dimension {d.name!r}")
                    i = slice(j, j + 1)
                squeeze = True
            start, stop, step = i.start, i.stop, i.step
            if d.isvar:
                if (start is None) != (stop is None) or start is None:
                    start = lb if start is None else start
                    stop = ub if stop is None else stop
                elif not isinstance(start, (str, bytes)) or not isinstance(stop, (str, bytes)):
                    raise TileflightError(f"Non-string range '({start},{stop})' provided for string "
                                          f"dimension '{d.name}'", "INVALID_ARGUMENT")
                if start is None:  # nothing written: an empty range
                    out.append(_Sel([["", ""]], None, squeeze))
                    continue
                out.append(_Sel([[_wire(start, d), _wire(stop, d)]], None, squeeze))
                continue
            if step is not None and self.schema.sparse:
                raise IndexError("steps are not supported for sparse arrays")
            if step is not None and (not isinstance(step, (int, np.integer)) or step <= 0):
                raise IndexError(f"step must be a positive integer, got {step!r}")
            is_dt = d.dtype.kind == "M"
            if start is not None:
                if is_dt and not isinstance(start, np.datetime64):
                    raise IndexError("cannot index datetime dimension with non-datetime interval")
                _check_int(start, d)
                if not is_dt and start < 0:
                    start = start + ub + 1
                if start < lb:
                    raise IndexError(f"index out of bounds: {i.start!r} is below the domain "
                                     f"({lb!r}, {ub!r}) of dimension {d.name!r}")
            else:
                start = lb
            if stop is not None:
                if is_dt and not isinstance(stop, np.datetime64):
                    raise IndexError("cannot index datetime dimension with non-datetime interval")
                _check_int(stop, d)
                if not is_dt and stop < 0:
                    stop = stop + ub
                if stop > ub:
                    stop = ub if (is_dt or d.dtype.kind == "f") else int(ub) + 1
            else:
                stop = ub if (is_dt or d.dtype.kind == "f") else int(ub) + 1
            if d.dtype.kind == "f":
                out.append(_Sel([[float(start), float(stop)]], None, squeeze, step))
            elif is_dt:
                a, b = _wire(np.datetime64(start), d), _wire(np.datetime64(stop), d)
                out.append(_Sel([[a, b]], b - a + 1, squeeze, step))
            else:
                a, b = int(start), int(stop) - 1
                if b < a:
                    raise IndexError(f"empty selection [{i.start!r}:{i.stop!r}] on dimension {d.name!r}")
                out.append(_Sel([[a, b]], b - a + 1, squeeze, step))
        return out

    def _multi_sels(self, idx: Tuple[Any, ...]) -> List[_Sel]:
        """``multi_index``'s selection rules: inclusive slices, points, lists of both."""
        out = []
        ned = None
        for d, i in zip(self.schema.domain, idx):
            items = i if isinstance(i, list) else [i]
            ranges: List[List[Any]] = []
            count = 0
            for it in items:
                if isinstance(it, slice):
                    if it.step is not None:
                        raise ValueError("multi_index: steps are not supported")
                    lo, hi = it.start, it.stop
                    if lo is None or hi is None:
                        if d.isvar:
                            if ned is None:
                                ned = self.nonempty_domain() or ()
                            k = self.schema.dim_names.index(d.name)
                            dl, du = ned[k] if ned else ("", "")
                        else:
                            dl, du = d.domain
                        lo = dl if lo is None else lo
                        hi = du if hi is None else hi
                elif isinstance(it, tuple):
                    if len(it) != 2:
                        raise ValueError(f"multi_index: a range is a (lo, hi) pair, got {it!r}")
                    lo, hi = it
                else:
                    lo = hi = it
                if d.dtype.kind == "M":
                    lo, hi = np.datetime64(lo), np.datetime64(hi)
                a, b = _wire(lo, d), _wire(hi, d)
                if not d.isvar and d.dtype.kind != "f" and b < a:
                    raise IndexError(f"multi_index: range ({lo!r}, {hi!r}) of dimension {d.name!r} "
                                     "has its upper bound below its lower bound")
                if not d.isvar and d.dtype.kind in "iuM":
                    # Out of the domain: TileDB's error, caught before the call.
                    dl, du = (int(d._json["domain"][0]), int(d._json["domain"][1]))
                    if a < dl or b > du:
                        raise IndexError(f"multi_index: range ({lo!r}, {hi!r}) is outside the domain "
                                         f"({d.domain[0]!r}, {d.domain[1]!r}) of dimension {d.name!r}")
                    count += b - a + 1
                ranges.append([a, b])
            out.append(_Sel(ranges, count if not d.isvar and d.dtype.kind in "iuM" else None))
        return out


def _to_arrow(values: Any, typ: pa.DataType, tdb_type: str) -> pa.Array:
    """NumPy values (any shape, C order) as an Arrow array of the field's read type."""
    mask = None
    if isinstance(values, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(values).ravel()
        values = values.data
    if isinstance(values, np.ndarray):
        arr = values.ravel()
    else:
        arr = np.asarray(values, dtype=object if isinstance(values, list) and values
                         and not np.isscalar(values[0]) else None).ravel()
    if pa.types.is_fixed_size_list(typ):
        n = typ.list_size
        flat = np.ascontiguousarray(arr).view(typ.value_type.to_pandas_dtype()).reshape(-1)
        out = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=typ.value_type), n)
    elif arr.dtype.kind in "Mm":
        ints = arr.astype(_numpy.numpy_dtype(tdb_type)).view(np.int64)
        if pa.types.is_date32(typ) or pa.types.is_time32(typ):
            out = pa.array(ints.astype(np.int32), pa.int32()).view(typ)
        else:
            out = pa.array(ints, pa.int64()).view(typ) if typ.bit_width == 64 else pa.array(ints, typ)
    elif pa.types.is_large_list(typ):
        out = pa.array([None if v is None else np.asarray(v).tolist() for v in arr], type=typ)
    elif pa.types.is_large_string(typ):
        out = pa.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in arr.tolist()], type=typ)
    elif pa.types.is_large_binary(typ) or pa.types.is_fixed_size_binary(typ):
        out = pa.array([v.encode("utf-8") if isinstance(v, str) else (None if v is None else bytes(v))
                        for v in arr.tolist()], type=typ)
    else:
        out = pa.array(arr, type=typ) if arr.dtype != object else pa.array(arr.tolist(), type=typ)
    if mask is not None and mask.any():
        # Nulls where the mask is set: rebuild with None in those cells.
        vals = out.to_pylist()
        out = pa.array([None if m else v for v, m in zip(vals, mask.tolist())], type=typ)
    return out


class Query:
    """``A.query(...)``: indexed like the array (``q[...]``,
    ``q.multi_index[...]``, ``q.df[...]``)."""

    def __init__(self, array: Array, attrs: Optional[Sequence[str]], dims: Any, cond: Any,
                 order: Optional[str], coords: Optional[bool], timeout: Optional[float]) -> None:
        sch = array.schema
        self.array = array
        if attrs is None:
            attrs = sch.attr_names
        attrs = [attrs] if isinstance(attrs, str) else list(attrs)
        for a in attrs:
            if not sch.has_attr(a):
                if sch.domain.has_dim(a):
                    continue
                raise KeyError(f"Selected attribute does not exist: '{a}'")
        if coords is True or dims is True:
            dims = sch.dim_names
        elif dims is False or (dims is None and coords is False):
            dims = []
        elif dims is None:
            dims = None  # decided per indexer (sparse A[] and multi_index: all)
        else:
            dims = [dims] if isinstance(dims, str) else list(dims)
            for d in dims:
                if not sch.domain.has_dim(d):
                    raise KeyError(f"Selected dimension does not exist: '{d}'")
        if order not in _LAYOUTS:
            raise ValueError(f"order must be 'C', 'F', 'G' or 'U', not {order!r}")
        if cond is not None and not isinstance(cond, str):
            cond = getattr(cond, "expression", None) or str(cond)
        self.attrs, self.dims, self.cond, self.order, self.timeout = attrs, dims, cond, order, timeout

    # -- the three indexers ---------------------------------------------------------------------

    def __getitem__(self, idx: Any) -> Dict[str, np.ndarray]:
        a = self.array
        sels = a._dense_sels(_normalize_idx(idx, a.ndim))
        if a.schema.sparse:
            dims = a.schema.dim_names if self.dims is None else self.dims
            return self._read(sels, attrs_first=True, dims=dims, shaped=False)
        return self._read(sels, attrs_first=True, dims=self.dims or [], shaped=True)

    @property
    def multi_index(self) -> "_MultiIndexer":
        return _MultiIndexer(self)

    @property
    def df(self) -> "_DataFrameIndexer":
        return _DataFrameIndexer(self)

    # -- the read -------------------------------------------------------------------------------

    def _read(self, sels: List[_Sel], attrs_first: bool, dims: Sequence[str], shaped: bool,
              masked: bool = True) -> Dict[str, np.ndarray]:
        a = self.array
        sch = a.schema
        attrs = [x for x in self.attrs if sch.has_attr(x)]
        extra_dims = [x for x in self.attrs if not sch.has_attr(x)]
        dims = list(dims) + [x for x in extra_dims if x not in dims]
        # TileDB-Py's order: sparse A[] gives attributes first, everything else dimensions first.
        cols = attrs + dims if attrs_first and sch.sparse else dims + attrs
        subarray = {}
        for d, s in zip(sch.domain, sels):
            if s.ranges is not None and not (d.isvar and s.ranges == [["", ""]] and s.count is None
                                             and a.nonempty_domain() is None):
                subarray[d.name] = s.ranges
        # TileDB-Py's defaults: row-major for dense, unordered for sparse.
        layout = _LAYOUTS[self.order] or ("unordered" if sch.sparse else "row-major")
        if shaped and layout not in ("row-major", "col-major"):
            layout = "row-major"
        query_cols = cols if cols else [sch.dim_names[0]]
        table = a._client.read(a.uri, columns=query_cols, subarray=subarray, filter=self.cond,
                               timestamp=a.timestamp, layout=layout, timeout=self.timeout,
                               progress=False)
        out: Dict[str, np.ndarray] = collections.OrderedDict()
        shape = tuple(s.count for s in sels) if shaped else None
        for name in cols:
            col = table.column(name)
            if sch.has_attr(name):
                at = sch.attr(name)
                v = _numpy.to_numpy(col, at.type, at.cell_val_num, at.isnullable, masked=masked)
            else:
                dm = sch.domain.dim(name)
                v = _numpy.to_numpy(col, dm.type, "var" if dm.isvar else 1)
            if shape is not None:
                # A col-major read is the same cells as a Fortran-ordered array.
                order = "F" if layout == "col-major" else "C"
                v = v.reshape(shape, order=order)
                steps = tuple(slice(None, None, s.step) for s in sels)
                if any(s.step for s in sels):
                    v = v[steps]
                sq = tuple(k for k, s in enumerate(sels) if s.squeeze)
                if sq:
                    v = v.reshape([n for k, n in enumerate(v.shape) if k not in sq])
            out[name] = v
        return out


class _MultiIndexer:
    def __init__(self, q: Query) -> None:
        self.q = q

    def __getitem__(self, idx: Any) -> Dict[str, np.ndarray]:
        a = self.q.array
        sels = a._multi_sels(_normalize_idx(idx, a.ndim))
        if a.schema.sparse:
            dims = a.schema.dim_names if self.q.dims is None else self.q.dims
            return self.q._read(sels, attrs_first=False, dims=dims, shaped=False)
        shaped = all(s.count is not None for s in sels)
        return self.q._read(sels, attrs_first=False, dims=self.q.dims or [], shaped=shaped)


class _DataFrameIndexer:
    def __init__(self, q: Query) -> None:
        self.q = q

    def __getitem__(self, idx: Any) -> Any:
        import pandas as pd
        a = self.q.array
        sels = a._multi_sels(_normalize_idx(idx, a.ndim))
        dims = a.schema.dim_names if self.q.dims is None else self.q.dims
        res = self.q._read(sels, attrs_first=False, dims=dims, shaped=False)
        cols = {}
        for k, v in res.items():
            if isinstance(v, np.ma.MaskedArray):
                v = pd.array(v.data, mask=np.ma.getmaskarray(v)) if v.dtype.kind in "iufb" else \
                    np.where(np.ma.getmaskarray(v), None, v.data.astype(object))
            cols[k] = v
        return pd.DataFrame(cols)
