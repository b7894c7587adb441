"""S3 and cluster read benchmark (appends to benchmarks/RESULTS.md).

The 256 MiB dense float64 array of flight_read.py, in a bucket of a local
moto S3 server (the same server the tests use) and on local disk, read whole
(column v) by a pyarrow client. Interleaved rounds, one run; the figures
reported are medians of per-round ratios (this machine is shared):

  flightd local    flightd -data DIR, DoGet
  flightd S3       flightd -data s3://bucket/prefix, DoGet
  tiledb S3        the tiledb package reading the same bucket in-process
                   (its S3 VFS; all cores, big buffers)

Then 1, 2 and 3 flightd nodes on the bucket (-advertise/-peers), with
3 parallel clients each reading the whole array through GetFlightInfo's
endpoints (spread over the nodes): aggregate GiB/s per node count.

Usage: python benchmarks/s3_read.py --flightd bin/flightd [--rounds 3] [--out benchmarks/RESULTS.md]
"""

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.flight as fl
import tiledb

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python_tests"))

import flight_read as fr  # noqa: E402
from s3_fixture import S3_ENV, Moto, free_port, tiledb_s3_config, upload_tree  # noqa: E402

import resultsfile  # noqa: E402 (benchmarks/ is the script directory)

NBYTES = fr.ROWS * fr.COLS * 8


def start_flightd(exe, data, *extra):
    return fr.start_flightd(exe, data, *extra, env=dict(os.environ, **S3_ENV))


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def doget(url):
    c = fl.connect(url)
    tk = fl.Ticket(json.dumps({"array": fr.NAME, "columns": ["v"]}).encode())
    fr.check_table(c.do_get(tk).read_all())
    c.close()


def read_spread(url):
    """One client: GetFlightInfo, then every endpoint from its first
    location, in parallel."""
    c = fl.connect(url)
    info = c.get_flight_info(fl.FlightDescriptor.for_command(
        json.dumps({"array": fr.NAME, "columns": ["v"], "partitions": 6}).encode()))
    c.close()

    def one(e):
        loc = e.locations[0].uri if e.locations else url
        loc = loc.decode() if isinstance(loc, bytes) else loc
        cc = fl.connect(loc)
        t = cc.do_get(e.ticket).read_all()
        cc.close()
        return t
    with cf.ThreadPoolExecutor(3) as ex:
        parts = list(ex.map(one, info.endpoints))
    fr.check_table(pa.concat_tables(parts))


def run(args):
    root = tempfile.mkdtemp(prefix="tileflight-s3bench-")
    moto = Moto()
    procs = []
    try:
        local_uri = fr.make_array(root)
        bucket = moto.new_bucket()
        upload_tree(moto.client(), root, bucket, "b")
        s3_uri = f"s3://{bucket}/b/{fr.NAME}"
        s3flags = ["-s3-endpoint", moto.url, "-s3-path-style"]
        lp, lurl = start_flightd(args.flightd, root, "-listen", "127.0.0.1:0")
        sp, surl = start_flightd(args.flightd, f"s3://{bucket}/b", "-listen", "127.0.0.1:0", *s3flags)
        procs += [lp, sp]
        cfg = fr.tiledb_config()
        for k, v in tiledb_s3_config(moto.url).items():
            cfg[k] = v

        def tiledb_s3():
            with tiledb.open(s3_uri, ctx=tiledb.Ctx(cfg)) as A:
                v = A.query(attrs=["v"])[:]["v"]
            assert v.size == fr.ROWS * fr.COLS and v.ravel()[-1] == fr.ROWS * fr.COLS - 1

        doget(surl)  # warm both daemons' metadata caches, as a server would be
        doget(lurl)
        rounds = []
        for _ in range(args.rounds):
            r = {"flightd local": timed(lambda: doget(lurl)),
                 "flightd S3": timed(lambda: doget(surl)),
                 "tiledb S3": timed(tiledb_s3)}
            rounds.append(r)
            print(r, flush=True)
        stop(lp)
        stop(sp)
        procs.clear()

        # Clusters of 1, 2, 3 nodes, 3 parallel clients each reading it all.
        scale = {}
        for n in (1, 2, 3):
            ports = [free_port() for _ in range(n)]
            urls = [f"grpc://127.0.0.1:{p}" for p in ports]
            nodes = [start_flightd(args.flightd, f"s3://{bucket}/b", "-listen", f"127.0.0.1:{p}", *s3flags,
                                   "-advertise", u, "-peers", ",".join(urls), "-peer-check-interval", "200ms")[0]
                     for p, u in zip(ports, urls)]
            procs += nodes
            time.sleep(1.0)  # peers' first health checks
            for u in urls:
                read_spread(u)  # warm every node
            ts = []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                with cf.ThreadPoolExecutor(3) as ex:
                    list(ex.map(read_spread, [urls[i % n] for i in range(3)]))
                ts.append(time.perf_counter() - t0)
            scale[n] = statistics.median(ts)
            print(n, ts, flush=True)
            for p in nodes:
                stop(p)
            procs.clear()
    finally:
        for p in procs:
            stop(p)
        moto.stop()
        shutil.rmtree(root, ignore_errors=True)

    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    ratio_tdb = statistics.median(r["tiledb S3"] / r["flightd S3"] for r in rounds)
    ratio_local = statistics.median(r["flightd S3"] / r["flightd local"] for r in rounds)
    lines = [
        "",
        "## S3 and clusters (`make bench-s3`)",
        "",
        f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared), tiledb {tiledb.__version__}, pyarrow {pa.__version__}; the S3 server is "
        "moto (a Python process on the same 2 cores), so these figures measure the S3 code path, not S3.",
        f"The 256 MiB dense read above (column v), {args.rounds} interleaved rounds; medians.",
        "",
        "| path | seconds (median) | GiB/s |",
        "| --- | ---: | ---: |",
    ]
    for k, t in med.items():
        lines.append(f"| {k} | {t:.3f} | {NBYTES / t / (1 << 30):.2f} |")
    lines += [
        "",
        f"Median per-round ratios: tiledb S3 / flightd S3 = **{ratio_tdb:.2f}x** (target >= 1x); "
        f"flightd S3 takes {ratio_local:.2f}x the time of flightd local.",
        "",
        "Nodes on one bucket, 3 parallel clients each reading the whole array through its endpoints:",
        "",
        "| nodes | seconds (median) | aggregate GiB/s |",
        "| ---: | ---: | ---: |",
    ]
    for n, t in scale.items():
        lines.append(f"| {n} | {t:.3f} | {3 * NBYTES / t / (1 << 30):.2f} |")
    lines += [
        "",
        "On this machine every node, every client and the S3 server share 2 cores, and moto serves",
        "each GET from one Python process: more nodes add no CPU and no S3 bandwidth, so",
        "throughput cannot grow with nodes here. The figures show that spreading costs little;",
        "scaling needs nodes on their own machines in front of a real S3.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with resultsfile.section(args.out, "s3") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flightd", default="bin/flightd")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
