"""Benchmark arrays for the dense read path, and TileDB's own read times.

Usage:
  dense_arrays.py write OUTDIR   write OUTDIR/plain and OUTDIR/zstd1: 256 MiB
                                 dense float64 arrays (4096 x 8192, 1 MiB
                                 tiles of 128 x 1024), no filter and zstd
                                 level 1
  dense_arrays.py time OUTDIR N  read each array N times with the tiledb
                                 package in global (G) and row-major (C)
                                 order; print JSON {"plain/global": GB/s, ...}
                                 (best of N)
"""
import json
import os
import sys
import time

import numpy as np
import tiledb

ROWS, COLS = 4096, 8192
TILE = (128, 1024)


def write(out):
    os.makedirs(out, exist_ok=True)
    data = np.arange(ROWS * COLS, dtype=np.float64).reshape(ROWS, COLS) * 0.5
    for name, filters in [("plain", []), ("zstd1", [tiledb.ZstdFilter(level=1)])]:
        uri = os.path.join(out, name)
        if os.path.exists(uri):
            continue
        dom = tiledb.Domain(
            tiledb.Dim("y", domain=(0, ROWS - 1), tile=TILE[0], dtype=np.int64),
            tiledb.Dim("x", domain=(0, COLS - 1), tile=TILE[1], dtype=np.int64),
        )
        s = tiledb.ArraySchema(domain=dom, sparse=False,
                               attrs=[tiledb.Attr("v", dtype=np.float64, filters=tiledb.FilterList(filters))])
        tiledb.Array.create(uri, s)
        with tiledb.open(uri, "w") as A:
            A[:] = data


def timeit(out, n):
    res = {}
    cfg = tiledb.Config({"sm.memory_budget": str(1 << 30)})
    ctx = tiledb.Ctx(cfg)
    for name in ["plain", "zstd1"]:
        uri = os.path.join(out, name)
        for layout, order in [("global", "G"), ("row-major", "C")]:
            best = None
            for _ in range(n):
                with tiledb.open(uri, ctx=ctx) as A:
                    t0 = time.perf_counter()
                    r = A.query(order=order, attrs=["v"], dims=[])[:]
                    dt = time.perf_counter() - t0
                    assert r["v"].size == ROWS * COLS
                    del r
                best = dt if best is None else min(best, dt)
            res[f"{name}/{layout}"] = ROWS * COLS * 8 / best / 1e9
    print(json.dumps(res))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "write":
        write(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "time":
        timeit(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
