"""Automatic compaction, measured: a sparse array written by N small DoPuts
(N fragments), then the N-th write that triggers -compact-after N.

  read before   DoGet of the whole array over N fragments (median of rounds)
  compaction    the daemon's own time for it (tileflight_compaction_seconds)
  read after    the same DoGet over the one consolidated fragment
  put p50       DoPut latency of small writes while no compaction runs,
  put p50 during   and while one runs (-compact-workers 1)

Usage: python benchmarks/compaction.py --flightd bin/flightd [--writes 64] [--rows 20000] [--rounds 5]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python_tests"))
from flightd_fixture import Daemon, action, put, read  # noqa: E402
from s3_fixture import free_port  # noqa: E402

SCHEMA = {"type": "sparse", "allows_duplicates": False, "capacity": 10000,
          "dimensions": [{"name": "x", "type": "int64", "domain": [0, 2**40], "tile": 2**20}],
          "attributes": [{"name": "v", "type": "float64"}]}


def batch(k, rows, rng):
    x = np.arange(k * rows, (k + 1) * rows, dtype=np.int64)
    rng.shuffle(x)
    return pa.table({"x": pa.array(x), "v": pa.array(rng.standard_normal(rows))})


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith(name + " "))


def timed_read(c, rounds):
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        n = read(c, array="a").num_rows
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flightd", required=True)
    ap.add_argument("--writes", type=int, default=64)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        mport = free_port()
        d = Daemon(a.flightd, tmp, args=["-compact-after", str(a.writes), "-vacuum-grace", "2s",
                                         "-metrics-listen", f"127.0.0.1:{mport}"])
        try:
            c = d.client()
            action(c, "create_array", dict(SCHEMA, array="a"))
            # Small writes go to array b (fewer than --writes of them: b
            # is never compacted).
            action(c, "create_array", dict(SCHEMA, array="b"))
            nsmall = min(20, (a.writes - 1) // 2)
            small = [batch(10**6 + i, 100, rng) for i in range(2 * nsmall)]
            lat_idle = []
            for k in range(a.writes - 1):
                put(c, "a", batch(k, a.rows, rng))
            for t in small[:nsmall]:
                s = time.perf_counter()
                put(c, "b", t)
                lat_idle.append(time.perf_counter() - s)
            before, n = timed_read(c, a.rounds)
            frags = action(c, "describe", {"array": "a"})["fragment_count"]
            # Small writes while the compaction runs.
            lat_busy = []
            done = threading.Event()

            def writer():
                wc = d.client()
                for t in small[nsmall:]:
                    if done.is_set():
                        break
                    s = time.perf_counter()
                    put(wc, "b", t)
                    lat_busy.append(time.perf_counter() - s)
            put(c, "a", batch(a.writes - 1, a.rows, rng))  # the N-th: compaction
            th = threading.Thread(target=writer)
            th.start()
            while metric(mport, "tileflight_compaction_seconds_count") < 1:
                time.sleep(0.05)
            done.set()
            th.join()
            took = metric(mport, "tileflight_compaction_seconds_sum")
            merged = metric(mport, "tileflight_compaction_fragments_merged_total")
            while action(c, "describe", {"array": "a"})["fragment_count"] != 1:
                time.sleep(0.05)
            after, n2 = timed_read(c, a.rounds)
            frags2 = action(c, "describe", {"array": "a"})["fragment_count"]
        finally:
            d.stop()
    out = {"fragments_before": frags, "rows": n, "read_before_s": round(before, 4),
           "compaction_s": round(took, 3), "merged": merged, "fragments_after": frags2,
           "rows_after": n2, "read_after_s": round(after, 4),
           "put_p50_idle_ms": round(1000 * statistics.median(lat_idle), 1),
           "put_p50_during_ms": round(1000 * statistics.median(lat_busy), 1) if lat_busy else None,
           "puts_during": len(lat_busy)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
