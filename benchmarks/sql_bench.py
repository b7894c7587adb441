"""Flight SQL benchmarks on the 256 MiB dense array of flight_read.py
(4096 x 8192 float64 cells; SELECT * also carries the int64 x and y
columns: 768 MiB of Arrow data), interleaved rounds in one run:

  1. SELECT * FROM bench.dense over ADBC (adbc-driver-flightsql) vs a DoGet
     of the same query ({"array": "bench/dense"}) with pyarrow Flight;
     both streamed batch by batch. Target: ADBC >= 0.9x DoGet.
  2. a selective WHERE (x BETWEEN 1000 AND 1039: 1% of the rows) over ADBC,
     pushed down as a subarray, vs DuckDB running the same WHERE over a full
     DoGet stream. Target: faster.
  3. the same 1% selected by a WHERE on the attribute (v >= 8192000 AND
     v < 8519680), pushed down as the scan's filter (tiles whose min/max
     exclude it are not read), vs DuckDB over a full DoGet.
  4. SELECT count(*), sum(v) FROM bench.dense over ADBC (answered by the
     reader's aggregates, from tile statistics) vs DuckDB over a full DoGet.

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
NOTES = """
Notes: the machine is shared (about six engineers on 2 CPUs); the first row's per-round ratios
vary widely between runs (0.60x-1.44x in earlier runs; this run's rounds are listed by the
script). The first row is bound by the client: both clients make the daemon do the same
work (about 0.5 CPU-s per 768 MiB), but the ADBC driver spends 0.67-0.87 CPU-s receiving it
against pyarrow's 0.34-0.39 (`perf record` of the ADBC client: gRPC-Go clearing every pooled
receive buffer, 13 %; its protobuf codec gathering each message and copying the body out
again, 16 %; page faults on fresh buffers), so on 2 cores the ADBC read cannot come
within 0.9x of the DoGet however the server sends. The attribute `WHERE` reads every tile: the reader does not trust float tile
min/max (TileDB computes them with comparisons a NaN derails), so the gain is only that the
failing cells are dropped in the reader instead of streamed; on integer attributes tiles
whose min/max exclude the condition are not read. The aggregate row is answered from tile
statistics (sum, count) without reading a tile.
"""
WHERE = "x BETWEEN 1000 AND 1039"
AWHERE = "v >= %d AND v < %d" % (1000 * COLS, 1040 * COLS)  # the same rows, by value
AGG = "SELECT count(*), sum(v) FROM %s"


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


def adbc_where(conn, where=WHERE):
    cur = conn.cursor()
    cur.execute("SELECT x, y, v FROM bench.dense WHERE %s" % where)
    t = cur.fetch_arrow_table()
    cur.close()
    return t.num_rows, pa.compute.sum(t.column("v")).as_py()


def duckdb_where(client, where=WHERE):
    rd = client.do_get(fl.Ticket(json.dumps({"array": NAME}).encode())).to_reader()
    t = duckdb.sql("SELECT x, y, v FROM rd WHERE %s" % where).arrow()
    if isinstance(t, pa.RecordBatchReader):
        t = t.read_all()
    return t.num_rows, pa.compute.sum(t.column("v")).as_py()


def adbc_awhere(conn):
    return adbc_where(conn, AWHERE)


def duckdb_awhere(client):
    return duckdb_where(client, AWHERE)


def adbc_agg(conn):
    cur = conn.cursor()
    cur.execute(AGG % "bench.dense")
    r = cur.fetchall()[0]
    cur.close()
    return int(r[0]), float(r[1])


def duckdb_agg(client):
    rd = client.do_get(fl.Ticket(json.dumps({"array": NAME, "columns": ["v"]}).encode())).to_reader()
    r = duckdb.sql(AGG % "rd").fetchall()[0]
    return int(r[0]), float(r[1])


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
        a2, b2 = adbc_awhere(conn), duckdb_awhere(client)
        assert a2 == a and b2 == b, (a2, b2)
        c1, c2 = adbc_agg(conn), duckdb_agg(client)
        assert c1[0] == c2[0] == rows and c1[1] == c2[1], (c1, c2)
        r1, r2, r3, r4, raw = [], [], [], [], []
        for i in range(ROUNDS):
            td, n1 = timed(doget_all, client)
            ta, n2 = timed(adbc_all, conn)
            tw, w1 = timed(adbc_where, conn)
            tk, w2 = timed(duckdb_where, client)
            tv, w3 = timed(adbc_awhere, conn)
            tu, w4 = timed(duckdb_awhere, client)
            tg, g1 = timed(adbc_agg, conn)
            th, g2 = timed(duckdb_agg, client)
            assert n1 == n2 == rows and w1 == w2 == w3 == w4 and g1 == g2
            r1.append(td / ta)  # ADBC speed relative to DoGet
            r2.append(tk / tw)  # pushed-down WHERE speed relative to DuckDB over DoGet
            r3.append(tu / tv)  # pushed-down attribute filter vs DuckDB over DoGet
            r4.append(th / tg)  # native aggregates vs DuckDB over DoGet
            raw.append((td, ta, tw, tk, tv, tu, tg, th))
            print("round %d: DoGet %.3fs ADBC %.3fs | WHERE over ADBC %.3fs, DuckDB over DoGet %.3fs | "
                  "attribute WHERE %.3fs vs %.3fs | count/sum %.3fs vs %.3fs" % (i, td, ta, tw, tk, tv, tu, tg, th))
        conn.close()
    finally:
        proc.terminate()
        proc.wait()
        if not args.data:
            shutil.rmtree(root, ignore_errors=True)
    m1, m2, m3, m4 = (statistics.median(r) for r in (r1, r2, r3, r4))
    print("ADBC SELECT * vs DoGet: %.2fx (target >= 0.9x); selective WHERE vs DuckDB over DoGet: %.1fx (target > 1x); "
          "attribute WHERE: %.1fx; count/sum: %.1fx" % (m1, m2, m3, m4))
    if args.out:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        med = [statistics.median(x[k] for x in raw) for k in range(8)]
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
            f.write("| `WHERE %s` (the same 1%% of rows, by attribute value) over ADBC, pushed down as `filter`, vs DuckDB over a full DoGet | %.1fx | > 1x | %.3f / %.3f |\n"
                    % (AWHERE, m3, med[4], med[5]))
            f.write("| `%s` over ADBC, answered by the reader's `aggregates`, vs DuckDB over a full DoGet of `v` | %.1fx | > 1x | %.3f / %.3f |\n"
                    % (AGG % "bench.dense", m4, med[6], med[7]))
            f.write(NOTES)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flightd", default="bin/flightd")
    ap.add_argument("--out")
    ap.add_argument("--data", help="keep the benchmark array here (default: a temporary directory)")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
