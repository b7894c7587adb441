"""Flight SQL benchmarks on the 256 MiB dense array of flight_read.py
(4096 x 8192 float64 cells; SELECT * also carries the int64 x and y
columns: 768 MiB of Arrow data), interleaved rounds in one run:

  1. SELECT * FROM bench.dense over ADBC (adbc-driver-flightsql) vs a DoGet
     of the same query ({"array": "bench/dense"}) with pyarrow Flight;
     both streamed batch by batch. Target: ADBC >= 0.9x DoGet.
  2. a selective WHERE (x BETWEEN 1000 AND 1039: 1% of the rows) over ADBC,
     pushed down as a subarray, vs DuckDB running the same WHERE over a full
     DoGet stream. Target: faster.

Reported: medians of per-round ratios (the machine is shared and noisy).

Usage: python benchmarks/sql_bench.py --flightd bin/flightd [--out benchmarks/RESULTS.md] [--data DIR]
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import duckdb
import pyarrow as pa
import pyarrow.flight as fl
import adbc_driver_flightsql.dbapi as adbc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flight_read import COLS, NAME, ROWS, make_array, start_flightd  # noqa: E402

import resultsfile  # noqa: E402 (benchmarks/ is the script directory)

ROUNDS = 5
WHERE = "x BETWEEN 1000 AND 1039"


def doget_all(client):
    rd = client.do_get(fl.Ticket(json.dumps({"array": NAME}).encode()))
    n = 0
    for chunk in rd:
        n += chunk.data.num_rows
    return n


def adbc_all(conn):
    cur = conn.cursor()
    cur.execute("SELECT * FROM bench.dense")
    n = 0
    for b in cur.fetch_record_batch():
        n += b.num_rows
    cur.close()
    return n


def adbc_where(conn):
    cur = conn.cursor()
    cur.execute("SELECT x, y, v FROM bench.dense WHERE %s" % WHERE)
    t = cur.fetch_arrow_table()
    cur.close()
    return t.num_rows, pa.compute.sum(t.column("v")).as_py()


def duckdb_where(client):
    rd = client.do_get(fl.Ticket(json.dumps({"array": NAME}).encode())).to_reader()
    t = duckdb.sql("SELECT x, y, v FROM rd WHERE %s" % WHERE).arrow()
    if isinstance(t, pa.RecordBatchReader):
        t = t.read_all()
    return t.num_rows, pa.compute.sum(t.column("v")).as_py()


def timed(fn, *a):
    t0 = time.perf_counter()
    r = fn(*a)
    return time.perf_counter() - t0, r


def run(args):
    root = args.data or tempfile.mkdtemp(prefix="tileflight-sqlbench-")
    make_array(root)
    proc, url = start_flightd(args.flightd, root)
    try:
        client = fl.connect(url)
        conn = adbc.connect(url)
        rows = ROWS * COLS
        want_rows = 40 * COLS
        # warm-up (metadata caches, page cache) and checks
        assert doget_all(client) == rows
        assert adbc_all(conn) == rows
        a, b = adbc_where(conn), duckdb_where(client)
        assert a[0] == b[0] == want_rows and a[1] == b[1], (a, b)
        r1, r2, raw = [], [], []
        for i in range(ROUNDS):
            td, n1 = timed(doget_all, client)
            ta, n2 = timed(adbc_all, conn)
            tw, w1 = timed(adbc_where, conn)
            tk, w2 = timed(duckdb_where, client)
            assert n1 == n2 == rows and w1 == w2
            r1.append(td / ta)  # ADBC speed relative to DoGet
            r2.append(tk / tw)  # pushed-down WHERE speed relative to DuckDB over DoGet
            raw.append((td, ta, tw, tk))
            print("round %d: DoGet %.3fs ADBC %.3fs | WHERE over ADBC %.3fs, DuckDB over DoGet %.3fs" % (i, td, ta, tw, tk))
        conn.close()
    finally:
        proc.terminate()
        proc.wait()
        if not args.data:
            shutil.rmtree(root, ignore_errors=True)
    m1, m2 = statistics.median(r1), statistics.median(r2)
    print("ADBC SELECT * vs DoGet: %.2fx (target >= 0.9x); selective WHERE vs DuckDB over DoGet: %.1fx (target > 1x)" % (m1, m2))
    if args.out:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        med = [statistics.median(x[k] for x in raw) for k in range(4)]
        with resultsfile.section(args.out, "sql") as f:
            f.write("\n## Flight SQL (`make bench-sql`)\n\n")
            f.write("Run %s on %s, %d CPUs (shared), Python %s, adbc-driver-flightsql, duckdb %s; %d interleaved rounds, "
                    "medians of per-round ratios.\n\n" % (now, platform.machine(), os.cpu_count(),
                                                         platform.python_version(), duckdb.__version__, ROUNDS))
            f.write("| comparison | median ratio | target | median seconds (this / other) |\n| --- | ---: | --- | --- |\n")
            f.write("| `SELECT * FROM bench.dense` over ADBC vs DoGet of the same query (768 MiB, streamed) | %.2fx | >= 0.9x | %.3f / %.3f |\n"
                    % (m1, med[1], med[0]))
            f.write("| `WHERE %s` (1%% of rows) over ADBC, pushed down, vs DuckDB over a full DoGet | %.1fx | > 1x | %.3f / %.3f |\n"
                    % (WHERE, m2, med[2], med[3]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flightd", default="bin/flightd")
    ap.add_argument("--out")
    ap.add_argument("--data", help="keep the benchmark array here (default: a temporary directory)")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
