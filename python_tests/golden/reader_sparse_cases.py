"""Golden sparse arrays and reads for reader/sparse, written by TileDB itself.

Covers what the fixture matrix lacks: multi-range subarrays (overlapping and
out of order) on int, float and string dimensions in every layout, Hilbert
global order across fragments, col-major tile/cell orders, overlapping
fragments with deletes in between, consolidation with per-cell timestamps
read at intermediate timestamp ranges, consolidated delete metadata, and
duplicates.

Usage: reader_sparse_cases.py OUTDIR   (writes OUTDIR/<case>/ and OUTDIR/cases.json)
"""
import json
import os
import shutil
import sys

import numpy as np
import tiledb

T1, T2, T3, T4, T5 = 1000, 2000, 3000, 4000, 5000


def enc(v):
    if isinstance(v, (bytes, np.bytes_)):
        return v.decode("utf-8")
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, (np.integer, int)):
        return int(v)
    if isinstance(v, np.datetime64):
        return int(v.astype("int64"))
    if v is None:
        return None
    if isinstance(v, str):
        return v
    raise TypeError(type(v))


def column(vals, validity=None):
    out = []
    for i, v in enumerate(vals):
        if validity is not None and not validity[i]:
            out.append(None)
        else:
            out.append(enc(v))
    return out


def rd(uri, name, layout, ranges=None, timestamp=None, cols=None):
    """Run one read in TileDB and describe it. ranges: {dim: [(lo, hi), ...]}."""
    with tiledb.open(uri, timestamp=timestamp) as A:
        s = A.schema
        dims = [s.domain.dim(i).name for i in range(s.domain.ndim)]
        attrs = [s.attr(i).name for i in range(s.nattr)]
        cols = cols or dims + attrs
        order = {"row-major": "C", "col-major": "F", "global": "G", "unordered": "U"}[layout]
        q = A.query(order=order, attrs=[c for c in cols if c in attrs], dims=[c for c in cols if c in dims],
                    return_incomplete=False)
        if ranges:
            idx = []
            for d in dims:
                if d in ranges:
                    idx.append([slice(lo, hi) for lo, hi in ranges[d]])
                else:
                    idx.append(slice(None))
            res = q.multi_index[tuple(idx)]
        else:
            res = q.multi_index[tuple(slice(None) for _ in dims)]
        data = {}
        for c in cols:
            vals = res[c]
            validity = None
            if c in attrs and s.attr(c).isnullable:
                # multi_index returns masked values as None in object arrays or NaN for floats.
                validity = [not (v is None or (isinstance(v, float) and np.isnan(v))) for v in vals]
            data[c] = column(vals, validity)
        n = len(next(iter(data.values())))
    ts = None
    if timestamp is not None:
        ts = list(timestamp) if isinstance(timestamp, tuple) else [0, timestamp]
    return {"name": name, "timestamp": ts, "layout": layout,
            "subarray": {d: [[enc(lo), enc(hi)] for lo, hi in rs] for d, rs in (ranges or {}).items()},
            "columns": cols, "num_cells": n, "data": data}


def grid(xs, ys):
    a, b = np.meshgrid(xs, ys, indexing="ij")
    return a.ravel(), b.ravel()


def case_multi_range_int(root):
    uri = os.path.join(root, "multi_range_int")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(1, 20), tile=5, dtype=np.int64),
                        tiledb.Dim("y", domain=(1, 20), tile=5, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=7,
                                                attrs=[tiledb.Attr("a", dtype=np.int32)]))
    xs, ys = grid(np.arange(1, 13), np.arange(1, 13))
    with tiledb.open(uri, "w", timestamp=T1) as A:
        A[xs, ys] = {"a": (xs * 100 + ys).astype(np.int32)}
    xs, ys = grid(np.arange(8, 16), np.arange(3, 9))
    with tiledb.open(uri, "w", timestamp=T2) as A:
        A[xs, ys] = {"a": (-(xs * 100 + ys)).astype(np.int32)}
    rng = {"x": [(9, 11), (2, 3), (3, 4)], "y": [(7, 12), (1, 2)]}
    return "multi_range_int", [
        rd(uri, "rows", "row-major", rng),
        rd(uri, "cols", "col-major", rng),
        rd(uri, "unordered", "unordered", rng),
        rd(uri, "global_one_range", "global", {"x": [(2, 10)], "y": [(4, 9)]}),
        rd(uri, "all_global", "global"),
        rd(uri, "at_t1_rows", "row-major", rng, timestamp=T1),
    ]


def case_multi_range_float_string(root):
    uri = os.path.join(root, "multi_range_float_string")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(-10.0, 10.0), tile=2.5, dtype=np.float64),
                        tiledb.Dim("s", domain=(None, None), tile=None, dtype="ascii"))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=5,
                                                attrs=[tiledb.Attr("v", dtype=np.float32)]))
    rng = np.random.default_rng(7)
    words = ["apple", "b", "banana", "cherry", "date", "e", "fig", "grape", "kiwi", "lemon", "z\x7f"]
    xs = np.round(rng.uniform(-10, 10, size=40), 2)
    ss = np.array([words[i % len(words)] for i in range(40)], dtype=object)
    with tiledb.open(uri, "w", timestamp=T1) as A:
        A[xs, ss] = {"v": np.arange(40, dtype=np.float32) / 4}
    xs2 = xs[::3].copy()
    ss2 = ss[::3].copy()
    with tiledb.open(uri, "w", timestamp=T2) as A:
        A[xs2, ss2] = {"v": -np.arange(len(xs2), dtype=np.float32)}
    r = {"x": [(2.5, 9.0), (-8.0, -1.25), (0.0, 3.0)], "s": [("b", "date"), ("fig", "kiwi")]}
    return "multi_range_float_string", [
        rd(uri, "rows", "row-major", r),
        rd(uri, "cols", "col-major", r),
        rd(uri, "unordered", "unordered", r),
        rd(uri, "all_global", "global"),
        rd(uri, "all_rows", "row-major"),
        rd(uri, "strings_only", "row-major", {"s": [("banana", "fig")]}),
    ]


def case_hilbert_frags(root):
    uri = os.path.join(root, "hilbert_frags")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 999), tile=100, dtype=np.int32),
                        tiledb.Dim("y", domain=(-500, 500), tile=100, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=8, cell_order="hilbert",
                                                attrs=[tiledb.Attr("a", dtype=np.int64)]))
    rng = np.random.default_rng(11)
    for k, ts in enumerate([T1, T2, T3]):
        xs = rng.integers(0, 1000, size=60).astype(np.int32)
        ys = rng.integers(-500, 501, size=60).astype(np.int32)
        if k > 0:
            xs[:10], ys[:10] = prev[0][:10], prev[1][:10]  # overwrite some cells
        xy = sorted(set(zip(xs.tolist(), ys.tolist())))
        xs = np.array([p[0] for p in xy], dtype=np.int32)
        ys = np.array([p[1] for p in xy], dtype=np.int32)
        prev = (xs, ys)
        with tiledb.open(uri, "w", timestamp=ts) as A:
            A[xs, ys] = {"a": np.arange(len(xs), dtype=np.int64) + 1000 * (k + 1)}
    return "hilbert_frags", [
        rd(uri, "global", "global"),
        rd(uri, "global_sub", "global", {"x": [(100, 700)], "y": [(-200, 300)]}),
        rd(uri, "rows", "row-major"),
        rd(uri, "at_t2_global", "global", timestamp=T2),
    ]


def case_col_major_orders(root):
    uri = os.path.join(root, "col_major_orders")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(1, 40), tile=8, dtype=np.uint16),
                        tiledb.Dim("t", domain=(np.datetime64(0, "s"), np.datetime64(10000, "s")), tile=np.timedelta64(1000, "s"),
                                   dtype="datetime64[s]"))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=6, tile_order="col-major",
                                                cell_order="col-major",
                                                attrs=[tiledb.Attr("s", dtype=str, var=True)]))
    rng = np.random.default_rng(5)
    for k, ts in enumerate([T1, T2]):
        xy = sorted(set(zip(rng.integers(1, 41, 50).tolist(), rng.integers(0, 10001, 50).tolist())))
        xs = np.array([p[0] for p in xy], dtype=np.uint16)
        tt = np.array([p[1] for p in xy], dtype="datetime64[s]")
        with tiledb.open(uri, "w", timestamp=ts) as A:
            A[xs, tt] = {"s": np.array([f"v{k}_{i}" * (i % 3) for i in range(len(xs))], dtype=object)}
    return "col_major_orders", [
        rd(uri, "global", "global"),
        rd(uri, "rows", "row-major"),
        rd(uri, "cols_sub", "col-major", {"x": [(5, 30)], "t": [(np.datetime64(1000, "s"), np.datetime64(8000, "s"))]}),
    ]


def case_overlap_delete(root):
    uri = os.path.join(root, "overlap_delete")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99), tile=10, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=4, attrs=[
        tiledb.Attr("a", dtype=np.int32), tiledb.Attr("n", dtype=np.float64, nullable=True),
        tiledb.Attr("s", dtype=str, var=True)]))
    def write(ts, xs, base):
        xs = np.array(xs, dtype=np.int64)
        n = np.arange(len(xs), dtype=np.float64) + base
        valid = (np.arange(len(xs)) % 3 != 0).astype(np.uint8)
        with tiledb.open(uri, "w", timestamp=ts) as A:
            A[xs] = {"a": (xs + base).astype(np.int32), "n": np.ma.masked_array(n, mask=~valid.astype(bool)),
                     "s": np.array([f"s{(x + base) % 7}" for x in xs], dtype=object)}
    write(T1, range(0, 30), 0)
    write(T2, range(20, 50, 2), 100)
    with tiledb.open(uri, "d", timestamp=T2 + 500) as A:
        A.query(cond="a < 10 or s == 's3'").submit()
    write(T3, range(5, 25, 3), 200)
    with tiledb.open(uri, "d", timestamp=T3 + 500) as A:
        A.query(cond="n > 105.0 and n < 210.0").submit()
    with tiledb.open(uri, "d", timestamp=T4) as A:
        A.query(cond="a in [21, 23, 227]").submit()
    return "overlap_delete", [
        rd(uri, "rows", "row-major"),
        rd(uri, "global", "global"),
        rd(uri, "at_t2", "row-major", timestamp=T2),
        rd(uri, "after_first_delete", "row-major", timestamp=T2 + 500),
        rd(uri, "at_t3", "row-major", timestamp=T3),
        rd(uri, "before_last", "row-major", timestamp=T4 - 1),
        rd(uri, "window_t2_t3", "row-major", timestamp=(T2, T3 + 600)),
    ]


def case_consolidated_ts(root):
    uri = os.path.join(root, "consolidated_ts")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 63), tile=8, dtype=np.int32),
                        tiledb.Dim("y", domain=(0, 63), tile=8, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=10,
                                                attrs=[tiledb.Attr("a", dtype=np.int64)]))
    rng = np.random.default_rng(3)
    for k, ts in enumerate([T1, T2, T3, T4]):
        xs = rng.integers(0, 16, 30).astype(np.int32)
        ys = rng.integers(0, 16, 30).astype(np.int32)
        xy = sorted(set(zip(xs.tolist(), ys.tolist())))
        xs = np.array([p[0] for p in xy], dtype=np.int32)
        ys = np.array([p[1] for p in xy], dtype=np.int32)
        with tiledb.open(uri, "w", timestamp=ts) as A:
            A[xs, ys] = {"a": np.arange(len(xs), dtype=np.int64) + 1000 * (k + 1)}
    cfg = tiledb.Config({"sm.consolidation.with_timestamps": "true", "sm.consolidation.timestamp_start": str(T1),
                         "sm.consolidation.timestamp_end": str(T3)})
    tiledb.consolidate(uri, config=cfg)
    tiledb.vacuum(uri)
    return "consolidated_ts", [
        rd(uri, "global", "global"),
        rd(uri, "rows", "row-major"),
        rd(uri, "at_t1", "row-major", timestamp=T1),
        rd(uri, "at_t2", "global", timestamp=T2),
        rd(uri, "window_t2_t3", "row-major", timestamp=(T2, T3)),
        rd(uri, "window_t2_t4", "global", timestamp=(T2, T4)),
        rd(uri, "sub_at_t2", "row-major", {"x": [(2, 9)], "y": [(0, 7), (10, 12)]}, timestamp=T2),
    ]


def case_delete_meta(root):
    uri = os.path.join(root, "delete_meta")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99), tile=10, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=5,
                                                attrs=[tiledb.Attr("a", dtype=np.int32)]))
    with tiledb.open(uri, "w", timestamp=T1) as A:
        A[np.arange(0, 20)] = {"a": np.arange(0, 20, dtype=np.int32)}
    with tiledb.open(uri, "d", timestamp=T2) as A:
        A.query(cond="a >= 15").submit()
    with tiledb.open(uri, "w", timestamp=T3) as A:
        A[np.arange(10, 25)] = {"a": np.arange(110, 125, dtype=np.int32)}
    with tiledb.open(uri, "d", timestamp=T4) as A:
        A.query(cond="a < 3 or a > 120").submit()
    # Default consolidation keeps deleted cells with their delete timestamps.
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.with_timestamps": "true"}))
    tiledb.vacuum(uri)
    return "delete_meta", [
        rd(uri, "rows", "row-major"),
        rd(uri, "global", "global"),
        rd(uri, "at_t1", "row-major", timestamp=T1),
        rd(uri, "at_t2", "row-major", timestamp=T2),
        rd(uri, "at_t3", "row-major", timestamp=T3),
    ]


def case_dups(root):
    uri = os.path.join(root, "dups")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 9), tile=5, dtype=np.int8),
                        tiledb.Dim("y", domain=(0, 9), tile=5, dtype=np.int8))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=3, allows_duplicates=True,
                                                attrs=[tiledb.Attr("a", dtype=np.uint16)]))
    rng = np.random.default_rng(9)
    for k, ts in enumerate([T1, T2]):
        xs = rng.integers(0, 10, 25).astype(np.int8)
        ys = rng.integers(0, 10, 25).astype(np.int8)
        with tiledb.open(uri, "w", timestamp=ts) as A:
            A[xs, ys] = {"a": np.arange(25, dtype=np.uint16) + 100 * k}
    with tiledb.open(uri, "d", timestamp=T3) as A:
        A.query(cond="a == 3 or a == 104").submit()
    return "dups", [
        rd(uri, "rows", "row-major"),
        rd(uri, "global", "global"),
        rd(uri, "multi", "row-major", {"x": [(0, 4), (3, 7)]}),
        rd(uri, "at_t1", "col-major", timestamp=T1),
    ]


CASES = [case_multi_range_int, case_multi_range_float_string, case_hilbert_frags, case_col_major_orders,
         case_overlap_delete, case_consolidated_ts, case_delete_meta, case_dups]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    allcases = []
    for fn in CASES:
        name = fn.__name__[len("case_"):]
        d = os.path.join(out, name)
        shutil.rmtree(d, ignore_errors=True)
        cname, reads = fn(out)
        allcases.append({"case": cname, "reads": reads})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"tiledb_version": ".".join(map(str, tiledb.libtiledb.version())), "cases": allcases}, f, indent=1)


if __name__ == "__main__":
    main()
