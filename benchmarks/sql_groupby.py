"""Flight SQL GROUP BY and join benchmark (10 M rows), interleaved rounds in one run:

  1. SELECT grp, sum(v), avg(v), count(*) FROM bench.fact GROUP BY grp over ADBC
     (adbc-driver-flightsql) against DuckDB in-process over the same columns read by
     TileDB-Py into Arrow (the time of the read plus the query; the query alone is
     reported too). Target: ADBC within 2x of DuckDB's read + query.
  2. the same with two keys (grp, cat: an int32 and a string attribute).
  3. a join of the 10 M row fact table with a 10 k row dimension table
     (SELECT d.name, count(*), sum(f.v) FROM bench.fact f JOIN bench.dim d
     ON f.did = d.did GROUP BY d.name), both ways: measured and reported.

The fact table is a dense 1-D array (id 0 .. 10 M - 1) with attributes grp int32 (16
values), cat string (8 values), did int32 (0 .. 9999) and v float64; the dimension table
a dense 1-D array of 10 k rows with attributes did int32 and name string (100 values).
The daemon's peak RSS (VmHWM) is read from /proc after each part.

Reported: medians of per-round ratios (the machine is shared and noisy).

Usage: python benchmarks/sql_groupby.py --flightd bin/flightd [--out benchmarks/RESULTS.md]
       [--data DIR] [--rounds N] [--baseline OLD_FLIGHTD]
"""

import argparse
import datetime
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import duckdb
import numpy as np
import pyarrow as pa
import tiledb
import adbc_driver_flightsql.dbapi as adbc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flight_read import start_flightd  # noqa: E402

import resultsfile  # noqa: E402 (benchmarks/ is the script directory)

ROWS = 10_000_000
DIMROWS = 10_000
KEYS = 16
Q1 = "SELECT grp, sum(v), avg(v), count(*) FROM {fact} GROUP BY grp"
Q2 = "SELECT grp, cat, sum(v), avg(v), count(*) FROM {fact} GROUP BY grp, cat"
QJ = ("SELECT d.name, count(*), sum(f.v) FROM {fact} f JOIN {dim} d ON f.did = d.did "
      "GROUP BY d.name")


def make_arrays(root):
    fact, dim = os.path.join(root, "bench", "fact"), os.path.join(root, "bench", "dim")
    if os.path.exists(os.path.join(fact, "__schema")) and os.path.exists(os.path.join(dim, "__schema")):
        return fact, dim
    os.makedirs(os.path.join(root, "bench"), exist_ok=True)
    rng = np.random.default_rng(24)
    d = tiledb.Dim(name="id", domain=(0, ROWS - 1), tile=1 << 20, dtype=np.int64)
    sch = tiledb.ArraySchema(domain=tiledb.Domain(d), sparse=False, attrs=[
        tiledb.Attr(name="grp", dtype=np.int32),
        tiledb.Attr(name="cat", dtype=str, var=True),
        tiledb.Attr(name="did", dtype=np.int32),
        tiledb.Attr(name="v", dtype=np.float64),
    ])
    tiledb.Array.create(fact, sch)
    cats = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"], dtype=object)
    step = 2_000_000
    with tiledb.open(fact, "w") as A:
        for lo in range(0, ROWS, step):
            n = min(step, ROWS - lo)
            A[lo:lo + n] = {
                "grp": rng.integers(0, KEYS, n, dtype=np.int32),
                "cat": cats[rng.integers(0, len(cats), n)],
                "did": rng.integers(0, DIMROWS, n, dtype=np.int32),
                "v": rng.random(n) * 100,
            }
    d = tiledb.Dim(name="row", domain=(0, DIMROWS - 1), tile=DIMROWS, dtype=np.int64)
    sch = tiledb.ArraySchema(domain=tiledb.Domain(d), sparse=False, attrs=[
        tiledb.Attr(name="did", dtype=np.int32),
        tiledb.Attr(name="name", dtype=str, var=True),
    ])
    tiledb.Array.create(dim, sch)
    with tiledb.open(dim, "w") as A:
        A[0:DIMROWS] = {
            "did": np.arange(DIMROWS, dtype=np.int32),
            "name": np.array(["name%02d" % (i % 100) for i in range(DIMROWS)], dtype=object),
        }
    return fact, dim


def tiledb_arrow(uri, attrs):
    """The columns attrs of the whole array, read by TileDB-Py (numpy), as an Arrow table
    (TileDB-Py's own Arrow path needs pandas < 3)."""
    with tiledb.open(uri) as A:
        got = A.query(attrs=attrs, dims=[])[:]
    cols = {}
    for name in attrs:
        x = got[name]
        cols[name] = pa.array(x, type=pa.string()) if x.dtype == object else pa.array(x)
    return pa.table(cols)


def duck(con, fact_uri, dim_uri, q, attrs, dim_attrs=None):
    """DuckDB over the columns TileDB-Py reads into Arrow: (read+query, query, result)."""
    t0 = time.perf_counter()
    fact = tiledb_arrow(fact_uri, attrs)
    dim = tiledb_arrow(dim_uri, dim_attrs) if dim_attrs else None
    t1 = time.perf_counter()
    con.register("fact", fact)
    if dim is not None:
        con.register("dim", dim)
    res = con.sql(q.format(fact="fact", dim="dim")).arrow()
    if not isinstance(res, pa.Table):
        res = res.read_all()
    t2 = time.perf_counter()
    con.unregister("fact")
    if dim is not None:
        con.unregister("dim")
    return t2 - t0, t2 - t1, res


def over_adbc(url, q):
    t0 = time.perf_counter()
    with adbc.connect(url) as conn:
        cur = conn.cursor()
        cur.execute(q.format(fact="bench.fact", dim="bench.dim"))
        res = cur.fetch_arrow_table()
        cur.close()
    return time.perf_counter() - t0, res


def canon(t):
    """Rows with floats to 9 significant digits (sums differ in the last bits with the
    order of additions), sorted."""
    out = []
    for row in t.to_pylist():
        out.append(tuple(float("%.9g" % v) if isinstance(v, float) else v for v in row.values()))
    return sorted(out, key=repr)


def vmhwm(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def run(args):
    root = args.data or tempfile.mkdtemp(prefix="tileflight-sqlgroupby-")
    t0 = time.perf_counter()
    fact_uri, dim_uri = make_arrays(root)
    print("arrays ready in %.1f s" % (time.perf_counter() - t0), flush=True)
    daemons = [("flightd", args.flightd)] + ([("baseline", args.baseline)] if args.baseline else [])
    procs = {}
    try:
        for name, exe in daemons:
            procs[name] = start_flightd(exe, root)
        con = duckdb.connect()
        con.execute("SET threads TO %d" % os.cpu_count())
        load = [loadavg()]
        rows = {}
        for label, q, attrs in (("group by grp", Q1, ["grp", "v"]), ("group by grp, cat", Q2, ["grp", "cat", "v"])):
            ratios, qratios, times = [], [], {n: [] for n in procs}
            dtimes, dq = [], []
            base = []
            for r in range(args.rounds):
                dt, dqt, dres = duck(con, fact_uri, dim_uri, q, attrs)
                at, ares = over_adbc(procs["flightd"][1], q)
                if canon(ares) != canon(dres):
                    raise SystemExit("%s: ADBC and DuckDB differ:\n%s\n%s" % (label, canon(ares)[:3], canon(dres)[:3]))
                dtimes.append(dt)
                dq.append(dqt)
                times["flightd"].append(at)
                ratios.append(at / dt)
                qratios.append(at / dqt)
                if "baseline" in procs and r < args.baseline_rounds:
                    bt, bres = over_adbc(procs["baseline"][1], q)
                    if canon(bres) != canon(dres):
                        raise SystemExit("%s: baseline differs" % label)
                    base.append(bt / at)
                print("%s round %d: adbc %.2f s, duckdb read+query %.2f s (query %.3f s)%s" % (
                    label, r, at, dt, dqt, (", baseline %.2f s" % (base[-1] * at)) if len(base) == r + 1 and base else ""), flush=True)
            rows[label] = dict(adbc=statistics.median(times["flightd"]), duck=statistics.median(dtimes),
                               duckq=statistics.median(dq), ratio=statistics.median(ratios),
                               rmin=min(ratios), rmax=max(ratios), qratio=statistics.median(qratios),
                               base=statistics.median(base) if base else None,
                               bmin=min(base) if base else None, bmax=max(base) if base else None,
                               groups=len(dres))
        load.append(loadavg())
        hwm_group = vmhwm(procs["flightd"][0].pid)
        # the join: the engine's hash join and grouping over 10 M rows
        jr, jd, jdq, jb = [], [], [], []
        for r in range(args.join_rounds):
            dt, dqt, dres = duck(con, fact_uri, dim_uri, QJ, ["did", "v"], ["did", "name"])
            at, ares = over_adbc(procs["flightd"][1], QJ)
            if canon(ares) != canon(dres):
                raise SystemExit("join: ADBC and DuckDB differ:\n%s\n%s" % (canon(ares)[:3], canon(dres)[:3]))
            jr.append(at)
            jd.append(dt)
            jdq.append(dqt)
            print("join round %d: adbc %.2f s, duckdb read+query %.2f s (query %.3f s)" % (r, at, dt, dqt), flush=True)
        hwm_join = vmhwm(procs["flightd"][0].pid)
        hwm_base = vmhwm(procs["baseline"][0].pid) if "baseline" in procs else None
        load.append(loadavg())
    finally:
        for p, _ in procs.values():
            p.terminate()
            p.wait()
        if not args.data:
            shutil.rmtree(root, ignore_errors=True)

    mib = 1 << 20
    lines = []
    lines.append("## Flight SQL GROUP BY and join, 10 M rows (issue 24)")
    lines.append("")
    lines.append("`make bench-sql-groupby` (benchmarks/sql_groupby.py) on %s, %s, %d cores, load average %s; "
                 "%d interleaved rounds (join: %d). The fact table: a dense 1-D TileDB array of 10 M rows "
                 "(grp int32, 16 values; cat string, 8 values; did int32, 10 k values; v float64); the "
                 "dimension table 10 k rows (did, name: 100 values). ADBC: adbc-driver-flightsql against "
                 "flightd, connect + execute + fetch. DuckDB: in-process, over the columns the query needs "
                 "read by TileDB-Py into Arrow (read + query; the query alone in brackets)." % (
                     datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                     platform.machine(), os.cpu_count(), " -> ".join(load), args.rounds, args.join_rounds))
    lines.append("")
    lines.append("| statement | groups | ADBC | DuckDB read+query (query) | ADBC / DuckDB, median of rounds (min - max) | ADBC / DuckDB query only |%s" % (
        " engine-only build / this build |" if args.baseline else ""))
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: |%s" % (" ---: |" if args.baseline else ""))
    for label, r in rows.items():
        b = ""
        if args.baseline:
            b = " %.2fx (%.2f - %.2f) |" % (r["base"], r["bmin"], r["bmax"]) if r["base"] else " - |"
        lines.append("| %s | %d | %.2f s | %.2f s (%.3f s) | %.2fx (%.2f - %.2f) | %.1fx |%s" % (
            label, r["groups"], r["adbc"], r["duck"], r["duckq"], r["ratio"], r["rmin"], r["rmax"], r["qratio"], b))
    lines.append("| join 10 M x 10 k, group by name | 100 | %.2f s | %.2f s (%.3f s) | %.2fx | %.1fx |%s" % (
        statistics.median(jr), statistics.median(jd), statistics.median(jdq),
        statistics.median([a / d for a, d in zip(jr, jd)]), statistics.median([a / d for a, d in zip(jr, jdq)]),
        " - |" if args.baseline else ""))
    lines.append("")
    lines.append("flightd peak RSS (VmHWM): %.0f MiB after the GROUP BY rounds, %.0f MiB after the join%s." % (
        hwm_group / mib, hwm_join / mib,
        (" (the engine-only build: %.0f MiB after its GROUP BY rounds)" % (hwm_base / mib)) if hwm_base else ""))
    text = "\n".join(lines) + "\n" + (args.notes or "")
    print(text)
    if args.out:
        resultsfile.write_section(args.out, "sql-groupby", text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flightd", required=True)
    ap.add_argument("--baseline", help="an older flightd (e.g. without the GROUP BY pushdown) measured alongside")
    ap.add_argument("--baseline-rounds", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--data", help="keep the arrays here (made once)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--join-rounds", type=int, default=2)
    ap.add_argument("--notes", default="")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
