"""The headline read benchmark: a 256 MiB dense float64 array to a pyarrow
client, three ways, on the same data in one run:

  flightd     DoGet of the whole array (column v) from our daemon
  py-flight   a small pyarrow Flight server in Python that reads the array
              with the tiledb package (whole array in one read) and streams it
  tiledb      the tiledb package reading the array in-process

Usage: python benchmarks/flight_read.py --flightd bin/flightd [--out benchmarks/RESULTS.md]
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import tiledb

import resultsfile  # noqa: E402 (benchmarks/ is the script directory)

ROWS, COLS = 4096, 8192  # 32 Mi float64 cells = 256 MiB
TILE_ROWS = 256          # tiles of 256 x 8192 = 16 MiB, full rows
NAME = "bench/dense"
REPEATS = 5


def tiledb_config():
    # The package's best settings for one big read: all cores, big buffers.
    return tiledb.Config({
        "sm.compute_concurrency_level": str(os.cpu_count()),
        "sm.io_concurrency_level": str(os.cpu_count()),
        "py.init_buffer_bytes": str(512 << 20),
        "sm.memory_budget": str(1 << 30),
    })


def make_array(root):
    uri = os.path.join(root, NAME)
    if os.path.isdir(uri):
        return uri
    os.makedirs(os.path.dirname(uri), exist_ok=True)
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, ROWS - 1), tile=TILE_ROWS, dtype=np.int64),
                        tiledb.Dim("y", domain=(0, COLS - 1), tile=COLS, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False,
                                                attrs=[tiledb.Attr("v", dtype=np.float64)]))
    step = 512
    with tiledb.open(uri, "w") as A:
        for r in range(0, ROWS, step):
            block = (np.arange(r, r + step, dtype=np.float64)[:, None] * COLS
                     + np.arange(COLS, dtype=np.float64)[None, :])
            A[r:r + step, :] = block
    return uri


# ---------------------------------------------------------------- the Python server

class TileDBFlightServer(fl.FlightServerBase):
    def __init__(self, location, root):
        super().__init__(location)
        self.root = root
        self.ctx = tiledb.Ctx(tiledb_config())

    def do_get(self, context, ticket):
        q = json.loads(ticket.ticket)
        with tiledb.open(os.path.join(self.root, q["array"]), ctx=self.ctx) as A:
            v = A.query(attrs=["v"])[:]["v"].ravel()
        table = pa.table({"v": v})
        return fl.RecordBatchStream(table.combine_chunks(), options=None)


def serve_python(port, root):
    server = TileDBFlightServer(f"grpc://127.0.0.1:{port}", root)
    print(f"ready grpc://127.0.0.1:{server.port}", flush=True)
    server.serve()


def start_python_server(root):
    p = subprocess.Popen([sys.executable, __file__, "--serve-python", root], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"grpc://\S+", line)
    if not m:
        p.kill()
        raise RuntimeError("python flight server did not start: " + line)
    return p, m.group(0)


def start_flightd(exe, data, *extra, env=None):
    """Starts flightd on data (a directory or s3:// URL) with a 1 GiB budget,
    on a free loopback port unless extra names -listen, and returns the
    process and its grpc:// URL. Every benchmark script starts its daemons
    here. The daemon's log (one access record per call) is drained by a
    thread for the whole run: a pipe nobody reads fills after a few hundred
    calls and then blocks the daemon mid-call."""
    listen = [] if "-listen" in extra else ["-listen", "127.0.0.1:0"]
    p = subprocess.Popen([exe, "-data", data, *listen, "-log-format", "json", "-memory-budget", str(1 << 30), *extra],
                         stderr=subprocess.PIPE, text=True, env=env)
    for line in p.stderr:
        m = re.search(r'"url":"(grpc://[^"]+)"', line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, m.group(1)
    raise RuntimeError("flightd did not start")


# ---------------------------------------------------------------- measurements

def best_of(fn):
    times, check = [], None
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        check = fn()
        times.append(time.perf_counter() - t0)
    return min(times), check


def check_table(t):
    v = t.column("v")
    assert t.num_rows == ROWS * COLS, t.num_rows
    # First and last value of the formula: v = x * COLS + y.
    assert v[0].as_py() == 0.0 and v[-1].as_py() == float(ROWS * COLS - 1)
    return t.num_rows


def run(args):
    root = args.data or tempfile.mkdtemp(prefix="tileflight-bench-")
    uri = make_array(root)
    nbytes = ROWS * COLS * 8
    results = {}

    def in_process():
        with tiledb.open(uri, ctx=tiledb.Ctx(tiledb_config())) as A:
            v = A.query(attrs=["v"])[:]["v"]
        assert v.size == ROWS * COLS and v.ravel()[-1] == ROWS * COLS - 1
        return v.size

    results["tiledb in-process"] = best_of(in_process)[0]

    py, py_url = start_python_server(root)
    try:
        c = fl.connect(py_url)
        tk = fl.Ticket(json.dumps({"array": NAME}).encode())
        results["python Flight server"] = best_of(lambda: check_table(c.do_get(tk).read_all()))[0]
        c.close()
    finally:
        py.send_signal(signal.SIGTERM)
        py.wait(10)

    fd, fd_url = start_flightd(args.flightd, root)
    try:
        c = fl.connect(fd_url)
        tk = fl.Ticket(json.dumps({"array": NAME, "columns": ["v"]}).encode())
        results["flightd DoGet"] = best_of(lambda: check_table(c.do_get(tk).read_all()))[0]

        def parallel():
            import concurrent.futures as cf
            info = c.get_flight_info(fl.FlightDescriptor.for_command(
                json.dumps({"array": NAME, "columns": ["v"], "partitions": os.cpu_count() or 2}).encode()))
            with cf.ThreadPoolExecutor(len(info.endpoints)) as ex:
                parts = list(ex.map(lambda e: c.do_get(e.ticket).read_all(), info.endpoints))
            return check_table(pa.concat_tables(parts))

        results["flightd endpoints in parallel"] = best_of(parallel)[0]
        c.close()
    finally:
        fd.send_signal(signal.SIGTERM)
        fd.wait(30)
    if not args.data:
        shutil.rmtree(root, ignore_errors=True)

    ours = results["flightd DoGet"]
    lines = [
        "# Benchmark results",
        "",
        "The headline read: the whole of a 256 MiB dense float64 array (4096 x 8192 cells,",
        f"tiles of {TILE_ROWS} x {COLS}, no filters; written by the tiledb package) to a pyarrow",
        "client, best of %d, all on one machine in one run (`make bench-flight`)." % REPEATS,
        "",
        f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared), Python {platform.python_version()}, tiledb {tiledb.__version__} "
        f"(TileDB {'.'.join(map(str, tiledb.libtiledb.version()))}), pyarrow {pa.__version__}.",
        "",
        "| path | seconds | GiB/s | flightd DoGet speed vs this |",
        "| --- | ---: | ---: | ---: |",
    ]
    for k, t in results.items():
        lines.append(f"| {k} | {t:.3f} | {nbytes / t / (1 << 30):.2f} | {t / ours:.2f}x |")
    lines += [
        "",
        "Targets: flightd DoGet >= 2x the Python Flight server, >= 0.8x in-process tiledb.",
        f"Measured: {results['python Flight server'] / ours:.2f}x the Python Flight server, "
        f"{results['tiledb in-process'] / ours:.2f}x in-process tiledb.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with resultsfile.section(args.out, "flight") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flightd", default="bin/flightd")
    ap.add_argument("--out")
    ap.add_argument("--data", help="keep the benchmark array here (default: a temporary directory)")
    ap.add_argument("--serve-python", metavar="ROOT")
    args = ap.parse_args()
    if args.serve_python:
        serve_python(0, args.serve_python)
        return
    run(args)


if __name__ == "__main__":
    main()
