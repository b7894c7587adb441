#!/usr/bin/env python3
"""The conformance fixture matrix, written by TileDB itself.

    gen_fixtures.py OUTDIR                 every case -> OUTDIR/arrays/<case>/
    gen_fixtures.py --golden DIR           the small golden subset -> DIR/<case>/
    gen_fixtures.py --conformance-md [OUTDIR]
                                           print the features x cases table
                                           (from OUTDIR/index.json, or from the
                                           case list without generating)
    gen_fixtures.py OUTDIR --only a,b      just these cases

Each case writes its array with the tiledb package at fixed timestamps and
seeded data, then `<case>.expect.json` next to it with what TileDB reports and
reads. The JSON layout is described in python_tests/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tiledb  # noqa: E402
import tiledb.libtiledb as lt  # noqa: E402

from fixturelib import (  # noqa: E402
    EXPECT_FORMAT,
    describe_fragments,
    describe_metadata,
    describe_schema,
    describe_to_vacuum,
    encode_read,
    list_files,
)

# Fixed write timestamps (ms since the epoch). They predate the schema's own
# creation time; TileDB then opens with its earliest schema, which is fine.
T1, T2, T3, T4, T5 = 1_000, 2_000, 3_000, 4_000, 5_000

ENCRYPTION_KEY = "0123456789abcdeF0123456789abcdeF"  # 32 bytes: AES-256-GCM

# Every feature a case may claim. test_fixtures.py checks that each one is
# claimed by at least one case and that the claim is visible in the expect
# JSON where that can be checked mechanically.
FEATURES = {
    "dense": "dense array",
    "sparse": "sparse array",
    "dim_1d": "one dimension",
    "dim_2d": "two dimensions",
    "dim_3d": "three dimensions",
    "dim_int": "integer dimension",
    "dim_float": "floating-point dimension",
    "dim_string": "string (var, ascii) dimension",
    "dim_datetime": "datetime dimension",
    "dim_mixed": "dimensions of different types",
    "order_row": "row-major cell order",
    "order_col": "col-major cell or tile order",
    "order_hilbert": "Hilbert cell order",
    "multi_tile": "more than one space tile / data tile",
    "partial_tile": "domain not a multiple of the tile extent",
    "allows_duplicates": "sparse array allowing duplicate coordinates",
    "all_int_types": "int8..uint64 attributes",
    "float_types": "float32/float64 attributes",
    "string_types": "char, string_ascii, string_utf8 attributes",
    "binary_types": "blob attributes",
    "bool": "bool attribute",
    "geometry": "geom_wkb / geom_wkt attributes",
    "datetime_attrs": "every datetime_* and time_* unit as an attribute",
    "multi_value": "fixed cell_val_num 2 and 3",
    "var_string": "var-sized string attribute",
    "var_numeric": "var-sized numeric attribute",
    "nullable": "nullable attribute",
    "nullable_fill": "nullable attribute with a non-default fill value",
    "fill_values": "dense cells never written read back as fill values",
    "custom_fill": "non-default fill value",
    "filters": "non-default attribute filters",
    "filters_coords": "non-default coordinate filters",
    "filters_offsets": "non-default offsets filters",
    "filters_validity": "non-default validity filters",
    "multi_fragment": "more than one fragment",
    "dense_overwrite": "overlapping dense writes",
    "sparse_overwrite": "sparse writes to the same coordinates",
    "consolidated": "consolidated fragments",
    "vacuumed": "vacuumed after consolidation",
    "consolidated_fragment_meta": "consolidated fragment metadata",
    "consolidated_commits": "consolidated commits",
    "delete": "delete query (condition)",
    "delete_consolidated": "delete followed by consolidation",
    "metadata": "array metadata",
    "metadata_deleted_key": "deleted metadata key",
    "metadata_consolidated": "consolidated array metadata",
    "enumeration": "enumerations (string and int)",
    "schema_evolution": "evolved schema (add/drop attribute, extend enumeration)",
    "encryption": "AES-256-GCM encrypted array",
    "dimension_label": "dimension label",
    "time_travel": "reads at an earlier timestamp differ from the latest",
}

CASES: list = []


class Spec:
    def __init__(self, name, description, features, fn, golden=False, encrypted=False):
        unknown = set(features) - set(FEATURES)
        if unknown:
            raise ValueError(f"case {name}: unknown features {sorted(unknown)}")
        self.name, self.description, self.features = name, description, list(features)
        self.fn, self.golden, self.encrypted = fn, golden, encrypted


def case(name, description, features, golden=False, encrypted=False):
    def deco(fn):
        CASES.append(Spec(name, description, features, fn, golden, encrypted))
        return fn
    return deco


class Builder:
    """What a case function uses: create, write at fixed timestamps (each
    followed by a fragment snapshot), and register the reads to record."""

    def __init__(self, spec, uri, ctx):
        self.spec, self.uri, self.ctx = spec, uri, ctx
        self.rng = np.random.default_rng(zlib.crc32(spec.name.encode()))
        self.snapshots = []
        self.reads = []  # (name, timestamp, layout, subarray)
        self.label_names = []
        self.notes = []

    def create(self, schema):
        tiledb.Array.create(self.uri, schema, ctx=self.ctx)

    def open(self, mode="r", timestamp=None):
        return tiledb.open(self.uri, mode, timestamp=timestamp, ctx=self.ctx)

    def write(self, t, fn):
        with self.open("w", timestamp=t) as A:
            fn(A)
        self.snapshot(f"after write at {t}", t)

    def snapshot(self, label, t=None):
        self.snapshots.append({
            "label": label,
            "timestamp": t,
            "fragments": describe_fragments(self.uri, ctx=self.ctx),
        })

    def read(self, name, timestamp=None, layout=None, subarray=None):
        self.reads.append((name, timestamp, layout, subarray))

    def consolidate(self, mode=None, vacuum=False, extra=None):
        # Small budgets: the defaults make TileDB zero gigabytes of buffers,
        # which dominates the run time for arrays this small.
        cfg = {"sm.mem.total_budget": str(64 << 20),
               "sm.consolidation.buffer_size": str(1 << 20)}
        if mode:
            cfg["sm.consolidation.mode"] = mode
        cfg.update(extra or {})
        tiledb.consolidate(self.uri, config=tiledb.Config(cfg), ctx=self.ctx)
        self.snapshot(f"after consolidate mode={mode or 'fragments'}")
        if vacuum:
            vcfg = {}
            if mode:
                vcfg["sm.vacuum.mode"] = mode
            tiledb.vacuum(self.uri, config=tiledb.Config(vcfg), ctx=self.ctx)
            self.snapshot(f"after vacuum mode={mode or 'fragments'}")


_LAYOUTS = {"row-major": "C", "col-major": "F", "global": "G", "unordered": "U"}


def do_read(b, A, layout, subarray):
    s = A.schema
    dims = [s.domain.dim(i).name for i in range(s.domain.ndim)]
    q = A.query(order=_LAYOUTS[layout], dims=dims)
    if subarray is None:
        res = q[:]
    else:
        sel = []
        for d in dims:
            rngs = subarray.get(d)
            if rngs is None:
                sel.append(slice(None))
            else:
                sel.append([slice(lo, hi) for lo, hi in rngs])
        res = q.multi_index[tuple(sel)]
    flat = {}
    for k, v in res.items():
        if isinstance(v, np.ndarray) and v.ndim > 1:
            v = v.reshape(-1) if not isinstance(v, np.ma.MaskedArray) else np.ma.ravel(v)
        flat[k] = v
    attrs = [s.attr(i).name for i in range(s.nattr)]
    labels = [n for n in b.label_names if n in flat]
    return encode_read(A, flat, dims + attrs + labels)


def run_case(spec, arrays_dir):
    uri = os.path.join(arrays_dir, spec.name)
    if os.path.exists(uri):
        shutil.rmtree(uri)
    cfg = {}
    if spec.encrypted:
        cfg = {"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": ENCRYPTION_KEY}
    ctx = tiledb.Ctx(tiledb.Config(cfg))
    b = Builder(spec, uri, ctx)
    spec.fn(b)

    with b.open() as A:
        schema = describe_schema(A, b.label_names)
        metadata = describe_metadata(A)
        default_layout = "row-major" if not A.schema.sparse else "global"
    reads = []
    regs = list(b.reads)
    if not any(r[0] == "default" for r in regs):
        regs.insert(0, ("default", None, None, None))
    for name, t, layout, sub in regs:
        layout = layout or default_layout
        with b.open(timestamp=t) as A:
            r = {"name": name, "timestamp": t, "layout": layout, "subarray": sub}
            r.update(do_read(b, A, layout, sub))
            s_at = describe_schema(A, b.label_names)
            if s_at != schema:
                r["schema"] = s_at
            m_at = describe_metadata(A)
            if m_at != metadata:
                r["metadata"] = m_at
            reads.append(r)

    # A dimension label is an array of its own under __labels/; record its
    # schema and contents like a case's.
    label_arrays = {}
    for lab in schema["dimension_labels"]:
        rel = lab["uri"]
        if rel.startswith("file://"):
            rel = os.path.relpath(rel[len("file://"):], os.path.abspath(uri))
        lab["uri"] = rel
        luri = os.path.join(uri, rel)
        with tiledb.open(luri, ctx=ctx) as L:
            lsch = describe_schema(L)
            lr = {"name": "default", "timestamp": None,
                  "layout": "row-major" if not L.schema.sparse else "global", "subarray": None}
            lr.update(do_read(Builder(spec, luri, ctx), L, lr["layout"], None))
        label_arrays[lab["name"]] = {"uri": rel, "schema": lsch,
                                     "fragments": describe_fragments(luri, ctx=ctx),
                                     "reads": [lr]}

    expect = {
        "format": EXPECT_FORMAT,
        "case": spec.name,
        "description": spec.description,
        "features": spec.features,
        "tiledb_version": ".".join(str(x) for x in tiledb.libtiledb.version()),
        "encryption": {"type": "aes_256_gcm", "key": ENCRYPTION_KEY} if spec.encrypted else None,
        "schema": schema,
        "fragments": describe_fragments(uri, ctx=ctx),
        "to_vacuum": describe_to_vacuum(uri, ctx=ctx),
        "fragment_snapshots": b.snapshots,
        "metadata": metadata,
        "reads": reads,
        "dimension_label_arrays": label_arrays,
        "notes": b.notes,
        "files": list_files(uri),
    }
    with open(uri + ".expect.json", "w") as f:
        json.dump(expect, f, indent=1, sort_keys=False, ensure_ascii=False)
        f.write("\n")
    return expect


# ====================================================================== data

ALL_INT = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
DATETIME_UNITS = ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"]
TIME_UNITS = ["h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"]
_UNIT_NAME = {"Y": "year", "M": "month", "W": "week", "D": "day", "h": "hr", "m": "min",
              "s": "sec", "ms": "ms", "us": "us", "ns": "ns", "ps": "ps", "fs": "fs", "as": "as"}


def ints(rng, dtype, n):
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    v = rng.integers(lo, hi, size=n, endpoint=True).astype(dtype)
    if n >= 2:  # the type's extremes must round-trip too
        v[0], v[-1] = info.min, info.max
    return v


def words(rng, n, alphabet="abcdefghij", maxlen=6):
    out = []
    for _ in range(n):
        k = int(rng.integers(0, maxlen + 1))
        out.append("".join(alphabet[int(i)] for i in rng.integers(0, len(alphabet), k)))
    return out


UTF8_SAMPLES = ["", "a", "é", "日本", "Ωmega", "🙂", "naïve", "x" * 9]


def attr_values(rng, kind, n):
    """Write-ready values for the attribute kinds used by the type cases."""
    if kind in ALL_INT:
        return ints(rng, np.dtype(kind), n)
    if kind in ("float32", "float64"):
        return (rng.standard_normal(n) * 100).astype(kind)
    if kind == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if kind == "char":
        return np.array([bytes([97 + int(i)]) for i in rng.integers(0, 26, n)], dtype="S1")
    if kind == "char_var":
        return np.array([w.encode() for w in words(rng, n)], dtype=object)
    if kind == "ascii":
        return np.array(words(rng, n), dtype=object)
    if kind == "utf8":
        return np.array([UTF8_SAMPLES[int(i)] for i in rng.integers(0, len(UTF8_SAMPLES), n)],
                        dtype=object)
    if kind == "blob":
        return np.array([bytes(rng.integers(0, 256, int(rng.integers(0, 5))).astype(np.uint8))
                         for _ in range(n)], dtype=object)
    if kind == "wkb":
        # Little-endian WKB points.
        return np.array([b"\x01\x01\x00\x00\x00" + np.array([i, -i], "<f8").tobytes()
                         for i in range(n)], dtype=object)
    if kind == "wkt":
        return np.array([f"POINT ({i} {-i})".encode() for i in range(n)], dtype=object)
    if kind.startswith("M8") or kind.startswith("m8"):
        return rng.integers(-10_000, 10_000, n).astype("i8").view(kind)
    raise ValueError(kind)


def type_attrs(kinds, nullable=False):
    out = []
    for k in kinds:
        name = "a_" + k.replace("[", "_").replace("]", "").replace("8", "8")
        if k in ALL_INT or k in ("float32", "float64", "bool"):
            out.append(tiledb.Attr(f"a_{k}", dtype=np.dtype(k), nullable=nullable))
        elif k == "char":
            out.append(tiledb.Attr("a_char", dtype="S1", nullable=nullable))
        elif k == "char_var":
            out.append(tiledb.Attr("a_char_var", dtype=np.bytes_, var=True, nullable=nullable))
        elif k == "ascii":
            out.append(tiledb.Attr("a_string_ascii", dtype="ascii", var=True, nullable=nullable))
        elif k == "utf8":
            out.append(tiledb.Attr("a_string_utf8", dtype=str, var=True, nullable=nullable))
        elif k == "blob":
            out.append(tiledb.Attr("a_blob", dtype="blob", var=True, nullable=nullable))
        elif k == "wkb":
            out.append(tiledb.Attr("a_geom_wkb", dtype="wkb", var=True, nullable=nullable))
        elif k == "wkt":
            out.append(tiledb.Attr("a_geom_wkt", dtype="wkt", var=True, nullable=nullable))
        elif k.startswith("M8") or k.startswith("m8"):
            unit = k[3:-1]
            pre = "datetime" if k.startswith("M8") else "time"
            out.append(tiledb.Attr(f"a_{pre}_{_UNIT_NAME[unit]}", dtype=k, nullable=nullable))
        else:
            raise ValueError(k)
        del name
    return out


BASIC_KINDS = ALL_INT + ["float32", "float64", "bool", "char", "char_var", "ascii", "utf8",
                         "blob", "wkb", "wkt"]
DT_KINDS = [f"M8[{u}]" for u in DATETIME_UNITS] + [f"m8[{u}]" for u in TIME_UNITS]


def write_sparse(A, coords, vals, valid):
    """Sparse write with explicit validity maps (tiledb-py's None inference
    does not cover every attribute kind)."""
    from tiledb.sparse_array import _setitem_impl_sparse
    _setitem_impl_sparse(A, coords, vals, valid)


def values_for(rng, kinds, attrs, n):
    return {a.name: attr_values(rng, k, n) for k, a in zip(kinds, attrs)}


# ====================================================================== dense

@case("dense_1d", "1-D dense int32 dim [1,10] tile 4 (last tile partial); two overlapping "
      "writes at T1 and T2", ["dense", "dim_1d", "dim_int", "order_row", "multi_tile",
                              "partial_tile", "multi_fragment", "dense_overwrite",
                              "fill_values", "time_travel"], golden=True)
def _dense_1d(b):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(1, 10), tile=4, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, attrs=[
        tiledb.Attr("a", dtype=np.int32), tiledb.Attr("f", dtype=np.float64)]))

    def w1(A):
        A[1:7] = {"a": np.arange(10, 16, dtype=np.int32), "f": np.linspace(0, 1, 6)}

    def w2(A):
        A[4:9] = {"a": np.arange(100, 105, dtype=np.int32), "f": np.full(5, -2.5)}
    b.write(T1, w1)
    b.write(T2, w2)
    b.read("default")
    b.read("at_t1", T1)


@case("dense_2d_col", "2-D dense int64 dims [0,6]x[1,8], tiles 3x3 (partial edges), col-major "
      "tile and cell order; three writes", ["dense", "dim_2d", "dim_int", "order_col",
                                            "multi_tile", "partial_tile", "multi_fragment",
                                            "dense_overwrite", "time_travel"])
def _dense_2d_col(b):
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, 6), tile=3, dtype=np.int64),
                        tiledb.Dim("c", domain=(1, 8), tile=3, dtype=np.int64))
    b.create(tiledb.ArraySchema(domain=dom, cell_order="col-major", tile_order="col-major",
                                attrs=[tiledb.Attr("v", dtype=np.int16),
                                       tiledb.Attr("w", dtype=np.float32)]))
    b.write(T1, lambda A: A.__setitem__((slice(0, 7), slice(1, 9)), {
        "v": np.arange(56, dtype=np.int16).reshape(7, 8),
        "w": np.arange(56, dtype=np.float32).reshape(7, 8) / 4}))
    b.write(T2, lambda A: A.__setitem__((slice(2, 5), slice(3, 6)), {
        "v": np.full((3, 3), -1, np.int16), "w": np.full((3, 3), 9.5, np.float32)}))
    b.write(T3, lambda A: A.__setitem__((slice(6, 7), slice(1, 9)), {
        "v": np.full((1, 8), 7, np.int16), "w": np.full((1, 8), 7, np.float32)}))
    b.read("default")
    b.read("col_major", None, "col-major")
    b.read("global", None, "global")
    b.read("subarray", None, "row-major", {"r": [[1, 2], [5, 6]], "c": [[2, 4]]})
    b.read("at_t2", T2)


@case("dense_3d", "3-D dense uint16 dims, row-major tiles with col-major cells",
      ["dense", "dim_3d", "dim_int", "order_row", "order_col", "multi_tile", "partial_tile",
       "fill_values"])
def _dense_3d(b):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(1, 5), tile=2, dtype=np.uint16),
                        tiledb.Dim("y", domain=(0, 4), tile=3, dtype=np.uint16),
                        tiledb.Dim("z", domain=(0, 3), tile=2, dtype=np.uint16))
    b.create(tiledb.ArraySchema(domain=dom, cell_order="col-major", tile_order="row-major",
                                attrs=[tiledb.Attr("a", dtype=np.uint32)]))
    b.write(T1, lambda A: A.__setitem__((slice(1, 5), slice(0, 5), slice(0, 4)),
                                        np.arange(80, dtype=np.uint32).reshape(4, 5, 4)))
    b.read("default")
    b.read("subarray", None, "row-major", {"x": [[2, 3]], "z": [[1, 2]]})


@case("dense_datetime_dim", "1-D dense datetime_day dim, 31 days, weekly tiles",
      ["dense", "dim_1d", "dim_datetime", "multi_tile", "partial_tile", "fill_values"])
def _dense_datetime_dim(b):
    dom = tiledb.Domain(tiledb.Dim("day", domain=(np.datetime64("2024-01-01", "D"),
                                                  np.datetime64("2024-01-31", "D")),
                                   tile=np.timedelta64(7, "D"), dtype="M8[D]"))
    b.create(tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr("temp", dtype=np.float32)]))
    b.write(T1, lambda A: A.__setitem__(slice(np.datetime64("2024-01-03"), np.datetime64("2024-01-20")),
                                        np.linspace(-5, 12, 18).astype(np.float32)))
    b.read("default")


@case("dense_all_types", "dense 1-D array with an attribute of every basic datatype "
      "(ints, floats, bool, char, strings, blob, geometry) and every datetime/time unit; "
      "cells 1-3 and 8-12 of [1,12] written, the rest read as fill values",
      ["dense", "dim_1d", "dim_int", "all_int_types", "float_types", "bool", "string_types",
       "binary_types", "geometry", "datetime_attrs", "var_string", "fill_values", "multi_tile",
       "multi_fragment", "partial_tile"])
def _dense_all_types(b):
    kinds = BASIC_KINDS + DT_KINDS
    attrs = type_attrs(kinds)
    dom = tiledb.Domain(tiledb.Dim("i", domain=(1, 12), tile=5, dtype=np.uint64))
    b.create(tiledb.ArraySchema(domain=dom, attrs=attrs))
    b.write(T1, lambda A: A.__setitem__(slice(1, 4), values_for(b.rng, kinds, attrs, 3)))
    b.write(T2, lambda A: A.__setitem__(slice(8, 13), values_for(b.rng, kinds, attrs, 5)))
    b.read("default")
    b.read("at_t1", T1)


@case("dense_nullable_fill", "dense 2-D array with nullable attributes, with and without "
      "fill values, var and fixed, multi-value and non-default fills",
      ["dense", "dim_2d", "dim_int", "nullable", "nullable_fill", "custom_fill",
       "var_string", "var_numeric", "fill_values", "multi_tile"])
def _dense_nullable_fill(b):
    dom = tiledb.Domain(tiledb.Dim("y", domain=(1, 4), tile=2, dtype=np.int32),
                        tiledb.Dim("x", domain=(1, 4), tile=2, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, attrs=[
        tiledb.Attr("n_i32", dtype=np.int32, nullable=True),
        tiledb.Attr("n_i32_fill", dtype=np.int32, nullable=True, fill=-7),
        tiledb.Attr("n_f64_fill", dtype=np.float64, nullable=True, fill=1.25),
        tiledb.Attr("i16_fill", dtype=np.int16, fill=42),
        tiledb.Attr("f32x2_fill", dtype=np.complex64, fill=np.complex64(1 + 2j)),
        tiledb.Attr("n_str", dtype=str, var=True, nullable=True),
        tiledb.Attr("str_fill", dtype=str, var=True, fill="none"),
        tiledb.Attr("n_var_i64", dtype=np.int64, var=True, nullable=True),
    ]))

    def w(A):
        # tiledb-py infers validity per row for 2-D object arrays, so the
        # validity maps (row-major over the written subarray) are explicit.
        valid = {"n_i32": [1, 0, 1, 1], "n_i32_fill": [0, 1, 0, 1], "n_f64_fill": [1, 0, 0, 1],
                 "n_str": [1, 0, 1, 1], "n_var_i64": [1, 0, 1, 1]}
        vals = {
            "n_i32": np.array([[1, 0], [3, 4]], dtype=np.int32),
            "n_i32_fill": np.array([[0, 2], [0, 4]], dtype=np.int32),
            "n_f64_fill": np.array([[0.5, 0], [0, 4.5]], dtype=np.float64),
            "i16_fill": np.array([[1, 2], [3, 4]], dtype=np.int16),
            "f32x2_fill": np.array([[1j, 2], [3, 4 + 4j]], dtype=np.complex64),
            "n_str": np.array([["a", ""], ["ccc", ""]], dtype=object),
            "str_fill": np.array([["p", "q"], ["", "s"]], dtype=object),
            "n_var_i64": np.array([np.array([1, 2], np.int64), np.array([], np.int64),
                                   np.array([], np.int64), np.array([9], np.int64)],
                                  dtype=object).reshape(2, 2),
        }
        A._setitem_impl((slice(1, 3), slice(2, 4)), vals,
                        {k: np.array(v, dtype=np.uint8) for k, v in valid.items()})
    b.write(T1, w)
    b.read("default")


# ====================================================================== sparse

@case("sparse_1d", "sparse 1-D int64 dim, capacity 4 (several data tiles), 20 cells",
      ["sparse", "dim_1d", "dim_int", "order_row", "multi_tile"])
def _sparse_1d(b):
    dom = tiledb.Domain(tiledb.Dim("k", domain=(-1000, 1000), tile=100, dtype=np.int64))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, capacity=4,
                                attrs=[tiledb.Attr("v", dtype=np.float64)]))
    k = np.sort(b.rng.choice(np.arange(-1000, 1001), 20, replace=False)).astype(np.int64)
    b.write(T1, lambda A: A.__setitem__(k, {"v": b.rng.standard_normal(20)}))
    b.read("default")
    b.read("row_major", None, "row-major")
    b.read("subarray", None, "row-major", {"k": [[-500, 0], [200, 400]]})


@case("sparse_float_hilbert", "sparse 2-D float64 dims, Hilbert cell order, capacity 16, "
      "300 random points in two fragments", ["sparse", "dim_2d", "dim_float", "order_hilbert",
                                            "multi_tile", "multi_fragment", "time_travel"])
def _sparse_float_hilbert(b):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0.0, 100.0), tile=25.0, dtype=np.float64),
                        tiledb.Dim("y", domain=(-50.0, 50.0), tile=25.0, dtype=np.float64))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, cell_order="hilbert", capacity=16,
                                attrs=[tiledb.Attr("id", dtype=np.uint32)]))
    for t, lo in ((T1, 0), (T2, 150)):
        x = np.round(b.rng.uniform(0, 100, 150), 3)
        y = np.round(b.rng.uniform(-50, 50, 150), 3)
        b.write(t, lambda A, x=x, y=y, lo=lo: A.__setitem__(
            (x, y), {"id": np.arange(lo, lo + 150, dtype=np.uint32)}))
    b.read("default")
    b.read("row_major", None, "row-major")
    b.read("subarray", None, "row-major", {"x": [[10.0, 40.0]], "y": [[-10.0, 10.0]]})
    b.read("at_t1", T1, "row-major")


@case("sparse_string_dim", "sparse 2-D: string_ascii (var) dim and int32 dim, string and "
      "int attributes, two fragments with overwrites",
      ["sparse", "dim_2d", "dim_string", "dim_int", "dim_mixed", "var_string", "multi_fragment",
       "sparse_overwrite", "time_travel", "multi_tile"], golden=True)
def _sparse_string_dim(b):
    dom = tiledb.Domain(tiledb.Dim("name", dtype="ascii"),
                        tiledb.Dim("n", domain=(0, 99), tile=10, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, capacity=5, attrs=[
        tiledb.Attr("label", dtype=str, var=True), tiledb.Attr("score", dtype=np.int64)]))
    names = ["apple", "b", "banana", "cherry", "date", "", "elder", "fig", "grape", "zz"]
    n = np.array([3, 50, 7, 7, 99, 0, 12, 60, 1, 42], np.int32)
    b.write(T1, lambda A: A.__setitem__((np.array(names, dtype=object), n), {
        "label": np.array([f"{s}-{i}" for s, i in zip(names, n)], dtype=object),
        "score": np.arange(10, dtype=np.int64)}))
    b.write(T2, lambda A: A.__setitem__(
        (np.array(["banana", "fig", "kiwi"], dtype=object), np.array([7, 60, 5], np.int32)),
        {"label": np.array(["new", "newer", "added"], dtype=object),
         "score": np.array([100, 200, 300], np.int64)}))
    b.read("default")
    b.read("row_major", None, "row-major")
    b.read("subarray", None, "row-major", {"name": [["b", "d"]]})
    b.read("at_t1", T1, "row-major")


@case("sparse_datetime_mixed", "sparse 2-D: datetime_ms dim and uint8 dim, col-major cells "
      "and tiles", ["sparse", "dim_2d", "dim_datetime", "dim_int", "dim_mixed", "order_col",
                    "multi_tile"])
def _sparse_datetime_mixed(b):
    start = np.datetime64("2024-03-01T00:00:00.000", "ms")
    dom = tiledb.Domain(
        tiledb.Dim("t", domain=(start, start + np.timedelta64(86_400_000, "ms")),
                   tile=np.timedelta64(3_600_000, "ms"), dtype="M8[ms]"),
        tiledb.Dim("sensor", domain=(0, 15), tile=4, dtype=np.uint8))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, cell_order="col-major",
                                tile_order="col-major", capacity=8,
                                attrs=[tiledb.Attr("reading", dtype=np.float32)]))
    t = start + b.rng.integers(0, 86_400_000, 40).astype("m8[ms]")
    s = b.rng.integers(0, 16, 40).astype(np.uint8)
    b.write(T1, lambda A: A.__setitem__((t, s), {"reading": b.rng.standard_normal(40).astype(np.float32)}))
    b.read("default")
    b.read("row_major", None, "row-major")


@case("sparse_duplicates", "sparse 1-D allowing duplicates; duplicate coordinates within and "
      "across two fragments", ["sparse", "dim_1d", "dim_int", "allows_duplicates",
                               "multi_fragment", "sparse_overwrite", "time_travel"])
def _sparse_duplicates(b):
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 9), tile=5, dtype=np.uint32))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, allows_duplicates=True, capacity=3,
                                attrs=[tiledb.Attr("v", dtype=np.int32)]))
    b.write(T1, lambda A: A.__setitem__(np.array([1, 1, 2, 5, 5, 5], np.uint32),
                                        {"v": np.arange(6, dtype=np.int32)}))
    b.write(T2, lambda A: A.__setitem__(np.array([1, 9], np.uint32),
                                        {"v": np.array([100, 900], np.int32)}))
    # With duplicates, the order of equal coordinates is TileDB's choice; the
    # row-major read is what to compare as a multiset per coordinate.
    b.read("default", None, "row-major")
    b.read("at_t1", T1, "row-major")
    b.notes.append("duplicates: compare cells with equal coordinates as a multiset")


@case("sparse_overwrite", "sparse 2-D int dims; second and third fragments rewrite some of "
      "the same coordinates (newest wins)", ["sparse", "dim_2d", "dim_int", "multi_fragment",
                                             "sparse_overwrite", "time_travel"])
def _sparse_overwrite(b):
    dom = tiledb.Domain(tiledb.Dim("r", domain=(1, 8), tile=4, dtype=np.int16),
                        tiledb.Dim("c", domain=(1, 8), tile=4, dtype=np.int16))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, capacity=4,
                                attrs=[tiledb.Attr("v", dtype=np.int64)]))
    r = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int16)
    c = np.array([8, 7, 6, 5, 4, 3, 2, 1], np.int16)
    b.write(T1, lambda A: A.__setitem__((r, c), {"v": np.arange(8, dtype=np.int64)}))
    b.write(T2, lambda A: A.__setitem__((r[:4], c[:4]), {"v": np.arange(4, dtype=np.int64) + 10}))
    b.write(T3, lambda A: A.__setitem__((r[2:6], c[2:6]), {"v": np.arange(4, dtype=np.int64) + 20}))
    b.read("default", None, "row-major")
    b.read("at_t1", T1, "row-major")
    b.read("at_t2", T2, "row-major")


@case("sparse_all_types", "sparse 1-D array with an attribute of every basic datatype",
      ["sparse", "dim_1d", "dim_int", "all_int_types", "float_types", "bool", "string_types",
       "binary_types", "geometry", "var_string"])
def _sparse_all_types(b):
    attrs = type_attrs(BASIC_KINDS)
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, 999), tile=100, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, attrs=attrs))
    k = np.sort(b.rng.choice(1000, 30, replace=False)).astype(np.int32)
    b.write(T1, lambda A: A.__setitem__(k, values_for(b.rng, BASIC_KINDS, attrs, 30)))
    b.read("default")


@case("sparse_datetime_attrs", "sparse array with an attribute of every datetime_* and time_* "
      "unit", ["sparse", "dim_1d", "dim_int", "datetime_attrs"])
def _sparse_datetime_attrs(b):
    attrs = type_attrs(DT_KINDS)
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, 99), tile=10, dtype=np.int8))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, attrs=attrs))
    k = np.arange(0, 40, 4).astype(np.int8)
    b.write(T1, lambda A: A.__setitem__(k, values_for(b.rng, DT_KINDS, attrs, 10)))
    b.read("default")


@case("var_nullable", "sparse array with multi-value (2, 3), var-sized (string, numeric) and "
      "nullable attributes, some with non-default fill values",
      ["sparse", "dim_1d", "dim_int", "multi_value", "var_string", "var_numeric", "nullable",
       "nullable_fill", "custom_fill"], golden=True)
def _var_nullable(b):
    dom = tiledb.Domain(tiledb.Dim("i", domain=(1, 100), tile=50, dtype=np.int32))
    rec3 = np.dtype([("", np.int16)] * 3)
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, capacity=4, attrs=[
        tiledb.Attr("f32x2", dtype=np.complex64),
        tiledb.Attr("f64x2", dtype=np.complex128),
        tiledb.Attr("i16x3", dtype=rec3),
        tiledb.Attr("char3", dtype="S3"),
        tiledb.Attr("s", dtype=str, var=True),
        tiledb.Attr("vi32", dtype=np.int32, var=True),
        tiledb.Attr("vf64", dtype=np.float64, var=True),
        tiledb.Attr("n_u8", dtype=np.uint8, nullable=True),
        tiledb.Attr("n_f32_fill", dtype=np.float32, nullable=True, fill=0.5),
        tiledb.Attr("n_s", dtype=str, var=True, nullable=True),
        tiledb.Attr("n_ascii", dtype="ascii", var=True, nullable=True),
        tiledb.Attr("n_vi64", dtype=np.int64, var=True, nullable=True),
    ]))
    n = 10
    k = np.arange(1, 2 * n, 2).astype(np.int32)

    valid = {}

    def nullify(name, vals, every, placeholder):
        valid[name] = np.array([0 if i % every == 1 else 1 for i in range(len(vals))], np.uint8)
        out = np.empty(len(vals), dtype=object)
        for i, v in enumerate(vals):
            out[i] = placeholder if valid[name][i] == 0 else v
        return out

    def w(A):
        vals = {
            "f32x2": (np.arange(n) + 1j * np.arange(n)).astype(np.complex64),
            "f64x2": (np.arange(n) * 0.5 - 1j).astype(np.complex128),
            "i16x3": np.array([(i, -i, i * i) for i in range(n)], dtype=rec3),
            "char3": np.array([b"abc", b"de", b"f", b"ghi", b"jkl", b"mno", b"pq", b"r",
                               b"stu", b"vwx"], dtype="S3"),
            "s": np.array(words(b.rng, n), dtype=object),
            "vi32": np.array([np.arange(i % 4, dtype=np.int32) for i in range(n)], dtype=object),
            "vf64": np.array([np.linspace(0, 1, i % 3 + 1) for i in range(n)], dtype=object),
            "n_u8": nullify("n_u8", np.arange(n, dtype=np.uint8), 3, 0).astype(np.uint8),
            "n_f32_fill": nullify("n_f32_fill", np.arange(n) / 2, 4, 0.0).astype(np.float32),
            "n_s": nullify("n_s", UTF8_SAMPLES + ["x", "y"], 2, ""),
            "n_ascii": nullify("n_ascii", words(b.rng, n), 3, ""),
            "n_vi64": nullify("n_vi64", [np.arange(i % 3, dtype=np.int64) for i in range(n)], 3,
                              np.array([], np.int64)),
        }
        write_sparse(A, k, vals, valid)
    b.write(T1, w)
    b.read("default")


@case("filters", "sparse 2-D array with a non-default filter pipeline on every attribute, "
      "each dimension (coordinates), the offsets and the validity", ["sparse", "dim_2d", "dim_int",
                                                        "filters", "filters_coords",
                                                        "filters_offsets", "filters_validity",
                                                        "nullable", "var_string", "multi_tile"])
def _filters(b):
    dom = tiledb.Domain(
        tiledb.Dim("x", domain=(0, 999), tile=100, dtype=np.int64,
                   filters=[tiledb.DoubleDeltaFilter(), tiledb.ZstdFilter(level=7)]),
        tiledb.Dim("y", domain=(0, 999), tile=100, dtype=np.int64,
                   filters=[tiledb.DeltaFilter(), tiledb.BitWidthReductionFilter(window=64)]))
    attrs = [
        tiledb.Attr("gzip", dtype=np.int32, filters=[tiledb.GzipFilter(level=6)]),
        tiledb.Attr("zstd", dtype=np.int32, filters=[tiledb.ZstdFilter(level=-3)]),
        tiledb.Attr("lz4", dtype=np.int32, filters=[tiledb.LZ4Filter()]),
        tiledb.Attr("rle", dtype=np.int32, filters=[tiledb.RleFilter()]),
        tiledb.Attr("bzip2", dtype=np.int32, filters=[tiledb.Bzip2Filter(level=9)]),
        tiledb.Attr("dd", dtype=np.int64, filters=[tiledb.DoubleDeltaFilter()]),
        tiledb.Attr("dd_reinterp", dtype=np.uint32,
                    filters=[tiledb.DoubleDeltaFilter(reinterp_dtype=np.int32)]),
        tiledb.Attr("delta", dtype=np.uint32, filters=[tiledb.DeltaFilter()]),
        tiledb.Attr("bwr", dtype=np.int64, filters=[tiledb.BitWidthReductionFilter(window=32)]),
        tiledb.Attr("bitshuffle", dtype=np.int16, filters=[tiledb.BitShuffleFilter(),
                                                           tiledb.LZ4Filter(level=1)]),
        tiledb.Attr("byteshuffle", dtype=np.float32, filters=[tiledb.ByteShuffleFilter(),
                                                              tiledb.ZstdFilter()]),
        tiledb.Attr("posdelta", dtype=np.uint64, filters=[tiledb.PositiveDeltaFilter(window=16)]),
        tiledb.Attr("md5", dtype=np.int32, filters=[tiledb.ChecksumMD5Filter()]),
        tiledb.Attr("sha256", dtype=np.int32, filters=[tiledb.ChecksumSHA256Filter(),
                                                       tiledb.GzipFilter()]),
        tiledb.Attr("dict", dtype=str, var=True, filters=[tiledb.DictionaryFilter(),
                                                          tiledb.ZstdFilter(level=1)]),
        tiledb.Attr("scale", dtype=np.float64,
                    filters=[tiledb.FloatScaleFilter(factor=0.01, offset=5.0, bytewidth=4)]),
        tiledb.Attr("xor", dtype=np.float32, filters=[tiledb.XORFilter(), tiledb.LZ4Filter()]),
        tiledb.Attr("rle_str", dtype="ascii", var=True, filters=[tiledb.RleFilter()]),
        tiledb.Attr("n_noop", dtype=np.int8, nullable=True, filters=[tiledb.NoOpFilter()]),
    ]
    b.create(tiledb.ArraySchema(
        domain=dom, sparse=True, capacity=32, attrs=attrs,
        offsets_filters=[tiledb.PositiveDeltaFilter(), tiledb.BitWidthReductionFilter(),
                         tiledb.ZstdFilter(level=2)],
        validity_filters=[tiledb.GzipFilter(level=1)]))
    n = 200
    # Distinct points already in the global order (row-major tiles of 100x100,
    # row-major cells), so that monotone attributes stay monotone on disk.
    flat = np.sort(b.rng.choice(1000 * 1000, n, replace=False))
    x, y = (flat // 1000).astype(np.int64), (flat % 1000).astype(np.int64)
    order = np.lexsort((y, x, y // 100, x // 100))
    x, y = x[order], y[order]
    r = b.rng
    vals = {
        "gzip": r.integers(-5000, 5000, n).astype(np.int32),
        "zstd": np.repeat(np.arange(20, dtype=np.int32), 10),
        "lz4": r.integers(0, 100, n).astype(np.int32),
        "rle": np.repeat(np.arange(8, dtype=np.int32), 25),
        "bzip2": r.integers(0, 2, n).astype(np.int32),
        "dd": np.cumsum(r.integers(0, 10, n)).astype(np.int64),
        "dd_reinterp": (np.arange(n) * 3).astype(np.uint32),
        "delta": np.cumsum(r.integers(0, 100, n)).astype(np.uint32),
        "bwr": r.integers(-100, 100, n).astype(np.int64),
        "bitshuffle": r.integers(-300, 300, n).astype(np.int16),
        "byteshuffle": r.standard_normal(n).astype(np.float32),
        "posdelta": np.cumsum(r.integers(0, 1000, n)).astype(np.uint64),
        "md5": r.integers(-10, 10, n).astype(np.int32),
        "sha256": r.integers(-10, 10, n).astype(np.int32),
        "dict": np.array([["red", "green", "blue", ""][int(i)] for i in r.integers(0, 4, n)],
                         dtype=object),
        "scale": np.round(r.uniform(0, 10, n), 2),
        "xor": r.standard_normal(n).astype(np.float32),
        "rle_str": np.array(["aaa" if i < n // 2 else "bb" for i in range(n)], dtype=object),
        "n_noop": np.array([None if i % 5 == 0 else i % 100 for i in range(n)], dtype=object),
    }
    b.write(T1, lambda A: A.__setitem__((x, y), vals))
    b.read("default")
    b.notes.append("scale: float_scale is lossy; data holds what TileDB reads back")
    # tiledb-py copies coords_filters onto every dimension (replacing their own
    # filters) and TileDB then reports empty coords filters, so the coordinate
    # filters are set per dimension here.


@case("filters_dense_webp", "dense 2-D uint8 RGB image with the WebP filter (lossless)",
      ["dense", "dim_2d", "dim_int", "filters", "multi_tile"])
def _filters_dense_webp(b):
    dom = tiledb.Domain(tiledb.Dim("y", domain=(1, 8), tile=4, dtype=np.uint32),
                        tiledb.Dim("x", domain=(1, 24), tile=12, dtype=np.uint32))
    b.create(tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr(
        "rgb", dtype=np.uint8,
        filters=[tiledb.WebpFilter(lt.WebpInputFormat.WEBP_RGB, 100.0, True)])]))
    img = b.rng.integers(0, 256, (8, 24)).astype(np.uint8)
    b.write(T1, lambda A: A.__setitem__((slice(1, 9), slice(1, 25)), img))
    b.read("default")


# ====================================================================== history

def _three_dense_writes(b, n=12, tile=4):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(1, n), tile=tile, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr("a", dtype=np.int32)]))
    b.write(T1, lambda A: A.__setitem__(slice(1, 7), np.arange(1, 7, dtype=np.int32)))
    b.write(T2, lambda A: A.__setitem__(slice(5, 11), np.arange(50, 56, dtype=np.int32)))
    b.write(T3, lambda A: A.__setitem__(slice(9, 13), np.arange(90, 94, dtype=np.int32)))


def _three_sparse_writes(b):
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 99), tile=10, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, capacity=4, attrs=[
        tiledb.Attr("a", dtype=np.int32), tiledb.Attr("s", dtype=str, var=True)]))
    for t, ks in ((T1, [1, 5, 10, 20]), (T2, [5, 30, 31]), (T3, [10, 31, 77, 99])):
        k = np.array(ks, np.int32)
        b.write(t, lambda A, k=k, t=t: A.__setitem__(k, {
            "a": k * 10 + t // 1000, "s": np.array([f"t{t}k{i}" for i in k], dtype=object)}))


@case("consolidated", "dense 1-D: three overlapping fragments consolidated into one; the "
      "old fragments are kept (not vacuumed)", ["dense", "dim_1d", "dim_int", "multi_fragment",
                                                "dense_overwrite", "consolidated",
                                                "time_travel"])
def _consolidated(b):
    _three_dense_writes(b)
    b.consolidate()
    b.read("default")
    b.read("at_t2", T2)


@case("consolidated_vacuumed", "dense 1-D: three fragments consolidated, then vacuumed",
      ["dense", "dim_1d", "dim_int", "multi_fragment", "dense_overwrite", "consolidated",
       "vacuumed"])
def _consolidated_vacuumed(b):
    _three_dense_writes(b)
    b.consolidate(vacuum=True)
    b.read("default")
    b.read("at_t2", T2)
    b.notes.append("at_t2: the fragments before T3 were vacuumed; TileDB reads what is left")


@case("consolidated_fragment_meta", "sparse 1-D: three fragments with consolidated fragment "
      "metadata (__fragment_meta)", ["sparse", "dim_1d", "dim_int", "multi_fragment",
                                     "sparse_overwrite", "consolidated_fragment_meta",
                                     "var_string", "time_travel", "multi_tile"])
def _consolidated_fragment_meta(b):
    _three_sparse_writes(b)
    b.consolidate("fragment_meta")
    b.read("default")
    b.read("row_major", None, "row-major")
    b.read("at_t2", T2, "row-major")


@case("consolidated_commits", "sparse 1-D: three fragments whose commits are consolidated "
      "(a .con file), not vacuumed", ["sparse", "dim_1d", "dim_int", "multi_fragment",
                                      "sparse_overwrite", "consolidated_commits", "var_string",
                                      "time_travel"])
def _consolidated_commits(b):
    _three_sparse_writes(b)
    b.consolidate("commits")
    b.read("default")
    b.read("at_t1", T1, "row-major")


@case("consolidated_commits_vacuumed", "sparse 1-D: consolidated commits, then vacuumed "
      "(the .wrt files are gone)", ["sparse", "dim_1d", "dim_int", "multi_fragment",
                                    "consolidated_commits", "vacuumed", "var_string",
                                    "time_travel"])
def _consolidated_commits_vacuumed(b):
    _three_sparse_writes(b)
    b.consolidate("commits", vacuum=True)
    b.read("default")
    b.read("at_t2", T2, "row-major")


@case("delete", "sparse 2-D: two fragments, then a delete query (a > 40) at T3",
      ["sparse", "dim_2d", "dim_int", "multi_fragment", "delete", "time_travel"])
def _delete(b):
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, 9), tile=5, dtype=np.int32),
                        tiledb.Dim("c", domain=(0, 9), tile=5, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, capacity=4,
                                attrs=[tiledb.Attr("a", dtype=np.int32),
                                       tiledb.Attr("s", dtype=str, var=True)]))
    r = np.arange(10, dtype=np.int32)
    b.write(T1, lambda A: A.__setitem__((r, r), {
        "a": r * 10, "s": np.array([f"d{i}" for i in r], dtype=object)}))
    b.write(T2, lambda A: A.__setitem__((r[:5], 9 - r[:5]), {
        "a": r[:5] * 11, "s": np.array([f"e{i}" for i in r[:5]], dtype=object)}))
    with b.open("d", timestamp=T3) as A:
        A.query(cond="a > 40").submit()
    b.snapshot("after delete at 3000", T3)
    b.read("default", None, "row-major")
    b.read("at_t2", T2, "row-major")


@case("delete_consolidated", "sparse 1-D: a write, a delete (s == 'b' or a < 3), another write, "
      "then consolidation (deleted cells purged) and vacuum",
      ["sparse", "dim_1d", "dim_int", "multi_fragment", "delete", "delete_consolidated",
       "consolidated", "vacuumed", "var_string", "metadata"], golden=True)
def _delete_consolidated(b):
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 19), tile=10, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, capacity=4, attrs=[
        tiledb.Attr("a", dtype=np.int32), tiledb.Attr("s", dtype=str, var=True)]))
    k = np.arange(0, 10, dtype=np.int32)
    b.write(T1, lambda A: A.__setitem__(k, {
        "a": k, "s": np.array(["a", "b", "c", "b", "a", "b", "c", "a", "b", "c"], dtype=object)}))
    with b.open("d", timestamp=T2) as A:
        A.query(cond="s == 'b' or a < 3").submit()
    b.snapshot("after delete at 2000", T2)
    k2 = np.array([1, 15], np.int32)
    b.write(T3, lambda A: (A.__setitem__(k2, {"a": k2 * 100, "s": np.array(["b", "z"], dtype=object)}),
                           A.meta.__setitem__("note", "after delete")))
    b.consolidate(vacuum=True, extra={"sm.consolidation.purge_deleted_cells": "true"})
    b.read("default")
    b.read("row_major", None, "row-major")


@case("metadata", "dense 1-D with array metadata of many types written in three steps, one "
      "key deleted, one overwritten, then the metadata consolidated (not vacuumed)",
      ["dense", "dim_1d", "dim_int", "metadata", "metadata_deleted_key",
       "metadata_consolidated"], golden=True)
def _metadata(b):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 3), tile=4, dtype=np.int8))
    b.create(tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr("a", dtype=np.int8)]))

    def m1(A):
        A[0:4] = np.arange(4, dtype=np.int8)
        A.meta["int"] = 42
        A.meta["neg"] = -7
        A.meta["float"] = 2.5
        A.meta["ints"] = (1, 2, 3)
        A.meta["floats"] = (0.5, -1.25)
        A.meta["str"] = "héllo wörld"
        A.meta["empty_str"] = ""
        A.meta["bytes"] = b"\x00\x01\xfe\xff"
        A.meta["to_delete"] = 1
        A.meta["overwritten"] = "old"
        for dt in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "uint64", "float32"]:
            A.meta["np_" + dt] = np.array([1, 2], dtype=dt)

    def m2(A):
        del A.meta["to_delete"]
        A.meta["overwritten"] = "new"
    b.write(T1, m1)
    b.write(T2, m2)
    with b.open("w", timestamp=T3) as A:
        A.meta["later"] = 3
    b.consolidate("array_meta")
    b.read("default")
    b.read("at_t1", T1)


# ====================================================================== schema features

@case("enumerations", "sparse array with a string enumeration (unordered) and an int "
      "enumeration (ordered); attributes use each, one nullable",
      ["sparse", "dim_1d", "dim_int", "enumeration", "nullable"], golden=True)
def _enumerations(b):
    colors = tiledb.Enumeration("colors", False, ["red", "green", "blue", ""])
    sizes = tiledb.Enumeration("sizes", True, np.array([10, 20, 50, 100], dtype=np.int32))
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, 9), tile=10, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, enums=[colors, sizes], attrs=[
        tiledb.Attr("color", dtype=np.uint8, enum_label="colors"),
        tiledb.Attr("size", dtype=np.int16, enum_label="sizes", nullable=True),
        tiledb.Attr("v", dtype=np.float64),
    ]))
    i = np.arange(8, dtype=np.int32)
    b.write(T1, lambda A: A.__setitem__(i, {
        "color": np.array([0, 1, 2, 3, 0, 1, 2, 0], np.uint8),
        "size": np.array([0, 1, None, 3, 2, None, 0, 1], dtype=object),
        "v": i * 1.5}))
    b.read("default")
    b.notes.append("enumerated attributes: data holds enumeration indexes")


@case("evolved_schema", "sparse array whose schema evolved at T2 (add attribute b, extend "
      "enumeration) and at T4 (drop attribute c); fragments written before and after each",
      ["sparse", "dim_1d", "dim_int", "schema_evolution", "enumeration", "multi_fragment",
       "time_travel"], golden=True)
def _evolved_schema(b):
    kinds = tiledb.Enumeration("kinds", False, ["x", "y"])
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, 99), tile=10, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, sparse=True, enums=[kinds], attrs=[
        tiledb.Attr("a", dtype=np.int32), tiledb.Attr("c", dtype=np.float32),
        tiledb.Attr("kind", dtype=np.uint8, enum_label="kinds")]))
    k1 = np.array([1, 2, 3], np.int32)
    b.write(T1, lambda A: A.__setitem__(k1, {"a": k1, "c": k1 * 0.5,
                                             "kind": np.array([0, 1, 0], np.uint8)}))
    se = tiledb.ArraySchemaEvolution(b.ctx)
    se.add_attribute(tiledb.Attr("b", dtype=np.int64, fill=-1))
    with b.open() as A:
        se.extend_enumeration(A.enum("kinds").extend(["z"]))
    se.timestamp(T2)
    se.array_evolve(b.uri)
    b.snapshot("after evolution at 2000 (add b, extend kinds)", T2)
    k2 = np.array([2, 10, 11], np.int32)
    b.write(T3, lambda A: A.__setitem__(k2, {"a": k2 * 10, "c": k2 * 1.5,
                                             "kind": np.array([2, 2, 1], np.uint8),
                                             "b": k2.astype(np.int64) * 100}))
    se = tiledb.ArraySchemaEvolution(b.ctx)
    se.drop_attribute("c")
    se.timestamp(T4)
    se.array_evolve(b.uri)
    b.snapshot("after evolution at 4000 (drop c)", T4)
    k3 = np.array([3, 50], np.int32)
    b.write(T5, lambda A: A.__setitem__(k3, {"a": k3 * 100, "kind": np.array([1, 2], np.uint8),
                                             "b": np.array([7, 8], np.int64)}))
    b.read("default", None, "row-major")
    b.read("at_t1", T1, "row-major")
    b.read("at_t3", T3, "row-major")
    b.notes.append("reads before an evolution carry that read's own schema")


@case("encrypted", "dense 2-D array encrypted with AES-256-GCM (key in expect.encryption)",
      ["dense", "dim_2d", "dim_int", "encryption", "metadata", "multi_tile"], encrypted=True)
def _encrypted(b):
    dom = tiledb.Domain(tiledb.Dim("y", domain=(1, 4), tile=2, dtype=np.int32),
                        tiledb.Dim("x", domain=(1, 4), tile=2, dtype=np.int32))
    b.create(tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr("v", dtype=np.float64),
                                                   tiledb.Attr("s", dtype=str, var=True)]))

    def w(A):
        A[1:5, 1:5] = {"v": np.arange(16, dtype=np.float64).reshape(4, 4),
                       "s": np.array([f"c{i}" for i in range(16)], dtype=object).reshape(4, 4)}
        A.meta["secret"] = "shh"
    b.write(T1, w)
    b.read("default")


@case("dimension_label", "dense 1-D array with an increasing float64 dimension label",
      ["dense", "dim_1d", "dim_int", "dimension_label"])
def _dimension_label(b):
    dim = tiledb.Dim("x", domain=(0, 9), tile=5, dtype=np.int32)
    lab = dim.create_label_schema(order="increasing", dtype=np.float64)
    b.create(tiledb.ArraySchema(domain=tiledb.Domain(dim), dim_labels={0: {"xl": lab}},
                                attrs=[tiledb.Attr("a", dtype=np.int32)]))
    b.label_names = ["xl"]
    b.write(T1, lambda A: A.__setitem__(slice(0, 10), {
        "a": np.arange(10, dtype=np.int32) * 3, "xl": np.linspace(-1.0, 1.0, 10)}))
    b.read("default")


# ====================================================================== driver

GOLDEN = [c.name for c in CASES if c.golden]


def generate(outdir, names=None, arrays_subdir="arrays"):
    arrays = os.path.join(outdir, arrays_subdir) if arrays_subdir else outdir
    os.makedirs(arrays, exist_ok=True)
    index = {"format": EXPECT_FORMAT,
             "tiledb_version": ".".join(str(x) for x in tiledb.libtiledb.version()),
             "features": FEATURES, "cases": []}
    timings = {}
    for spec in CASES:
        if names is not None and spec.name not in names:
            continue
        t0 = time.monotonic()
        run_case(spec, arrays)
        timings[spec.name] = round(time.monotonic() - t0, 3)
        index["cases"].append({"name": spec.name, "description": spec.description,
                               "features": spec.features, "golden": spec.golden,
                               "encrypted": spec.encrypted})
    with open(os.path.join(arrays, "index.json") if not arrays_subdir
              else os.path.join(outdir, "index.json"), "w") as f:
        json.dump(index, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return index, timings


def conformance_md(index) -> str:
    cases = index["cases"]
    lines = ["| feature | " + " | ".join(f"`{c['name']}`" for c in cases) + " |",
             "| --- |" + " :-: |" * len(cases)]
    for feat, desc in index["features"].items():
        row = [("x" if feat in c["features"] else "") for c in cases]
        lines.append(f"| {desc} (`{feat}`) | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def static_index():
    return {"features": FEATURES,
            "cases": [{"name": c.name, "description": c.description, "features": c.features}
                      for c in CASES]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--golden", metavar="DIR", help="write the golden subset into DIR")
    ap.add_argument("--conformance-md", action="store_true",
                    help="print the markdown table of features x cases")
    ap.add_argument("--only", help="comma-separated case names")
    args = ap.parse_args(argv)

    if args.conformance_md:
        index = static_index()
        if args.outdir and os.path.exists(os.path.join(args.outdir, "index.json")):
            with open(os.path.join(args.outdir, "index.json")) as f:
                index = json.load(f)
        sys.stdout.write(conformance_md(index))
        return 0
    if args.golden:
        if os.path.isdir(args.golden):
            for e in os.listdir(args.golden):
                p = os.path.join(args.golden, e)
                if e in GOLDEN or e.removesuffix(".expect.json") in GOLDEN or e == "index.json":
                    shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        t0 = time.monotonic()
        generate(args.golden, set(GOLDEN), arrays_subdir=None)
        print(f"golden: {len(GOLDEN)} cases in {time.monotonic() - t0:.1f}s -> {args.golden}")
        return 0
    if not args.outdir:
        ap.error("OUTDIR is required")
    names = set(args.only.split(",")) if args.only else None
    t0 = time.monotonic()
    index, timings = generate(args.outdir, names)
    slow = sorted(timings.items(), key=lambda kv: -kv[1])[:3]
    print(f"fixtures: {len(index['cases'])} cases in {time.monotonic() - t0:.1f}s "
          f"(slowest: {', '.join(f'{k} {v}s' for k, v in slow)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
