"""Write the fragment metadata golden files used by format/fragmeta's tests.

Usage: fragmeta_cases.py OUTDIR

For every case an array is written with the tiledb package (TileDB 2.30, the
reference). Each fragment's __fragment_metadata.tdb is copied to
OUTDIR/<case>/<n>.tdb and consolidated fragment metadata files to
OUTDIR/<case>/meta<n>.meta; OUTDIR/<case>/case.json records the field layout,
what TileDB reports about every fragment (FragmentInfoList) and tile-level
facts computed here from the cells TileDB reads back (MBRs, mins, maxes, sums
and null counts per tile), so the Go tests compare against TileDB itself.
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np
import tiledb

VAR = 0xFFFFFFFF


def field_desc(f, nullable=False):
    return {
        "name": f.name,
        "type": int(f._tiledb_dtype),
        "type_name": f._tiledb_dtype.name,
        "cell_val_num": VAR if f.isvar else int(getattr(f, "ncells", 1)),
        "nullable": bool(nullable),
    }


def tile_extent(d):
    t = d.tile
    if hasattr(t, "days"):
        return int(np.timedelta64(t, "D").astype(np.int64))
    if isinstance(t, np.timedelta64):
        return int(t.astype(np.int64))
    return int(t)


def layout_desc(schema):
    dom = schema.domain
    dims = [field_desc(dom.dim(i)) for i in range(dom.ndim)]
    attrs = [field_desc(schema.attr(i), schema.attr(i).isnullable) for i in range(schema.nattr)]
    tile_cells = schema.capacity if schema.sparse else int(
        np.prod([tile_extent(dom.dim(i)) for i in range(dom.ndim)]))
    return {"dense": not schema.sparse, "dims": dims, "attrs": attrs,
            "cells_per_tile": int(tile_cells)}


def jsonable(v):
    if isinstance(v, (bytes, np.bytes_)):
        return {"bytes": bytes(v).hex()}
    if isinstance(v, np.datetime64):
        return int(v.astype("int64"))
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, str):
        return {"bytes": v.encode().hex()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v


def frag_infos(uri):
    out = []
    for fi in tiledb.array_fragments(uri, include_mbrs=False):
        out.append({
            "name": os.path.basename(fi.uri),
            "version": int(fi.version),
            "timestamp_range": [int(fi.timestamp_range[0]), int(fi.timestamp_range[1])],
            "nonempty_domain": jsonable(list(fi.nonempty_domain)),
            "cell_num": int(fi.cell_num),
            "dense": not bool(fi.sparse),
            "schema_name": fi.array_schema_name,
            "has_consolidated_metadata": bool(fi.has_consolidated_metadata),
        })
    return out


def raw_bytes(v, dtype):
    return np.array([v], dtype=dtype).tobytes().hex()


def sum_bits(values, tdb_type):
    """The 8 raw bytes TileDB stores as a tile sum, hex; None for no sum."""
    if values.dtype.kind in "iu" and values.dtype.kind == "i":
        s = int(np.sum(values.astype(object))) if len(values) else 0
        s = max(min(s, 2**63 - 1), -(2**63))
        return np.array([s], dtype=np.int64).tobytes().hex()
    if values.dtype.kind == "u":
        s = int(np.sum(values.astype(object))) if len(values) else 0
        s = min(s, 2**64 - 1)
        return np.array([s], dtype=np.uint64).tobytes().hex()
    if values.dtype.kind == "f":
        return np.array([float(np.sum(values.astype(np.float64)))], dtype=np.float64).tobytes().hex()
    return None


def tile_facts(schema, data, ntiles, tile_cells_of):
    """Per-tile facts from cells in TileDB's global order.

    tile_cells_of(t) gives the index array of tile t's cells into data.
    """
    tiles = []
    for t in range(ntiles):
        idx = tile_cells_of(t)
        entry = {"cell_num": int(len(idx)), "attrs": {}}
        if schema.sparse:
            mbr = []
            for i in range(schema.domain.ndim):
                d = schema.domain.dim(i)
                vals = data[d.name][idx]
                if d.isvar:
                    lo, hi = min(vals), max(vals)
                    mbr.append([bytes(lo).hex(), bytes(hi).hex()])
                else:
                    mbr.append([raw_bytes(vals.min(), d.dtype), raw_bytes(vals.max(), d.dtype)])
            entry["mbr"] = mbr
        for i in range(schema.nattr):
            a = schema.attr(i)
            vals = data[a.name][idx]
            valid = np.ones(len(idx), dtype=bool)
            if a.isnullable:
                mask = np.ma.getmaskarray(vals) if np.ma.isMaskedArray(vals) else np.array(
                    [v is None for v in vals])
                valid = ~mask
                vals = np.ma.getdata(vals)
            facts = {"null_count": int((~valid).sum())}
            present = [v for v, ok in zip(vals, valid) if ok]
            if a.isvar:
                if a.isascii and present:
                    bs = [bytes(v) for v in present]
                    facts["min"] = min(bs).hex()
                    facts["max"] = max(bs).hex()
            elif a.dtype.kind in "iuf" and present:
                arr = np.array(present, dtype=a.dtype)
                facts["min"] = raw_bytes(arr.min(), a.dtype)
                facts["max"] = raw_bytes(arr.max(), a.dtype)
                facts["sum"] = sum_bits(arr, a._tiledb_dtype)
            elif a.dtype.kind == "S" and present:
                bs = [np.array([v], dtype=a.dtype).tobytes() for v in present]
                facts["min"] = min(bs).hex()
                facts["max"] = max(bs).hex()
            entry["attrs"][a.name] = facts
        tiles.append(entry)
    return tiles


def copy_fragments(uri, outdir):
    names = []
    fdir = os.path.join(uri, "__fragments")
    for n in sorted(os.listdir(fdir)):
        src = os.path.join(fdir, n, "__fragment_metadata.tdb")
        if os.path.exists(src):
            shutil.copy(src, os.path.join(outdir, n + ".tdb"))
            names.append(n)
    metas = []
    mdir = os.path.join(uri, "__fragment_meta")
    if os.path.isdir(mdir):
        for n in sorted(os.listdir(mdir)):
            shutil.copy(os.path.join(mdir, n), os.path.join(outdir, n))
            metas.append(n)
    return names, metas


def sparse_global(uri):
    with tiledb.open(uri) as A:
        return A.query(order="G")[:]


def write_case(out, name, uri, extra=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    names, metas = copy_fragments(uri, d)
    schema = tiledb.ArraySchema.load(uri)
    case = {"layout": layout_desc(schema), "fragments": frag_infos(uri),
            "files": names, "meta_files": metas}
    if extra:
        case.update(extra)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(case, f, sort_keys=True, separators=(",", ":"))


def sparse_single_fragment_tiles(uri):
    schema = tiledb.ArraySchema.load(uri)
    data = sparse_global(uri)
    n = len(next(iter(data.values())))
    cap = schema.capacity
    nt = (n + cap - 1) // cap
    return tile_facts(schema, data, nt, lambda t: np.arange(t * cap, min(n, (t + 1) * cap)))


def dense_1d(tmp, out):
    uri = os.path.join(tmp, "dense1d")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(1, 100), tile=10, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("a", dtype=np.int32),
        tiledb.Attr("f", dtype=np.float64),
        tiledb.Attr("n", dtype=np.uint8, nullable=True),
    ])
    tiledb.Array.create(uri, schema)
    xs = np.arange(11, 46)
    a = (xs * 7 % 23 - 11).astype(np.int32)
    f = (xs / 4.0).astype(np.float64)
    n = np.ma.masked_array((xs % 200).astype(np.uint8), mask=(xs % 3 == 0))
    with tiledb.open(uri, "w", timestamp=1) as A:
        A[11:46] = {"a": a, "f": f, "n": n}
    # Tiles cover x in [11,20], [21,30], [31,40], [41,50]; TileDB computes
    # tile metadata over the written cells only (x <= 45), while each dense
    # tile still counts its 10 cells.
    data = {"a": a, "f": f, "n": n}
    tiles = tile_facts(schema, data, 4, lambda t: np.arange(t * 10, min(35, t * 10 + 10)))
    for tile in tiles:
        tile["cell_num"] = 10
    write_case(out, "dense1d", uri, {"tiles": tiles})


def dense_2d_datetime(tmp, out):
    uri = os.path.join(tmp, "dense2d_dt")
    dom = tiledb.Domain(
        tiledb.Dim("t", domain=(np.datetime64("2020-01-01"), np.datetime64("2020-12-31")),
                   tile=np.timedelta64(4, "D"), dtype="datetime64[D]"),
        tiledb.Dim("u", domain=(np.datetime64(0, "D"), np.datetime64(7, "D")),
                   tile=np.timedelta64(4, "D"), dtype="datetime64[D]"))
    schema = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("v", dtype=np.int16), tiledb.Attr("c", dtype="S2")])
    tiledb.Array.create(uri, schema)
    t0 = np.datetime64("2020-01-01")
    v = (np.arange(8 * 8).reshape(8, 8) * 37 % 101 - 50).astype(np.int16)
    c = np.array([b"%c%c" % (97 + i % 26, 65 + i % 7) for i in range(64)], dtype="S2").reshape(8, 8)
    with tiledb.open(uri, "w", timestamp=2) as A:
        A[t0:t0 + 7, np.datetime64(0, "D"):np.datetime64(7, "D")] = {"v": v, "c": c}
    # Tiles in row-major tile order: 2 x 2 tiles of 4 x 4 cells, cells row-major within.
    flat_v, flat_c = [], []
    for ti in range(2):
        for tj in range(2):
            flat_v.append(v[ti * 4:(ti + 1) * 4, tj * 4:(tj + 1) * 4].ravel())
            flat_c.append(c[ti * 4:(ti + 1) * 4, tj * 4:(tj + 1) * 4].ravel())
    data = {"v": np.concatenate(flat_v), "c": np.concatenate(flat_c)}
    tiles = tile_facts(schema, data, 4, lambda t: np.arange(t * 16, t * 16 + 16))
    write_case(out, "dense2d_dt", uri, {"tiles": tiles})


def sparse_int_rtree(tmp, out):
    uri = os.path.join(tmp, "sparse_int")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 999), tile=100, dtype=np.int64),
                        tiledb.Dim("y", domain=(-50, 50), tile=101, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=2, attrs=[
        tiledb.Attr("a", dtype=np.int32),
        tiledb.Attr("u", dtype=np.uint64, nullable=True),
        tiledb.Attr("s", dtype="ascii", var=True, nullable=True),
        tiledb.Attr("w", dtype=np.float32, var=True),
    ])
    tiledb.Array.create(uri, schema)
    n = 230
    rng = np.random.default_rng(7)
    xs = rng.choice(1000, n, replace=False).astype(np.int64)
    ys = rng.integers(-50, 51, n).astype(np.int32)
    a = rng.integers(-1000, 1000, n).astype(np.int32)
    u = np.ma.masked_array(rng.integers(0, 1 << 40, n).astype(np.uint64), mask=rng.random(n) < 0.3)
    s = np.array(["k%03d" % (v % 97) * (1 + v % 3) for v in range(n)], dtype=object)
    s[::7] = None
    w = np.empty(n, dtype=object)
    for i in range(n):
        w[i] = np.arange(i % 4, dtype=np.float32)
    with tiledb.open(uri, "w", timestamp=3) as A:
        A[xs, ys] = {"a": a, "u": u, "s": s, "w": w}
    write_case(out, "sparse_int", uri, {"tiles": sparse_single_fragment_tiles(uri)})


def sparse_float(tmp, out):
    uri = os.path.join(tmp, "sparse_float")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(-10.0, 10.0), tile=5.0, dtype=np.float64))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=8, attrs=[
        tiledb.Attr("a", dtype=np.float32), tiledb.Attr("b", dtype=np.int8)])
    tiledb.Array.create(uri, schema)
    xs = np.linspace(-9.5, 9.75, 40)
    with tiledb.open(uri, "w", timestamp=4) as A:
        A[xs] = {"a": (xs * 3).astype(np.float32), "b": (np.arange(40) % 50 - 25).astype(np.int8)}
    write_case(out, "sparse_float", uri, {"tiles": sparse_single_fragment_tiles(uri)})


def sparse_string(tmp, out):
    uri = os.path.join(tmp, "sparse_str")
    dom = tiledb.Domain(tiledb.Dim("s", dtype="ascii"),
                        tiledb.Dim("y", domain=(0, 9), tile=10, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=3, attrs=[
        tiledb.Attr("a", dtype=np.int64, nullable=True),
        tiledb.Attr("c", dtype="S3")])
    tiledb.Array.create(uri, schema)
    words = ["apple", "b", "cherry", "date", "egg", "fig", "grape", "h", "iris", "jam",
             "kiwi", "lemon", "mango", "nut", "olive", "pear"]
    ys = np.arange(len(words)) % 10
    a = np.ma.masked_array(np.arange(len(words), dtype=np.int64) * 1000 - 3000,
                           mask=np.arange(len(words)) % 4 == 1)
    c = np.array([w[:3].ljust(3, "_").encode() for w in words], dtype="S3")
    with tiledb.open(uri, "w", timestamp=5) as A:
        A[np.array(words, dtype=object), ys.astype(np.int32)] = {"a": a, "c": c}
    write_case(out, "sparse_str", uri, {"tiles": sparse_single_fragment_tiles(uri)})


def small_sparse(uri, allows_duplicates=False):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99), tile=10, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=4,
                                allows_duplicates=allows_duplicates,
                                attrs=[tiledb.Attr("a", dtype=np.int32)])
    tiledb.Array.create(uri, schema)


def consolidated_timestamps(tmp, out):
    uri = os.path.join(tmp, "cons_ts")
    small_sparse(uri)
    for t in range(1, 4):
        xs = np.arange(t, 30, 3, dtype=np.int32)
        with tiledb.open(uri, "w", timestamp=t) as A:
            A[xs] = {"a": xs * 10 + t}
    cfg = tiledb.Config({"sm.consolidation.with_timestamps": "true"})
    tiledb.consolidate(uri, config=cfg)
    tiledb.vacuum(uri)
    write_case(out, "cons_ts", uri, {"has_timestamps": True})


def consolidated_deletes(tmp, out):
    uri = os.path.join(tmp, "cons_del")
    small_sparse(uri)
    for t in (1, 2):
        xs = np.arange(t, 40, 2, dtype=np.int32)
        with tiledb.open(uri, "w", timestamp=t) as A:
            A[xs] = {"a": xs}
    with tiledb.open(uri, "d", timestamp=3) as A:
        A.query(cond="a < 10").submit()
    with tiledb.open(uri, "w", timestamp=4) as A:
        A[np.array([50, 51], dtype=np.int32)] = {"a": np.array([5, 6], dtype=np.int32)}
    cfg = tiledb.Config({"sm.consolidation.with_timestamps": "true",
                         "sm.consolidation.purge_deleted_cells": "false"})
    tiledb.consolidate(uri, config=cfg)
    tiledb.vacuum(uri)
    dels = sorted(n for n in os.listdir(os.path.join(uri, "__commits")) if n.endswith(".del"))
    write_case(out, "cons_del", uri, {"has_timestamps": True, "has_delete_meta": True,
                                      "processed_conditions": dels})


def consolidated_fragment_meta(tmp, out):
    uri = os.path.join(tmp, "frag_meta")
    dom = tiledb.Domain(tiledb.Dim("s", dtype="ascii"),
                        tiledb.Dim("x", domain=(0, 99), tile=10, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=4,
                                attrs=[tiledb.Attr("a", dtype=np.int32)])
    tiledb.Array.create(uri, schema)
    for t in range(1, 4):
        ss = np.array(["r%d_%d" % (t, i) for i in range(5)], dtype=object)
        with tiledb.open(uri, "w", timestamp=t) as A:
            A[ss, np.arange(5, dtype=np.int32) * t] = {"a": np.arange(5, dtype=np.int32) + t}
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": "fragment_meta"}))
    write_case(out, "frag_meta", uri)


def main():
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for fn in (dense_1d, dense_2d_datetime, sparse_int_rtree, sparse_float,
                   sparse_string, consolidated_timestamps, consolidated_deletes,
                   consolidated_fragment_meta):
            fn(tmp, out)
    print("libtiledb", tiledb.libtiledb.version(), "->", out)


if __name__ == "__main__":
    main()
