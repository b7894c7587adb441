"""The array-read benchmark (issue 27): ``A[box]["v"]`` into NumPy through
tileflight (``client.array(name)[box]``, a daemon on loopback) against
TileDB-Py in-process (``tiledb.open(path)[box]``) on the same dense array.

  box:    a box of 1 % of the cells (10 % of each side, in the middle)
  whole:  the whole array (256 MiB of float64 at the default size)

The array is a float64 dense array written by TileDB-Py (tiles 512 x 512,
zstd level 1). Each round measures the four reads, tileflight and TileDB-Py
taking turns at going first; the figure is the median over rounds of the
per-round ratio TileDB-Py time / tileflight time (>= 1: tileflight is at
least as fast), because the machine is shared and absolute times from
different moments do not compare. Both results are checked equal once.

Targets: >= 1x for the box, >= 0.8x for the whole read.

Usage: python benchmarks/array_read.py --flightd bin/flightd [--rows 4096 --cols 8192] [--rounds 9]
(``make bench-array``; ``--rows 1024 --cols 1024`` is a quick 8 MiB run).
"""

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

import numpy as np
import tiledb

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "src"))
import tileflight  # noqa: E402

from flight_read import start_flightd  # noqa: E402 (the shared daemon start)

NAME = "bench/grid"


def make_array(root, rows, cols):
    p = os.path.join(root, NAME)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    t = min(512, rows, cols)
    dom = tiledb.Domain(tiledb.Dim("y", domain=(0, rows - 1), tile=t, dtype=np.int64),
                        tiledb.Dim("x", domain=(0, cols - 1), tile=t, dtype=np.int64))
    tiledb.Array.create(p, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("v", dtype=np.float64, filters=[tiledb.ZstdFilter(level=1)])]))
    y = np.arange(rows, dtype="f8")[:, None]
    x = np.arange(cols, dtype="f8")[None, :]
    with tiledb.open(p, "w") as A:
        A[:] = {"v": 20 + 10 * np.sin(y / 100) * np.cos(x / 100) + (y * cols + x) * 1e-6}
    return p


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flightd", required=True)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--data", help="keep the array here (default: a temporary directory)")
    args = ap.parse_args()

    root = args.data or tempfile.mkdtemp(prefix="array-bench-")
    path = os.path.join(root, NAME)
    if not os.path.exists(path):
        make_array(root, args.rows, args.cols)
    proc, url = start_flightd(args.flightd, root)
    try:
        client = tileflight.connect(url)
        ours = client.array(NAME)
        theirs = tiledb.open(path)
        rows, cols = ours.schema.shape
        r0, c0, rh, ch = rows * 45 // 100, cols * 45 // 100, max(1, rows // 10), max(1, cols // 10)
        box = (slice(r0, r0 + rh), slice(c0, c0 + ch))
        whole = (slice(None), slice(None))
        # Warm both (schema, fragment metadata, page cache) and check equality once.
        for sel in (box, whole):
            a, b = theirs[sel]["v"], ours[sel]["v"]
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), sel
        ratios = {"box": [], "whole": []}
        times = {k: {"tileflight": [], "tiledb": []} for k in ratios}
        for i in range(args.rounds):
            for label, sel in (("box", box), ("whole", whole)):
                order = [("tiledb", theirs), ("tileflight", ours)]
                if i % 2:
                    order.reverse()
                got = {}
                for who, arr in order:
                    got[who], _ = timed(lambda: arr[sel]["v"])
                    times[label][who].append(got[who])
                ratios[label].append(got["tiledb"] / got["tileflight"])
        mib = rows * cols * 8 / (1 << 20)
        print(f"array {rows} x {cols} float64 ({mib:.0f} MiB), tiles 512, zstd 1; {args.rounds} rounds; "
              f"figure = median of per-round (TileDB-Py time / tileflight time)")
        for label, target in (("box", 1.0), ("whole", 0.8)):
            med = statistics.median(ratios[label])
            tf, td = statistics.median(times[label]["tileflight"]), statistics.median(times[label]["tiledb"])
            print(f"  {label:5s}: {med:.2f}x (target >= {target}x)  tileflight {tf * 1e3:.1f} ms, "
                  f"TileDB-Py {td * 1e3:.1f} ms (medians)")
        theirs.close()
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        if not args.data:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
