"""Filters and aggregates, flightd DoGet side by side with the tiledb package
in-process, on the same arrays in one run:

  sparse  10 M cells: x int64 in [0, 10 M), v float64 uniform in [0, 1),
          w int32; capacity 100 000 (100 tiles), written by the tiledb package
  dense   256 MiB: v float64 uniform in [0, 1), 4096 x 8192 cells, tiles of
          256 x 8192, written by the tiledb package

Queries: sum(v) + count(v) over the whole array; a 1 %-selective condition
(`v < 0.01`) returning its rows (sparse: the passing cells; dense: every
cell, the failing ones as fill values, as TileDB returns them); and the
aggregates under that condition. Each round runs TileDB then flightd (order
alternating between rounds); the table gives the medians of the per-round
times and of the per-round ratios (TileDB time / flightd time: > 1 means
flightd is faster). Results are appended to RESULTS.md.

Usage: python benchmarks/cond_read.py --flightd bin/flightd [--out benchmarks/RESULTS.md] [--rounds 5]
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import tiledb

import resultsfile  # noqa: E402 (benchmarks/ is the script directory)
from flight_read import start_flightd  # noqa: E402 (the shared daemon start)

SPARSE_CELLS = 10_000_000
ROWS, COLS = 4096, 8192
COND = "v < 0.01"


def tiledb_config():
    return tiledb.Config({
        "sm.compute_concurrency_level": str(os.cpu_count()),
        "sm.io_concurrency_level": str(os.cpu_count()),
        "py.init_buffer_bytes": str(512 << 20),
        "sm.memory_budget": str(1 << 30),
    })


def make_sparse(root):
    uri = os.path.join(root, "bench/sparse")
    if os.path.isdir(uri):
        return uri
    os.makedirs(os.path.dirname(uri), exist_ok=True)
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, SPARSE_CELLS - 1), tile=SPARSE_CELLS, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=100_000,
                                                attrs=[tiledb.Attr("v", dtype=np.float64),
                                                       tiledb.Attr("w", dtype=np.int32)]))
    rng = np.random.default_rng(1)
    with tiledb.open(uri, "w") as A:
        x = np.arange(SPARSE_CELLS, dtype=np.int64)
        A[x] = {"v": rng.random(SPARSE_CELLS), "w": rng.integers(-1000, 1000, SPARSE_CELLS, dtype=np.int32)}
    return uri


def make_dense(root):
    uri = os.path.join(root, "bench/dense")
    if os.path.isdir(uri):
        return uri
    os.makedirs(os.path.dirname(uri), exist_ok=True)
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, ROWS - 1), tile=256, dtype=np.int64),
                        tiledb.Dim("y", domain=(0, COLS - 1), tile=COLS, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False,
                                                attrs=[tiledb.Attr("v", dtype=np.float64)]))
    rng = np.random.default_rng(2)
    with tiledb.open(uri, "w") as A:
        for r in range(0, ROWS, 512):
            A[r:r + 512, :] = rng.random((512, COLS))
    return uri




def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run(args):
    root = args.data or tempfile.mkdtemp(prefix="tileflight-cond-bench-")
    t0 = time.perf_counter()
    suri, duri = make_sparse(root), make_dense(root)
    print(f"arrays ready in {time.perf_counter() - t0:.1f} s")
    ctx = tiledb.Ctx(tiledb_config())
    fd, url = start_flightd(args.flightd, root)
    c = fl.FlightClient(url)

    def ours(q):
        def f():
            t = c.do_get(fl.Ticket(json.dumps(q).encode())).read_all()
            return t
        return f

    def agg_check(t, ref):
        s, n = t.column("sum(v)")[0].as_py(), t.column("count(v)")[0].as_py()
        assert n == ref["count"], (n, ref)
        assert abs(s - ref["sum"]) <= 1e-9 * max(1.0, abs(ref["sum"])), (s, ref)

    def tdb_agg(uri, cond, sel):
        def f():
            with tiledb.open(uri, ctx=ctx) as A:
                return A.query(cond=cond, attrs=["v"]).agg({"v": ["sum", "count"]})[sel]
        return f

    def tdb_rows(uri, cond, sel):
        def f():
            with tiledb.open(uri, ctx=ctx) as A:
                return A.query(cond=cond, attrs=["v"])[sel]
        return f

    dsel = (slice(0, ROWS), slice(0, COLS))
    cases = [
        ("sparse 10 M cells: sum(v), count(v)", tdb_agg(suri, None, slice(None)),
         ours({"array": "bench/sparse", "aggregates": {"v": ["sum", "count"]}}), "agg"),
        ("sparse 10 M cells: rows where v < 0.01 (1 %)", tdb_rows(suri, COND, slice(None)),
         ours({"array": "bench/sparse", "filter": COND, "columns": ["x", "v"]}), "rows"),
        ("sparse 10 M cells: sum(v), count(v) where v < 0.01", tdb_agg(suri, COND, slice(None)),
         ours({"array": "bench/sparse", "filter": COND, "aggregates": {"v": ["sum", "count"]}}), "agg"),
        ("dense 256 MiB: sum(v), count(v)", tdb_agg(duri, None, dsel),
         ours({"array": "bench/dense", "aggregates": {"v": ["sum", "count"]}}), "agg"),
        ("dense 256 MiB: cells, v < 0.01 (1 %) kept, the rest fill", tdb_rows(duri, COND, dsel),
         ours({"array": "bench/dense", "filter": COND, "columns": ["v"]}), "dense-rows"),
        ("dense 256 MiB: sum(v), count(v) where v < 0.01", tdb_agg(duri, COND, dsel),
         ours({"array": "bench/dense", "filter": COND, "aggregates": {"v": ["sum", "count"]}}), "agg"),
    ]
    rows = []
    try:
        for name, tdb_fn, our_fn, kind in cases:
            tt, ot, ratios = [], [], []
            for r in range(args.rounds):
                if r % 2 == 0:
                    a, ref = timed(tdb_fn)
                    b, got = timed(our_fn)
                else:
                    b, got = timed(our_fn)
                    a, ref = timed(tdb_fn)
                if kind == "agg":
                    agg_check(got, ref)
                elif kind == "rows":
                    assert got.num_rows == len(ref["v"]), (got.num_rows, len(ref["v"]))
                else:
                    assert got.num_rows == ROWS * COLS
                tt.append(a)
                ot.append(b)
                ratios.append(a / b)
            rows.append((name, statistics.median(tt), statistics.median(ot), statistics.median(ratios)))
            print(f"{name}: tiledb {rows[-1][1]:.3f} s, flightd {rows[-1][2]:.3f} s, ratio {rows[-1][3]:.2f}x")
    finally:
        c.close()
        fd.send_signal(signal.SIGTERM)
        fd.wait(30)
        if not args.data:
            shutil.rmtree(root, ignore_errors=True)

    lines = [
        "",
        "## Filters and aggregates (`make bench-cond`)",
        "",
        "flightd DoGet (pyarrow client, localhost) vs the tiledb package in-process, same arrays, "
        f"{args.rounds} interleaved rounds, medians; ratio = median over rounds of TileDB time / flightd "
        "time (> 1: flightd faster). Sparse: 10 M cells (x int64, v float64 uniform, w int32; "
        "capacity 100 000). Dense: 256 MiB float64 (4096 x 8192, tiles 256 x 8192). "
        "Condition `v < 0.01` (1 % of the cells).",
        "",
        f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared), Python {platform.python_version()}, tiledb {tiledb.__version__} "
        f"(TileDB {'.'.join(map(str, tiledb.libtiledb.version()))}), pyarrow {pa.__version__}.",
        "",
        "| query | tiledb in-process (s) | flightd DoGet (s) | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, a, b, r in rows:
        lines.append(f"| {name} | {a:.3f} | {b:.3f} | {r:.2f}x |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with resultsfile.section(args.out, "cond") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flightd", default="bin/flightd")
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data", help="keep the benchmark arrays here (default: a temporary directory)")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
