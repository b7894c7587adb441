"""Time the tiledb package writing the data of the writer's Go benchmarks
(writer/bench_test.go): 10 M sparse cells (2 int64 dims, float64 + string,
zstd level 1) and a 4096 x 8192 float64 dense array (256 MiB, zstd 1).
Usage: write_tiledb.py WORKDIR [sparse|dense]...

Run it right before or after `go test -run '^$' -bench Ingest -benchtime 1x
./writer/` on the same machine: on a shared machine only figures taken in
the same minute compare. Wall time covers the write call only (the input
is built first); cpu is the process CPU time spent in it (TileDB threads
included)."""

import os
import shutil
import sys
import time

import numpy as np
import tiledb


def timed(f):
    t, c = time.perf_counter(), time.process_time()
    f()
    return time.perf_counter() - t, time.process_time() - c


def main(work, which):
    os.makedirs(work, exist_ok=True)
    if "sparse" in which:
        sparse(work)
    if "dense" in which:
        dense(work)


def sparse(work):
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
    shutil.rmtree(p, ignore_errors=True)
    tiledb.Array.create(p, sch)

    def w():
        with tiledb.open(p, "w") as A:
            A[x, y] = {"v": v, "s": s}
    dt, cpu = timed(w)
    print(f"tiledb sparse 10M cells: {dt:.2f} s ({cpu:.2f} s cpu), {n / dt / 1e6:.2f} M cells/s")


def dense(work):
    z = tiledb.FilterList([tiledb.ZstdFilter(level=1)])
    rows, cols = 4096, 8192
    data = (np.arange(rows * cols) % 1000 * 0.5).reshape(rows, cols)
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, rows - 1), tile=256, dtype=np.int32),
                        tiledb.Dim("c", domain=(0, cols - 1), tile=256, dtype=np.int32))
    sch = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr("v", dtype=np.float64, filters=z)])
    p = os.path.join(work, "dense")
    shutil.rmtree(p, ignore_errors=True)
    tiledb.Array.create(p, sch)

    def w():
        with tiledb.open(p, "w") as A:
            A[:, :] = {"v": data}
    dt, cpu = timed(w)
    print(f"tiledb dense 256 MiB: {dt:.2f} s ({cpu:.2f} s cpu), {data.nbytes / dt / 2**20:.1f} MiB/s")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["sparse", "dense"])
