"""Turn what the tiledb package reports into the expect-JSON layout.

Every value goes through encode_value so that schema fill values, enumeration
values, metadata and read results share one encoding (see README.md).
"""

from __future__ import annotations

import base64
import math
import os

import numpy as np
import tiledb
import tiledb.libtiledb as lt

EXPECT_FORMAT = 1

VAR = lt.TILEDB_VAR_NUM()

# TileDB types whose cells are text for a user: JSON strings.
TEXT_TYPES = {"string_ascii", "string_utf8", "geom_wkt"}
# Byte types: base64 (standard alphabet, padded).
BINARY_TYPES = {"char", "blob", "geom_wkb"}
FLOAT_TYPES = {"float32", "float64"}


def type_name(tdb_type) -> str:
    return tdb_type.name.lower()


def encode_scalar(v, tname: str):
    """One value of one cell, in the JSON encoding of its TileDB type."""
    if v is None or v is np.ma.masked:
        return None
    if tname in FLOAT_TYPES:
        f = float(v)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return f
    if tname == "bool":
        return bool(v)
    if tname.startswith("datetime_") or tname.startswith("time_"):
        if isinstance(v, (np.datetime64, np.timedelta64)):
            return int(v.view("i8") if hasattr(v, "view") else v.astype("i8"))
        return int(v)
    if tname in TEXT_TYPES:
        if isinstance(v, str):
            return v
        return bytes(v).decode("utf-8")
    if tname in BINARY_TYPES:
        return base64.b64encode(to_bytes(v)).decode("ascii")
    return int(v)


def to_bytes(v) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, memoryview):
        return v.tobytes()
    if isinstance(v, np.ndarray):
        return v.tobytes()
    if isinstance(v, np.bytes_):
        return bytes(v)
    return bytes(v)


def encode_cell(v, tname: str, cell_val_num):
    """A whole cell: scalar, list of cell_val_num values, or a var list.

    Text and byte types are always one string per cell, whatever their
    cell_val_num (they map to one binary/string value in Arrow)."""
    if v is None or v is np.ma.masked:
        return None
    if tname in TEXT_TYPES or tname in BINARY_TYPES:
        return encode_scalar(v, tname)
    if cell_val_num == 1:
        return encode_scalar(v, tname)
    # Multi-value numeric: complex (2 floats), record dtypes, or var arrays.
    if isinstance(v, (complex, np.complexfloating)):
        return [encode_scalar(v.real, tname), encode_scalar(v.imag, tname)]
    if isinstance(v, np.void):
        return [encode_scalar(x, tname) for x in v.tolist()]
    if isinstance(v, tuple):
        return [encode_scalar(x, tname) for x in v]
    arr = np.asarray(v)
    if arr.dtype.kind in "Mm":
        arr = arr.view("i8")
    return [encode_scalar(x, tname) for x in arr.reshape(-1)]


def encode_column(values, tname: str, cell_val_num, enum_values=None):
    """A result column. Masked entries become null. With enum_values the
    column holds indexes into the enumeration (what is stored on disk)."""
    mask = None
    if isinstance(values, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(values)
        values = values.data
    out = []
    index = None
    if enum_values is not None:
        index = {encode_enum_key(x): i for i, x in enumerate(enum_values)}
    for i in range(len(values)):
        if mask is not None and mask[i]:
            out.append(None)
            continue
        if index is not None:
            out.append(index[encode_enum_key(values[i])])
            continue
        out.append(encode_cell(values[i], tname, cell_val_num))
    return out


def encode_enum_key(v):
    if isinstance(v, (bytes, np.bytes_)):
        return ("b", bytes(v))
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, (float, np.floating)):
        return ("f", float(v))
    if isinstance(v, (bool, np.bool_)):
        return ("?", bool(v))
    return ("i", int(v))


def cvn(n):
    return "var" if n == VAR else int(n)


# ---------------------------------------------------------------- filters

_OPTION_KEYS = {
    "COMPRESSION_LEVEL": ("level", "level"),
    "COMPRESSION_REINTERPRET_DATATYPE": ("reinterpret_type", "reinterp_dtype"),
    "BIT_WIDTH_MAX_WINDOW": ("max_window", "window"),
    "POSITIVE_DELTA_MAX_WINDOW": ("max_window", "window"),
    "SCALE_FLOAT_BYTEWIDTH": ("bytewidth", "bytewidth"),
    "SCALE_FLOAT_FACTOR": ("factor", "factor"),
    "SCALE_FLOAT_OFFSET": ("offset", "offset"),
    "WEBP_QUALITY": ("quality", "quality"),
    "WEBP_INPUT_FORMAT": ("input_format", "input_format"),
    "WEBP_LOSSLESS": ("lossless", "lossless"),
}


def describe_filter(f) -> dict:
    d = {"name": f.filter_name.lower()}
    for opt in f.options:
        key, attr = _OPTION_KEYS[opt.name]
        v = getattr(f, attr)
        if key == "reinterpret_type":
            v = None if v is None else type_name(
                tiledb.datatypes.DataType.from_numpy(np.dtype(v)).tiledb_type)
        elif key == "input_format":
            v = v.name.lower().removeprefix("webp_")
        elif key == "lossless":
            v = bool(v)
        elif isinstance(v, (np.floating, float)):
            v = float(v)
        elif isinstance(v, (np.integer, int)):
            v = int(v)
        d[key] = v
    return d


def describe_filters(fl) -> list:
    return [describe_filter(f) for f in (fl or [])]


# ---------------------------------------------------------------- schema

def _dump_fill(attr) -> tuple:
    """Fill value and fill validity of a nullable attribute, as printed by
    TileDB's own dump (the Python API refuses to return them)."""
    fill, validity = None, None
    for line in attr._dump().splitlines():
        line = line.strip()
        if line.startswith("- Fill value validity:"):
            validity = line.split(":", 1)[1].strip() == "1"
        elif line.startswith("- Fill value:"):
            fill = line.split(":", 1)[1].strip()
    return fill, validity


def _parse_dump_fill(text, tname, n):
    parts = [p.strip() for p in text.split(",")]
    if tname in TEXT_TYPES or tname in BINARY_TYPES:
        return None  # not used by our cases: nullable strings keep the default
    vals = []
    for p in parts:
        if tname in FLOAT_TYPES:
            vals.append(encode_scalar(float(p), tname))
        else:
            vals.append(int(p))
    if n == 1 or n == "var":
        return vals[0]
    return vals


def describe_attr(a) -> dict:
    tname = type_name(a._tiledb_dtype)
    n = cvn(a.ncells)
    d = {
        "name": a.name,
        "type": tname,
        "cell_val_num": n,
        "nullable": bool(a.isnullable),
        "filters": describe_filters(a.filters),
        "enumeration": a.enum_label,
    }
    numeric_var = n == "var" and tname not in TEXT_TYPES and tname not in BINARY_TYPES
    if a.isnullable or numeric_var:
        # tiledb-py refuses the fill of nullable attributes and crashes on
        # var-sized numeric ones; TileDB's dump prints both.
        text, validity = _dump_fill(a)
        d["fill"] = _parse_dump_fill(text, tname, n)
        d["fill_validity"] = validity if a.isnullable else None
    else:
        fill = a.fill
        if n == "var":
            if tname in TEXT_TYPES or tname in BINARY_TYPES:
                d["fill"] = encode_scalar(to_bytes(np.asarray(fill).reshape(-1)[0]), tname)
            else:
                d["fill"] = encode_scalar(np.asarray(fill).reshape(-1)[0], tname)
        else:
            if isinstance(fill, np.ndarray):
                fill = fill.reshape(-1)[0] if fill.size == 1 else fill
            d["fill"] = encode_cell(fill, tname, n)
        d["fill_validity"] = None
    return d


def describe_dim(dim) -> dict:
    tname = type_name(dim._tiledb_dtype)
    d = {"name": dim.name, "type": tname, "cell_val_num": cvn(dim._ncell)}
    if dim.isvar:
        d["domain"] = None
        d["tile"] = None
    else:
        lo, hi = dim.domain
        d["domain"] = [encode_scalar(lo, tname), encode_scalar(hi, tname)]
        t = dim.tile
        if t is None:
            d["tile"] = None
        elif isinstance(t, np.timedelta64):
            d["tile"] = int(t.astype("i8"))
        else:
            d["tile"] = encode_scalar(t, tname)
    d["filters"] = describe_filters(dim.filters)
    return d


def describe_enum(e) -> dict:
    tname = type_name(e.type)
    n = cvn(e.cell_val_num)
    vals = e.values()
    return {
        "name": e.name,
        "type": tname,
        "cell_val_num": n,
        "ordered": bool(e.ordered),
        "values": [encode_cell(v, tname, n if tname not in TEXT_TYPES else 1) for v in vals],
    }


def describe_schema(A, label_names=None) -> dict:
    s = A.schema
    dom = s.domain
    d = {
        "type": "sparse" if s.sparse else "dense",
        "cell_order": s.cell_order,
        "tile_order": s.tile_order if s.cell_order != "hilbert" else None,
        "capacity": int(s.capacity),
        "allows_duplicates": bool(s.allows_duplicates) if s.sparse else False,
        "version": int(s.version),
        "dimensions": [describe_dim(dom.dim(i)) for i in range(dom.ndim)],
        "attributes": [describe_attr(s.attr(i)) for i in range(s.nattr)],
        "coords_filters": describe_filters(s.coords_filters),
        "offsets_filters": describe_filters(s.offsets_filters),
        "validity_filters": describe_filters(s.validity_filters),
    }
    enums = sorted({a["enumeration"] for a in d["attributes"] if a["enumeration"]})
    d["enumerations"] = [describe_enum(A.enum(n)) for n in enums]
    labels = []
    for name in label_names or ():
        lab = s.dim_label(name)
        labels.append({
            "name": lab.name,
            "dim_index": int(lab.dim_index),
            "order": lab.order,
            "type": type_name(tiledb.datatypes.DataType.from_numpy(lab.dtype).tiledb_type),
            "var": bool(lab.isvar),
            "uri": lab.uri,
            "label_attr_name": lab.label_attr_name,
        })
    d["dimension_labels"] = labels
    return d


# ---------------------------------------------------------------- fragments

def describe_fragments(uri, ctx=None) -> list:
    fl = tiledb.array_fragments(uri, ctx=ctx)
    base = "file://" + os.path.abspath(uri).rstrip("/") + "/"
    out = []
    names = list(fl.uri)
    for i in range(len(names)):
        rel = names[i][len(base):] if names[i].startswith(base) else names[i]
        ned = []
        for rng in fl.nonempty_domain[i]:
            ned.append([_ned_value(rng[0]), _ned_value(rng[1])])
        out.append({
            "uri": rel,
            "name": rel.rsplit("/", 1)[-1],
            "timestamp_range": [int(fl.timestamp_range[i][0]), int(fl.timestamp_range[i][1])],
            "version": int(fl.version[i]),
            "nonempty_domain": ned,
            "cell_num": int(fl.cell_num[i]),
            "sparse": bool(fl.sparse[i]),
            "schema_name": fl.array_schema_name[i],
            "has_consolidated_metadata": bool(fl.has_consolidated_metadata[i]),
        })
    return out


def _ned_value(v):
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode("utf-8")
    if isinstance(v, str):
        return v
    if isinstance(v, (np.datetime64, np.timedelta64)):
        return int(v.astype("i8"))
    if isinstance(v, (float, np.floating)):
        return encode_scalar(v, "float64")
    return int(v)


def describe_to_vacuum(uri, ctx=None) -> list:
    fl = tiledb.array_fragments(uri, ctx=ctx)
    base = "file://" + os.path.abspath(uri).rstrip("/") + "/"
    return sorted(u[len(base):] if u.startswith(base) else u for u in fl.to_vacuum)


# ---------------------------------------------------------------- metadata

def describe_metadata(A) -> dict:
    """Raw metadata keys (as stored) -> plain value, and -> typed value."""
    values, typed = {}, {}
    arr = A.meta._array_or_group
    for i in range(arr._metadata_num()):
        key = arr._get_key_from_index(i)
        is_np = key.startswith(A.meta._NP_DATA_PREFIX)
        data, tdb_type = arr._get_metadata(key, is_np)
        tname = type_name(tdb_type)
        if tname in TEXT_TYPES or tname in BINARY_TYPES:
            raw = to_bytes(data)
            vals = [encode_scalar(raw, tname)]
            num = len(raw)
        else:
            arrv = np.asarray(data).reshape(-1)
            vals = [encode_scalar(x, tname) for x in arrv]
            num = len(vals)
        values[key] = vals[0] if len(vals) == 1 else vals
        typed[key] = {"type": tname, "value_num": num, "values": vals}
    return {"values": values, "typed": typed}


# ---------------------------------------------------------------- reads

def encode_read(A, result: dict, columns=None) -> dict:
    """A read result (name -> numpy array) in the expect layout."""
    s = A.schema
    data = {}
    names = columns or list(result.keys())
    num = None
    for name in names:
        vals = result[name]
        if s.domain.has_dim(name):
            dim = s.domain.dim(name)
            tname, n, enum_vals = type_name(dim._tiledb_dtype), cvn(dim._ncell), None
        else:
            a = s.attr(name)
            tname, n = type_name(a._tiledb_dtype), cvn(a.ncells)
            # Array.query returns enumerated attributes undecoded: the
            # stored indexes, which is what the expect records.
            enum_vals = None
        data[name] = encode_column(vals, tname, n, enum_vals)
        num = len(data[name]) if num is None else num
        if len(data[name]) != num:
            raise ValueError(f"column {name}: {len(data[name])} cells, others {num}")
    return {"columns": names, "num_cells": num or 0, "data": data}


def list_files(uri) -> list:
    out = []
    for root, _dirs, files in os.walk(uri):
        for f in files:
            p = os.path.join(root, f)
            out.append({"path": os.path.relpath(p, uri), "size": os.path.getsize(p)})
    out.sort(key=lambda x: x["path"])
    return out


