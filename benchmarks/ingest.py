"""Streaming ingest: many small sparse DoPuts into flightd side by side with
the tiledb package writing the same batches in-process, then reads over the
many-fragment result, before and after compaction.

Array (the same schema for both sides, created by the tiledb package):
sparse, x int64 in [0, 999] (tile 100), y int64 in [0, 2^40) (tile 10 000),
attributes v float64, w int32, s string (var-sized, a few bytes), capacity
10 000, no duplicates. Put k holds cells k*10 000 .. k*10 000 + 9 999 of a
stream of readings (x = id % 1000 is the sensor, y = id // 1000 the time),
in shuffled order: the writer sorts them.

1. Single writer: --puts batches of --cells cells, in interleaved rounds of
   --round puts each (TileDB then flightd, the order alternating between
   rounds). flightd: one pyarrow.flight DoPut per batch (one client,
   connection reused); TileDB: tiledb.open(uri, "w") and one write per
   batch (--tiledb-keep-open: one open for the whole round). Rate = puts/s;
   ratio = median over rounds of flightd rate / TileDB rate (> 1: flightd
   faster). The client bound is reported too: how many such batches
   pyarrow serializes a second into memory (one thread).
2. Concurrency: --writers threads, each with its own Flight client, put
   into one array; aggregate puts/s against one writer doing the same
   number of puts, interleaved rounds, median ratio.
3. Reads over flightd's array (--puts fragments): a full scan and a 1 %
   slab (x in [0, 9], every y: 1 % of the cells, in every fragment),
   flightd DoGet vs the tiledb package (multi_index, unordered, then pa.table) on the same
   fragments, median of --read-rounds interleaved rounds; then the
   `consolidate` action (mode fragments) and `vacuum`, and the same reads
   again over the one consolidated fragment.

Results are appended to benchmarks/RESULTS.md (section "ingest") unless
--no-out.

Usage: python benchmarks/ingest.py --flightd bin/flightd [--puts 1000]
       [--round 50] [--writers 16] [--read-rounds 3] [--out benchmarks/RESULTS.md]
       [--flightd-arg=-fsync=never]
A quick run: --puts 100 --round 20 --read-rounds 1 --no-out.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import tiledb

import resultsfile  # noqa: E402 (benchmarks/ is the script directory)
from flight_read import start_flightd  # noqa: E402 (the shared daemon start)

SENSORS = 1000


def create(uri):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, SENSORS - 1), tile=100, dtype=np.int64),
                        tiledb.Dim("y", domain=(0, (1 << 40) - 1), tile=10_000, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(
        domain=dom, sparse=True, capacity=10_000, allows_duplicates=False,
        attrs=[tiledb.Attr("v", dtype=np.float64),
               tiledb.Attr("w", dtype=np.int32),
               tiledb.Attr("s", dtype=str, var=True)]))


def make_batches(n, cells, seed=7):
    """n batches as (Arrow table, numpy dict for TileDB)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        ids = k * cells + rng.permutation(cells).astype(np.int64)
        x, y = ids % SENSORS, ids // SENSORS
        v = rng.random(cells)
        w = rng.integers(-1000, 1000, cells, dtype=np.int32)
        s = np.array([f"r{i}" for i in ids % 9973], dtype=object)
        t = pa.table({"x": x, "y": y, "v": v, "w": w, "s": pa.array(s, pa.string())})
        out.append((t, {"x": x, "y": y, "v": v, "w": w, "s": s}))
    return out


def flight_put(client, name, table):
    desc = fl.FlightDescriptor.for_command(json.dumps({"array": name}))
    w, meta = client.do_put(desc, table.schema)
    w.write_table(table)
    w.done_writing()
    res = json.loads(meta.read().to_pybytes())
    w.close()
    assert res["rows"] == table.num_rows, res
    return res


def tiledb_put(uri, np_cols, ctx, A=None):
    cols = {k: v for k, v in np_cols.items() if k not in ("x", "y")}
    if A is not None:
        A[np_cols["x"], np_cols["y"]] = cols
        return
    with tiledb.open(uri, "w", ctx=ctx) as B:
        B[np_cols["x"], np_cols["y"]] = cols


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def ingest(args, client, root, batches, ctx):
    """Interleaved rounds of --round puts: flightd into bench/ingest_fl,
    TileDB into bench/ingest_tdb. Returns per-round rates."""
    name = "bench/ingest_fl"
    tdb_uri = os.path.join(root, "bench/ingest_tdb")
    rows = []
    i = 0
    rnd = 0
    while i < len(batches):
        chunk = batches[i:i + args.round]
        i += len(chunk)

        def ours():
            t0 = time.perf_counter()
            for t, _ in chunk:
                flight_put(client, name, t)
            return len(chunk) / (time.perf_counter() - t0)

        def theirs():
            t0 = time.perf_counter()
            if args.tiledb_keep_open:
                with tiledb.open(tdb_uri, "w", ctx=ctx) as A:
                    for _, c in chunk:
                        tiledb_put(tdb_uri, c, ctx, A)
            else:
                for _, c in chunk:
                    tiledb_put(tdb_uri, c, ctx)
            return len(chunk) / (time.perf_counter() - t0)

        if rnd % 2 == 0:
            r_t, r_f = theirs(), ours()
        else:
            r_f, r_t = ours(), theirs()
        rows.append((r_t, r_f, r_f / r_t))
        print(f"ingest round {rnd}: {len(chunk)} puts: tiledb {r_t:.1f}/s, flightd {r_f:.1f}/s, ratio {r_f / r_t:.2f}x", flush=True)
        rnd += 1
    return rows


def client_bound(batches):
    """Puts/s pyarrow can serialize (IPC stream into memory): the most a
    single Python client could send, whatever the server."""
    n = min(len(batches), 50)
    t0 = time.perf_counter()
    for t, _ in batches[:n]:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
        sink.getvalue()
    return n / (time.perf_counter() - t0)


def concurrent(args, url, batches):
    """Aggregate puts/s of --writers threads against one, same puts."""
    name = "bench/ingest_conc"
    clients = [fl.connect(url) for _ in range(args.writers)]
    per = max(1, args.conc_puts // args.writers)
    total = per * args.writers
    work = batches[:total] if len(batches) >= total else [batches[j % len(batches)] for j in range(total)]

    def one():
        t0 = time.perf_counter()
        for t, _ in work:
            flight_put(clients[0], name, t)
        return total / (time.perf_counter() - t0)

    def many():
        errs = []

        def run(j):
            try:
                for t, _ in work[j * per:(j + 1) * per]:
                    flight_put(clients[j], name, t)
            except Exception as e:  # noqa: BLE001 (reported below)
                errs.append(e)
        th = [threading.Thread(target=run, args=(j,)) for j in range(args.writers)]
        t0 = time.perf_counter()
        for t in th:
            t.start()
        for t in th:
            t.join()
        if errs:
            raise errs[0]
        return total / (time.perf_counter() - t0)

    rows = []
    for rnd in range(args.conc_rounds):
        if rnd % 2 == 0:
            a, b = one(), many()
        else:
            b, a = many(), one()
        rows.append((a, b, b / a))
        print(f"concurrency round {rnd}: 1 writer {a:.1f}/s, {args.writers} writers {b:.1f}/s, ratio {b / a:.2f}x", flush=True)
    for c in clients:
        c.close()
    return rows, total


def reads(args, client, root, ctx, label):
    name = "bench/ingest_fl"
    uri = os.path.join(root, name)
    slab_hi = SENSORS // 100 - 1

    def ours_full():
        return client.do_get(fl.Ticket(json.dumps({"array": name}).encode())).read_all().num_rows

    def ours_slab():
        q = {"array": name, "subarray": {"x": [[0, slab_hi]]}}
        return client.do_get(fl.Ticket(json.dumps(q).encode())).read_all().num_rows

    def tdb_arrow(sel):
        with tiledb.open(uri, ctx=ctx) as A:
            res = A.query(order="U").multi_index[sel]
        return pa.table({k: pa.array(res[k]) for k in ("x", "y", "v", "w", "s")}).num_rows

    def tdb_full():
        return tdb_arrow((slice(None), slice(None)))

    def tdb_slab():
        return tdb_arrow((slice(0, slab_hi), slice(None)))

    out = []
    for q, fo, ft in (("full scan", ours_full, tdb_full), ("1 % slab (x in [0, 9])", ours_slab, tdb_slab)):
        rs = []
        for rnd in range(args.read_rounds):
            def timed(f):
                t0 = time.perf_counter()
                n = f()
                return time.perf_counter() - t0, n
            if rnd % 2 == 0:
                (tt, nt), (tf, nf) = timed(ft), timed(fo)
            else:
                (tf, nf), (tt, nt) = timed(fo), timed(ft)
            assert nt == nf, (q, nt, nf)
            rs.append((tt, tf, tt / tf, nf))
            print(f"{label} {q} round {rnd}: tiledb {tt:.3f} s, flightd {tf:.3f} s, ratio {tt / tf:.2f}x ({nf} rows)", flush=True)
        out.append((f"{q}, {label}", median([r[0] for r in rs]), median([r[1] for r in rs]), median([r[2] for r in rs]), rs[0][3]))
    return out


def run(args):
    root = args.data or tempfile.mkdtemp(prefix="tileflight-ingest-")
    os.makedirs(os.path.join(root, "bench"), exist_ok=True)
    for n in ("ingest_fl", "ingest_tdb", "ingest_conc"):
        p = os.path.join(root, "bench", n)
        shutil.rmtree(p, ignore_errors=True)
        create(p)
    ctx = tiledb.Ctx(tiledb.Config({"sm.compute_concurrency_level": str(os.cpu_count()),
                                    "sm.io_concurrency_level": str(os.cpu_count())}))
    print(f"making {args.puts} batches of {args.cells} cells", flush=True)
    batches = make_batches(args.puts, args.cells)
    extra = list(args.flightd_arg or [])
    fd, url = start_flightd(args.flightd, root, *extra)
    client = fl.connect(url)
    try:
        flight_put(client, "bench/ingest_conc", batches[0][0])  # warm up the connection
        t0 = time.perf_counter()
        ing = ingest(args, client, root, batches, ctx)
        ing_secs = time.perf_counter() - t0
        bound = client_bound(batches)
        conc, conc_total = ([], 0)
        if args.writers > 1:
            conc, conc_total = concurrent(args, url, batches)
        rd = []
        if args.read_rounds > 0:
            rd += reads(args, client, root, ctx, f"{args.puts} fragments")
            t0 = time.perf_counter()
            for a in ("consolidate", "vacuum"):
                list(client.do_action(fl.Action(a, json.dumps({"array": "bench/ingest_fl", "mode": "fragments"}).encode())))
            cons = time.perf_counter() - t0
            print(f"consolidate + vacuum: {cons:.1f} s", flush=True)
            rd += reads(args, client, root, ctx, "consolidated")
        else:
            cons = float("nan")
    finally:
        client.close()
        fd.terminate()
        fd.wait()
        if not args.data and not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    rt, rf, ratio = (median([r[i] for r in ing]) for i in range(3))
    print(f"ingest: tiledb {rt:.1f} puts/s, flightd {rf:.1f} puts/s, median ratio {ratio:.2f}x; client bound {bound:.0f} puts/s")
    if conc:
        c1, cn, cr = (median([r[i] for r in conc]) for i in range(3))
        print(f"concurrency: 1 writer {c1:.1f}/s, {args.writers} writers {cn:.1f}/s, ratio {cr:.2f}x")
    if args.no_out:
        return
    load = os.getloadavg()
    with resultsfile.section(args.out, args.section) as f:
        f.write(f"## Streaming ingest: small sparse DoPuts ({datetime.date.today()})\n\n")
        f.write(f"`python benchmarks/ingest.py --flightd bin/flightd --puts {args.puts} --round {args.round} "
                f"--writers {args.writers} --read-rounds {args.read_rounds}"
                f"{' --tiledb-keep-open' if args.tiledb_keep_open else ''}` (`make bench-ingest`), "
                f"{platform.machine()}, {os.cpu_count()} cores, TileDB {'.'.join(map(str, tiledb.libtiledb.version()))} "
                f"(tiledb-py {tiledb.__version__}), pyarrow {pa.__version__}; load average at the end "
                f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} (a shared machine: the ratios, medians of interleaved "
                "rounds, are the figures to read).\n\n")
        f.write(f"Sparse 2-D array (x, y int64; v float64, w int32, s string), {args.cells:,}-cell puts, cells "
                f"shuffled, {args.puts} puts in rounds of {args.round}. flightd: one pyarrow.flight DoPut per "
                "batch; TileDB: the tiledb package in-process, "
                + ("one open for each round" if args.tiledb_keep_open else 'tiledb.open(uri, "w") per write') + ".\n\n")
        f.write("| ingest | tiledb in-process (puts/s) | flightd DoPut (puts/s) | ratio |\n|---|---:|---:|---:|\n")
        f.write(f"| {args.cells:,}-cell sparse puts ({len(ing)} rounds, {ing_secs:.0f} s) | {rt:.1f} | {rf:.1f} | {ratio:.2f}x |\n\n")
        f.write(f"Client bound: pyarrow serializes {bound:.0f} such batches/s into memory (one thread).\n\n")
        if conc:
            f.write(f"| concurrency ({conc_total} puts into one array) | 1 writer (puts/s) | {args.writers} writers (puts/s) | ratio |\n|---|---:|---:|---:|\n")
            f.write(f"| {args.writers} threads, one client each ({len(conc)} rounds) | {c1:.1f} | {cn:.1f} | {cr:.2f}x |\n\n")
        if rd:
            f.write(f"Reads over flightd's array ({args.puts * args.cells:,} cells): flightd DoGet vs the tiledb "
                    "package (multi_index, unordered, then pa.table) on the same fragments; ratio = TileDB time / flightd time "
                    f"(> 1: flightd faster), medians of {args.read_rounds} interleaved rounds. Consolidation: the "
                    f"`consolidate` action (mode fragments) then `vacuum`, {cons:.1f} s.\n\n")
            f.write("| read | rows | tiledb in-process (s) | flightd DoGet (s) | ratio |\n|---|---:|---:|---:|---:|\n")
            for q, tt, tf, r, n in rd:
                f.write(f"| {q} | {n:,} | {tt:.3f} | {tf:.3f} | {r:.2f}x |\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flightd", default="bin/flightd")
    ap.add_argument("--flightd-arg", action="append", help="extra flightd argument (repeatable)")
    ap.add_argument("--data", help="data directory (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    ap.add_argument("--puts", type=int, default=1000)
    ap.add_argument("--cells", type=int, default=10_000)
    ap.add_argument("--round", type=int, default=50, help="puts per interleaved round")
    ap.add_argument("--tiledb-keep-open", action="store_true", help="TileDB keeps the array open for a round")
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--conc-puts", type=int, default=160, help="puts per concurrency measurement")
    ap.add_argument("--conc-rounds", type=int, default=3)
    ap.add_argument("--read-rounds", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/RESULTS.md")
    ap.add_argument("--section", default="ingest")
    ap.add_argument("--no-out", action="store_true")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
