"""Arrow columns as the NumPy arrays TileDB-Py returns for the same field.

TileDB-Py gives each TileDB type a NumPy form: numbers as themselves,
``datetime_*``/``time_*`` as ``datetime64``/``timedelta64`` of the unit,
UTF-8 strings as object arrays of ``str``, ASCII strings, ``char`` and
``geom_wkt`` as object arrays of ``bytes``, fixed ``char`` of n as ``S<n>``,
two floats per cell as complex numbers, other fixed multi-value numbers as a
structured dtype (``f0``, ``f1``, ...), var-sized numbers as object arrays of
arrays, and nullable attributes as masked arrays. The daemon sends Arrow
(docs/protocol.md, "Arrow type mapping"); this module turns it back.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pyarrow as pa

__all__ = ["numpy_dtype", "to_numpy", "UNITS"]

# TileDB's datetime/time unit suffix -> NumPy's unit code.
UNITS = {"year": "Y", "month": "M", "week": "W", "day": "D", "hr": "h", "min": "m", "sec": "s",
         "ms": "ms", "us": "us", "ns": "ns", "ps": "ps", "fs": "fs", "as": "as"}

_NUMERIC = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float32", "float64"}
_BYTES_TYPES = {"string_ascii", "char", "geom_wkt", "blob", "geom_wkb", "any",
                "string_utf16", "string_utf32", "string_ucs2", "string_ucs4"}


def numpy_dtype(tdb_type: str, cell_val_num: Any = 1) -> np.dtype:
    """The NumPy dtype TileDB-Py gives a field of this TileDB type."""
    var = cell_val_num == "var"
    n = 1 if var else int(cell_val_num or 1)
    if tdb_type.startswith("datetime_"):
        return np.dtype(f"M8[{UNITS[tdb_type[9:]]}]")
    if tdb_type.startswith("time_"):
        return np.dtype(f"m8[{UNITS[tdb_type[5:]]}]")
    if tdb_type == "bool":
        return np.dtype(bool)
    if tdb_type == "string_utf8":
        return np.dtype("U") if var else np.dtype(f"U{n}")
    if tdb_type in _BYTES_TYPES:
        return np.dtype("S") if var else np.dtype(f"S{n}")
    if tdb_type in _NUMERIC:
        base = np.dtype(tdb_type)
        if var or n == 1:
            return base
        if n == 2 and base.kind == "f":
            return np.dtype(np.complex64 if base.itemsize == 4 else np.complex128)
        return np.dtype([(f"f{i}", base) for i in range(n)])
    return np.dtype(object)


def _raw(col: pa.Array, dtype: Any) -> np.ndarray:
    """A fixed-width column's data buffer as NumPy (values under nulls kept)."""
    buf = col.buffers()[1]
    if buf is None:
        return np.zeros(len(col), dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=len(col) + col.offset)[col.offset:]


def _enum_values(col: pa.Array) -> np.ndarray:
    """An enumerated attribute as TileDB-Py gives it: the values, strings as
    a fixed-width ``str`` array ('' for an index with no value)."""
    d = col.dictionary
    idx = _raw(col.indices, col.indices.type.to_pandas_dtype()).astype(np.int64)
    ok = (idx >= 0) & (idx < len(d)) & ~col.is_null().to_numpy(zero_copy_only=False)
    safe = np.where(ok, idx, 0)
    if pa.types.is_large_string(d.type) or pa.types.is_string(d.type):
        vals = np.array(d.to_pylist() or [""], dtype=str)
        out = vals[safe] if len(d) else np.full(len(idx), "", dtype=vals.dtype)
        out = out.copy()
        out[~ok] = ""
        return out
    vals = d.to_numpy(zero_copy_only=False)
    out = vals[safe].copy() if len(d) else np.zeros(len(idx), dtype=vals.dtype)
    return out


def _b2nd_values(col: pa.Array, dtype_str: str) -> np.ndarray:
    """A .b2nd field back in its NumPy dtype (docs/protocol.md, "Blosc2 NDArrays")."""
    try:
        dt = np.dtype(dtype_str)
    except TypeError:
        dt = None
    t = col.type
    if dt is None or pa.types.is_fixed_size_list(t) and dt.kind != "c":
        flat = col.values.to_numpy(zero_copy_only=False)
        n = t.list_size
        return flat.reshape(len(col), n)
    if dt.kind == "c":
        return np.ascontiguousarray(col.values.to_numpy(zero_copy_only=False)).view(dt.newbyteorder("="))
    if dt.kind in "Mm":
        if pa.types.is_int64(t) or pa.types.is_timestamp(t) or pa.types.is_duration(t):
            return _raw(col, np.int64).view(dt.newbyteorder("="))
        return _raw(col, np.int32).astype(np.int64).view(dt.newbyteorder("="))
    if dt.kind == "S" or dt.kind == "V":
        return np.frombuffer(col.buffers()[1], dtype=f"S{t.byte_width}", count=len(col) + col.offset)[
            col.offset:].astype(dt)
    if dt.kind == "U":
        return np.array(col.to_pylist(), dtype=dt.newbyteorder("="))
    if dt.kind == "b":
        return col.to_numpy(zero_copy_only=False)
    return col.to_numpy(zero_copy_only=False).astype(dt.newbyteorder("="), copy=False)


def _values(col: pa.Array, tdb_type: str, cell_val_num: Any) -> np.ndarray:
    """The column's values (nulls left as whatever the buffers hold)."""
    t = col.type
    if pa.types.is_dictionary(t):
        return _enum_values(col)
    var = cell_val_num == "var"
    if tdb_type.startswith("b2nd:"):
        return _b2nd_values(col, tdb_type[5:])
    if tdb_type.startswith(("datetime_", "time_")):
        dt = numpy_dtype(tdb_type)
        if pa.types.is_date32(t) or pa.types.is_time32(t):
            raw = _raw(col, np.int32).astype(np.int64)
        else:
            raw = _raw(col, np.int64)
        return raw.view(dt)
    if pa.types.is_large_string(t) or pa.types.is_string(t):
        # TileDB-Py strips trailing NULs (the default fill is one NUL byte).
        if tdb_type != "string_utf8":
            vals = [None if s is None else s.encode("utf-8").rstrip(b"\0") for s in col.to_pylist()]
        else:
            vals = [None if s is None else s.rstrip("\0") for s in col.to_pylist()]
        out = np.empty(len(vals), dtype=object)
        out[:] = vals
        return out
    if pa.types.is_large_binary(t) or pa.types.is_binary(t):
        vals = col.to_pylist()
        if tdb_type == "char":
            vals = [None if v is None else v.rstrip(b"\0") for v in vals]
        elif tdb_type == "geom_wkb":
            # TileDB-Py gives WKB geometries as int8 arrays.
            vals = [None if v is None else np.frombuffer(v, dtype=np.int8).copy() for v in vals]
        out = np.empty(len(vals), dtype=object)
        out[:] = vals
        return out
    if pa.types.is_fixed_size_binary(t):
        dt = numpy_dtype(tdb_type, cell_val_num)
        buf = col.buffers()[1]
        w = t.byte_width
        if dt.kind == "U":
            return np.array([None if v is None else v.decode("utf-8") for v in col.to_pylist()],
                            dtype=object)
        raw = np.frombuffer(buf, dtype=f"S{w}", count=len(col) + col.offset)[col.offset:]
        return raw.astype(dt) if dt.itemsize and dt.itemsize != w else raw
    if pa.types.is_fixed_size_list(t):
        dt = numpy_dtype(tdb_type, cell_val_num)
        flat = col.flatten() if col.offset == 0 and col.null_count == 0 else col.values.slice(
            col.offset * t.list_size, len(col) * t.list_size)
        vals = flat.to_numpy(zero_copy_only=False)
        return np.ascontiguousarray(vals).view(dt).reshape(len(col))
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        elem = np.dtype(tdb_type) if tdb_type in _NUMERIC else None
        offs = col.offsets.to_numpy()
        flat = col.values.to_numpy(zero_copy_only=False)
        if elem is not None:
            flat = flat.astype(elem, copy=False)
        out = np.empty(len(col), dtype=object)
        for i in range(len(col)):
            out[i] = flat[offs[i]:offs[i + 1]]
        return out
    if col.null_count:
        # Keep the buffer's values under the nulls (TileDB-Py's masked data).
        dt = t.to_pandas_dtype()
        if pa.types.is_boolean(t):
            vals = col.fill_null(False)
            return vals.to_numpy(zero_copy_only=False)
        return np.frombuffer(col.buffers()[1], dtype=dt, count=len(col) + col.offset)[col.offset:].copy()
    out = col.to_numpy(zero_copy_only=False)
    return out


def to_numpy(col: Any, tdb_type: str, cell_val_num: Any = 1, nullable: bool = False,
             masked: bool = True) -> np.ndarray:
    """An Arrow array or chunked array as TileDB-Py returns the field:
    a masked array for nullable attributes when ``masked``."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    vals = _values(col, tdb_type, cell_val_num)
    if nullable and masked:
        mask: Optional[np.ndarray] = None
        if col.null_count:
            mask = col.is_null().to_numpy(zero_copy_only=False)
        else:
            mask = np.zeros(len(col), dtype=bool)
        return np.ma.MaskedArray(vals, mask=mask)
    return vals
