"""Time the tiledb package writing the data of the writer's Go benchmarks
(writer/bench_test.go): 10 M sparse cells (2 int64 dims, float64 + string,
zstd level 1) and a 4096 x 8192 float64 dense array (256 MiB, zstd 1).
Usage: write_tiledb.py WORKDIR"""

import os
import sys
import time

import numpy as np
import tiledb


def main(work):
    os.makedirs(work, exist_ok=True)
    z = tiledb.FilterList([tiledb.ZstdFilter(level=1)])
    n = 10_000_000
    rng = np.random.default_rng(1)
    x = rng.integers(0, 1_000_000, n)
    y = np.arange(n, dtype=np.int64)
    v = rng.random(n)
    s = np.array([f"v{i % 1000}" for i in range(n)], dtype=object)
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 999999), tile=100000, dtype=np.int64, filters=z),
                        tiledb.Dim("y", domain=(0, 99999999), tile=1000000, dtype=np.int64, filters=z))
    sch = tiledb.ArraySchema(domain=dom, sparse=True, capacity=100000,
                             attrs=[tiledb.Attr("v", dtype=np.float64, filters=z),
                                    tiledb.Attr("s", dtype="ascii", var=True, filters=z)])
    p = os.path.join(work, "sparse")
    tiledb.Array.create(p, sch)
    t = time.perf_counter()
    with tiledb.open(p, "w") as A:
        A[x, y] = {"v": v, "s": s}
    dt = time.perf_counter() - t
    print(f"tiledb sparse 10M cells: {dt:.2f} s, {n / dt / 1e6:.2f} M cells/s")

    rows, cols = 4096, 8192
    data = (np.arange(rows * cols) % 1000 * 0.5).reshape(rows, cols)
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, rows - 1), tile=256, dtype=np.int32),
                        tiledb.Dim("c", domain=(0, cols - 1), tile=256, dtype=np.int32))
    sch = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr("v", dtype=np.float64, filters=z)])
    p = os.path.join(work, "dense")
    tiledb.Array.create(p, sch)
    t = time.perf_counter()
    with tiledb.open(p, "w") as A:
        A[:, :] = {"v": data}
    dt = time.perf_counter() - t
    print(f"tiledb dense 256 MiB: {dt:.2f} s, {data.nbytes / dt / 2**20:.1f} MiB/s")


if __name__ == "__main__":
    main(sys.argv[1])
