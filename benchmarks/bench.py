"""The performance harness of issue 14 (`make bench`): every case of the
issue's table, run side by side in one process on the same arrays,
against

  tiledb     the tiledb package in-process (the reference engine)
  pyflight   a pyarrow Flight server in Python over the tiledb package
  memflight  an in-memory Go Flight server (bin/memflight: results held in
             memory, so only Arrow IPC and gRPC are paid: the ceiling)
  flightd    our daemon with default flags (bin/flightd)
  baseline   optionally, another flightd binary (--baseline), for
             before/after ratios taken in the same run

The machine is shared and noisy, so absolute times from different runs
never compare: each round runs every contender of a case once, in a
rotating order, and the figure reported is the median over rounds of the
per-round ratio (reference time / flightd time: above 1 means flightd is
faster). Peak RSS is each server's VmHWM, reset (clear_refs 5) before
each timed call; CPU time is the server process's user+system time of the
call (the harness process's own for tiledb in-process).

Arrays are written once with the tiledb package into --data (default
~/.cache/tileflight-bench/suite) and reused.

Usage: bench.py [--rounds 5] [--baseline BIN] [--out benchmarks/RESULTS.md]
"""

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import tiledb

import resultsfile  # noqa: E402 (benchmarks/ is the script directory)

MiB = 1 << 20

# ------------------------------------------------------------------ arrays

DENSE = (4096, 8192)        # 256 MiB of float64
DENSE_TILE = (256, 8192)    # 16 MiB tiles
BIG = (8192, 16384)         # 1 GiB of float64
BIG_TILE = (128, 16384)     # 16 MiB tiles
BOXA = (4096, 4096)         # 128 MiB, tiles of 256 x 256 (512 KiB)
BOX = ((1000, 1409), (2000, 2409))  # 410 x 410 cells: 1 % of the array
SPARSE_X, SPARSE_Y = 10000, 1000    # 10 M cells
SLAB = (4000, 4999)                 # 10 % of x
PUT_SPARSE = 5_000_000


def zstd(level):
    return tiledb.FilterList([tiledb.ZstdFilter(level=level)])


def dense_schema(shape, tile, filters):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, shape[0] - 1), tile=tile[0], dtype=np.int64),
                        tiledb.Dim("y", domain=(0, shape[1] - 1), tile=tile[1], dtype=np.int64))
    return tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr("v", dtype=np.float64, filters=filters)])


def sparse_schema(filters, capacity=100_000):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, SPARSE_X - 1), tile=1000, dtype=np.int64, filters=filters),
                        tiledb.Dim("y", domain=(0, SPARSE_Y - 1), tile=100, dtype=np.int64, filters=filters))
    return tiledb.ArraySchema(domain=dom, sparse=True, capacity=capacity,
                              attrs=[tiledb.Attr("v", dtype=np.float64, filters=filters)])


def dense_block(r0, r1, cols):
    return np.arange(r0, r1, dtype=np.float64)[:, None] * cols + np.arange(cols, dtype=np.float64)[None, :]


def write_dense(uri, shape, tile, filters, step):
    if os.path.isdir(os.path.join(uri, "__schema")):
        return
    shutil.rmtree(uri, ignore_errors=True)
    os.makedirs(os.path.dirname(uri), exist_ok=True)
    tiledb.Array.create(uri, dense_schema(shape, tile, filters))
    with tiledb.open(uri, "w") as A:
        for r in range(0, shape[0], step):
            A[r:r + step, :] = dense_block(r, r + step, shape[1])


def make_arrays(root):
    t = time.perf_counter()
    write_dense(os.path.join(root, "bench/dense_plain"), DENSE, DENSE_TILE, tiledb.FilterList([]), 1024)
    write_dense(os.path.join(root, "bench/dense_zstd"), DENSE, DENSE_TILE, zstd(1), 1024)
    write_dense(os.path.join(root, "bench/dense_1g"), BIG, BIG_TILE, zstd(1), 1024)
    write_dense(os.path.join(root, "bench/box"), BOXA, (256, 256), zstd(1), 4096)
    uri = os.path.join(root, "bench/sparse10m")
    if not os.path.isdir(os.path.join(uri, "__schema")):
        shutil.rmtree(uri, ignore_errors=True)
        tiledb.Array.create(uri, sparse_schema(zstd(3)))
        xs, ys = np.meshgrid(np.arange(SPARSE_X, dtype=np.int64), np.arange(SPARSE_Y, dtype=np.int64), indexing="ij")
        rng = np.random.default_rng(1)
        with tiledb.open(uri, "w", timestamp=1000) as A:
            A[xs.ravel(), ys.ravel()] = {"v": rng.standard_normal(xs.size)}
    print(f"arrays ready in {time.perf_counter() - t:.1f} s", flush=True)


_CTX = None


def tiledb_ctx():
    """One context for the process, as a TileDB user keeps one: the
    package's settings for big reads (all cores, big buffers)."""
    global _CTX
    if _CTX is None:
        _CTX = _new_ctx()
    return _CTX


def _new_ctx():
    n = str(os.cpu_count())
    return tiledb.Ctx(tiledb.Config({
        "sm.compute_concurrency_level": n, "sm.io_concurrency_level": n,
        "py.init_buffer_bytes": str(512 * MiB), "sm.memory_budget": str(1 << 30),
    }))


# ------------------------------------------------------------------ the Python Flight server

def read_tiledb(ctx, root, q):
    """q is a tileflight query (array, columns, subarray): read it with the
    tiledb package and return a pyarrow table."""
    with tiledb.open(os.path.join(root, q["array"]), ctx=ctx) as A:
        sub = q.get("subarray", {})
        idx = []
        for d in A.schema.domain:
            r = sub.get(d.name)
            idx.append(slice(r[0][0], r[0][1]) if r else slice(None))
        cols = q.get("columns")
        if A.schema.sparse:
            attrs = [c for c in (cols or ["v"]) if A.schema.has_attr(c)]
            res = A.query(attrs=attrs, order="U").multi_index[tuple(idx)]
        else:
            res = A.query(attrs=["v"], coords=False).multi_index[tuple(idx)]
        names = cols or list(res.keys())
        return pa.table({k: np.ascontiguousarray(res[k]).ravel() for k in names})


def write_tiledb(root, cmd, table):
    uri = os.path.join(root, cmd["array"])
    with tiledb.open(uri, "w", ctx=tiledb_ctx()) as A:
        if A.schema.sparse:
            A[table.column("x").to_numpy(), table.column("y").to_numpy()] = {"v": table.column("v").to_numpy()}
        else:
            (x0, x1), (y0, y1) = cmd["subarray"]["x"][0], cmd["subarray"]["y"][0]
            A[x0:x1 + 1, y0:y1 + 1] = table.column("v").to_numpy().reshape(x1 - x0 + 1, y1 - y0 + 1)


class PyFlight(fl.FlightServerBase):
    def __init__(self, location, root):
        super().__init__(location)
        self.root, self.ctx = root, tiledb_ctx()

    def do_get(self, context, ticket):
        return fl.RecordBatchStream(read_tiledb(self.ctx, self.root, json.loads(ticket.ticket)))

    def do_put(self, context, descriptor, reader, writer):
        cmd = json.loads(descriptor.command) if descriptor.command else {"array": "/".join(p.decode() for p in descriptor.path)}
        write_tiledb(self.root, cmd, reader.read_all())


# ------------------------------------------------------------------ processes

class Server:
    def __init__(self, name, argv, pattern, stream="stdout"):
        self.name = name
        kw = {"stdout": subprocess.PIPE} if stream == "stdout" else {"stderr": subprocess.PIPE, "stdout": subprocess.DEVNULL}
        self.p = subprocess.Popen(argv, text=True, **kw)
        out = self.p.stdout if stream == "stdout" else self.p.stderr
        for line in out:
            m = re.search(pattern, line)
            if m:
                self.url = m.group(1)
                break
        else:
            raise RuntimeError(f"{name} did not start")
        # Keep draining its output so that it never blocks on a full pipe.
        import threading
        threading.Thread(target=lambda: [None for _ in out], daemon=True).start()
        self.client = fl.connect(self.url)

    @property
    def pid(self):
        return self.p.pid

    def stop(self):
        self.client.close()
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()


def reset_peak(pid):
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


class Sample:
    def __init__(self, seconds, rss, cpu, extra=None):
        self.seconds, self.rss, self.cpu, self.extra = seconds, rss, cpu, extra or {}


def measure(pid, fn):
    """Time fn(), with the peak RSS and CPU time of process pid (None: us)."""
    own = pid is None
    pid = os.getpid() if own else pid
    reset_peak(pid)
    c0 = time.process_time() if own else cpu_of(pid)
    t0 = time.perf_counter()
    extra = fn()
    dt = time.perf_counter() - t0
    c1 = time.process_time() if own else cpu_of(pid)
    return Sample(dt, peak_rss(pid), c1 - c0, extra if isinstance(extra, dict) else None)


# ------------------------------------------------------------------ cases

def flight_get(client, q, rows):
    def run():
        t = client.do_get(fl.Ticket(json.dumps(q).encode())).read_all()
        assert t.num_rows == rows, (q, t.num_rows, rows)
    return run


def tiledb_get(root, q, rows):
    def run():
        t = read_tiledb(tiledb_ctx(), root, q)
        assert t.num_rows == rows, (q, t.num_rows, rows)
    return run


def repeated(fn, k):
    def run():
        for _ in range(k):
            fn()
    return run


def concurrent(make_fn, clients, per_client):
    """clients threads, each running its own fn per_client times; returns
    queries/s and the p99 latency."""
    def run():
        lat = []

        def worker(fn):
            out = []
            for _ in range(per_client):
                t = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t)
            return out
        fns = [make_fn() for _ in range(clients)]
        t0 = time.perf_counter()
        with cf.ThreadPoolExecutor(clients) as ex:
            for r in ex.map(worker, fns):
                lat += r
        dt = time.perf_counter() - t0
        lat.sort()
        return {"qps": len(lat) / dt, "p99_ms": 1000 * lat[int(0.99 * (len(lat) - 1))]}
    return run


def flight_put(client, cmd, table, batch_rows=1 << 20):
    def run():
        desc = fl.FlightDescriptor.for_command(json.dumps(cmd).encode())
        w, r = client.do_put(desc, table.schema)
        for b in table.to_batches(max_chunksize=batch_rows):
            w.write_batch(b)
        w.done_writing()
        r.read()
        w.close()
    return run


def fresh_array(root, name, schema):
    uri = os.path.join(root, name)
    shutil.rmtree(uri, ignore_errors=True)
    os.makedirs(os.path.dirname(uri), exist_ok=True)
    tiledb.Array.create(uri, schema)


class Case:
    def __init__(self, key, title, runs, targets, setup=None, metric="seconds"):
        self.key, self.title, self.runs, self.targets = key, title, runs, targets
        self.setup, self.metric = setup, metric  # setup(contender) before each timed call


def build_cases(root, servers, args):
    fd = [n for n in ("flightd", "baseline") if n in servers]
    dense_q = {"columns": ["v"]}
    cases = []

    def reads(q, rows, who):
        runs = {}
        for n in who:
            if n == "tiledb":
                runs[n] = (None, tiledb_get(root, q, rows))
            else:
                runs[n] = (servers[n].pid, flight_get(servers[n].client, q, rows))
        return runs

    all4 = ["tiledb", "pyflight", "memflight"] + fd
    n_dense = DENSE[0] * DENSE[1]
    cases.append(Case("dense_plain", "256 MiB dense f64, no filter, whole DoGet",
                      reads(dict(dense_q, array="bench/dense_plain"), n_dense, all4),
                      {"memflight": 0.8, "tiledb": 1.3}))
    cases.append(Case("dense_zstd", "256 MiB dense f64 zstd 1 (16 MiB tiles), whole DoGet",
                      reads(dict(dense_q, array="bench/dense_zstd"), n_dense, all4),
                      {"memflight": 0.8, "tiledb": 1.5}))
    # The same read by a client that asks for zstd bodies, as the tileflight
    # Python client does by default: flightd sends the tiles as stored.
    # The others serve the plain ticket (memflight and pyflight ignore the
    # key's meaning; a baseline build may not know it).
    zruns = reads(dict(dense_q, array="bench/dense_zstd"), n_dense, ["tiledb", "pyflight", "memflight", "baseline"])
    zruns.update(reads(dict(dense_q, array="bench/dense_zstd", compression="zstd"), n_dense, ["flightd"]))
    cases.append(Case("dense_zstd_ipc", 'same, the client asks for zstd bodies ("compression": "zstd"; others: the plain ticket)',
                      {n: zruns[n] for n in all4}, {"memflight": 0.8, "tiledb": 1.5}))
    sq = {"array": "bench/sparse10m", "columns": ["x", "y", "v"]}
    cases.append(Case("sparse_full", "10 M cell sparse (2 int64 dims, f64, zstd), full scan",
                      reads(sq, SPARSE_X * SPARSE_Y, all4), {"tiledb": 1.2}))
    slab = dict(sq, subarray={"x": [list(SLAB)]})
    cases.append(Case("sparse_slab", "same, a 10 % slab of x",
                      reads(slab, (SLAB[1] - SLAB[0] + 1) * SPARSE_Y, all4), {"tiledb": 1.2}))
    boxq = dict(dense_q, array="bench/box", subarray={"x": [list(BOX[0])], "y": [list(BOX[1])]})
    boxrows = (BOX[0][1] - BOX[0][0] + 1) * (BOX[1][1] - BOX[1][0] + 1)
    k = args.box_repeats
    runs = {n: (pid, repeated(fn, k)) for n, (pid, fn) in reads(boxq, boxrows, all4).items()}
    cases.append(Case("box", f"1 % box of 4096x4096 f64 in 256x256 zstd tiles, {k} queries in a row",
                      runs, {"tiledb": 1.5}))

    def conc(n):
        if n == "tiledb":
            return None, concurrent(lambda: tiledb_get(root, boxq, boxrows), 16, args.conc_queries)
        url = servers[n].url
        return servers[n].pid, concurrent(lambda: flight_get(fl.connect(url), boxq, boxrows), 16, args.conc_queries)
    cases.append(Case("box16", f"that box from 16 clients at once ({16 * args.conc_queries} queries)",
                      {n: conc(n) for n in all4}, {"tiledb": 1.5}, metric="qps"))
    n_big = BIG[0] * BIG[1]
    cases.append(Case("scan_1g", "streamed 1 GiB zstd scan (peak RSS <= 300 MiB)",
                      reads(dict(dense_q, array="bench/dense_1g"), n_big, ["tiledb"] + fd),
                      {"tiledb": 1.0, "rss_mib": 300}))

    # Writes: every contender writes a fresh array of its own.
    dense_in = pa.table({"v": dense_block(0, DENSE[0], DENSE[1]).ravel()})
    dsub = {"x": [[0, DENSE[0] - 1]], "y": [[0, DENSE[1] - 1]]}
    rng = np.random.default_rng(7)
    # Row-major input: TileDB sorts random input several times slower
    # (19 s of CPU for 5 M cells here), which would dominate the run.
    cells = np.sort(rng.choice(SPARSE_X * SPARSE_Y, PUT_SPARSE, replace=False))
    sparse_in = pa.table({"x": cells // SPARSE_Y, "y": cells % SPARSE_Y, "v": rng.standard_normal(PUT_SPARSE)})

    def puts(kind, schema, table, sub):
        runs, setup = {}, {}
        for n in ["tiledb", "pyflight", "memflight"] + fd:
            name = f"put/{kind}_{n}"
            cmd = {"array": name}
            if sub:
                cmd["subarray"] = sub
            setup[n] = (lambda name=name: fresh_array(root, name, schema))
            if n == "tiledb":
                runs[n] = (None, lambda cmd=cmd: write_tiledb(root, cmd, table))
            else:
                runs[n] = (servers[n].pid, flight_put(servers[n].client, cmd, table))
        return runs, setup
    r, s = puts("dense", dense_schema(DENSE, DENSE_TILE, zstd(1)), dense_in, dsub)
    cases.append(Case("put_dense", "DoPut of 256 MiB dense f64 zstd (peak RSS <= 400 MiB)", r,
                      {"tiledb": 1.0, "rss_mib": 400}, setup=s))
    r, s = puts("sparse", sparse_schema(zstd(1)), sparse_in, None)
    cases.append(Case("put_sparse", "DoPut of 5 M sparse cells (f64, zstd 1, row-major input)", r, {"tiledb": 1.0}, setup=s))
    if args.only:
        cases = [c for c in cases if c.key in args.only.split(",")]
    return cases


# ------------------------------------------------------------------ running

def run_all(args):
    root = args.data
    os.makedirs(root, exist_ok=True)
    make_arrays(root)
    here = os.path.abspath(__file__)
    servers = {}
    try:
        servers["pyflight"] = Server("pyflight", [sys.executable, here, "--serve-python", root], r"(grpc://\S+)")
        servers["memflight"] = Server("memflight", [args.memflight, "-data", root], r"(grpc://\S+)")
        fdargs = ["-data", root, "-listen", "127.0.0.1:0", "-log-format", "json", "-log-level", "warn"]
        pat = r'"url":"(grpc://[^"]+)"'
        servers["flightd"] = Server("flightd", [args.flightd] + fdargs[:-2] + ["-log-level", "info"], pat, "stderr")
        if args.baseline:
            servers["baseline"] = Server("baseline", [args.baseline] + fdargs[:-2] + ["-log-level", "info"], pat, "stderr")
        cases = build_cases(root, servers, args)
        results = {c.key: {n: [] for n in c.runs} for c in cases}
        # Warm-up: page cache, memflight's tables, the daemons' caches.
        for c in cases:
            for n, (pid, fn) in c.runs.items():
                if c.setup:
                    c.setup[n]()
                fn()
            print(f"warm: {c.key}", flush=True)
        for r in range(args.rounds):
            t = time.perf_counter()
            for c in cases:
                names = list(c.runs)
                k = r % len(names)
                for n in names[k:] + names[:k]:  # a rotating order
                    pid, fn = c.runs[n]
                    if c.setup:
                        c.setup[n]()
                    results[c.key][n].append(measure(pid, fn))
            print(f"round {r + 1}/{args.rounds}: {time.perf_counter() - t:.1f} s", flush=True)
        return cases, results
    finally:
        for s in servers.values():
            s.stop()


def ratio_of(case, samples, ref, subj):
    """Per-round ratios of ref to subj (> 1: subj is faster)."""
    out = []
    for a, b in zip(samples[ref], samples[subj]):
        if case.metric == "qps":
            out.append(b.extra["qps"] / a.extra["qps"])
        else:
            out.append(a.seconds / b.seconds)
    return out


def report(args, cases, results, elapsed):
    subjects = [n for n in ("flightd", "baseline") if any(n in results[c.key] for c in cases)]
    rows, chart = [], []
    for c in cases:
        s = results[c.key]
        for subj in subjects:
            if subj not in s:
                continue
            # flightd vs baseline is the before/after ratio of one run.
            for ref in ("tiledb", "pyflight", "memflight", "baseline"):
                if ref not in s or ref == subj:
                    continue
                rs = ratio_of(c, s, ref, subj)
                med = statistics.median(rs)
                tgt = c.targets.get(ref)
                rows.append((c, subj, ref, med, min(rs), max(rs), tgt))
                if subj == "flightd" and ref != "baseline":
                    chart.append((f"{c.key}\nvs {ref}", med, tgt))
    head = [
        "# Benchmark results",
        "",
        "Issue 14's table, measured by `make bench` (`benchmarks/bench.py`) in one run: every",
        "case runs each contender once per round in a rotating order; a ratio is the median",
        "over rounds of (the reference's time / flightd's time), so above 1 means flightd is",
        "faster (for the 16-client case: flightd's queries/s over the reference's). flightd",
        "runs with default flags. `baseline` is another flightd build (`--baseline`; this run:",
        f"{args.baseline_label or args.baseline or 'none'}), run in the same rounds. The machine is shared with other",
        "engineers and noisy: compare ratios within this file only, never with another run's seconds.",
        "",
        f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared, load average {os.getloadavg()[0]:.1f} at the end), {args.rounds} rounds, "
        f"{elapsed / 60:.1f} min; Python {platform.python_version()}, tiledb {tiledb.__version__} "
        f"(TileDB {'.'.join(map(str, tiledb.libtiledb.version()))}), pyarrow {pa.__version__}.",
        "",
        "![ratios against targets](results.png)",
        "",
        "## Ratios",
        "",
        "| case | server | vs | median ratio | min - max | target | met |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for c, subj, ref, med, lo, hi, tgt in rows:
        met = "" if tgt is None else ("yes" if med >= tgt else "no")
        head.append(f"| {c.title} | {subj} | {ref} | {med:.2f}x | {lo:.2f} - {hi:.2f} | "
                    f"{'' if tgt is None else f'>= {tgt}x'} | {met} |")
    head += ["", "## Medians per contender (this run only)", "",
             "| case | contender | seconds | peak RSS MiB | CPU s | extra |", "| --- | --- | ---: | ---: | ---: | --- |"]
    for c in cases:
        for n, ss in results[c.key].items():
            ex = ""
            if ss and ss[0].extra:
                ex = ", ".join(f"{k} {statistics.median(x.extra[k] for x in ss):.1f}" for k in ss[0].extra)
            rss = statistics.median(x.rss for x in ss) / MiB
            head.append(f"| {c.key} | {n} | {statistics.median(x.seconds for x in ss):.3f} | {rss:.0f} | "
                        f"{statistics.median(x.cpu for x in ss):.2f} | {ex} |")
            if n == "flightd" and "rss_mib" in c.targets:
                chart.append((f"{c.key}\nRSS budget", c.targets["rss_mib"] / max(rss, 1), 1.0))
    head += ["", "Peak RSS of tiledb in-process is the harness process's own (it holds the inputs of the",
             "writes and the clients' results). `RSS budget` in the chart is the target over flightd's",
             "median peak RSS (>= 1 meets it).", ""]
    text = "\n".join(head)
    print(text)
    if args.out:
        # The other harnesses' sections (make bench-s3, ...) are kept.
        resultsfile.write_section(args.out, "bench", text, first=True)
        plot(chart, os.path.join(os.path.dirname(args.out), "results.png"))


def plot(chart, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(chart)), 5))
    xs = range(len(chart))
    colors = ["tab:green" if t is None or v >= t else "tab:red" for _, v, t in chart]
    ax.bar(xs, [v for _, v, _ in chart], color=colors)
    for x, (_, v, t) in zip(xs, chart):
        if t is not None:
            ax.hlines(t, x - 0.4, x + 0.4, colors="black", linestyles="dashed")
        ax.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="grey", linewidth=0.5)
    ax.set_yscale("log")  # ratios span 0.05x to 20x
    ax.set_xticks(list(xs))
    ax.set_xticklabels([k for k, _, _ in chart], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("flightd speed ratio (median of rounds)")
    ax.set_title("flightd vs references; dashed: target (green met, red not)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flightd", default="bin/flightd")
    ap.add_argument("--memflight", default="bin/memflight")
    ap.add_argument("--baseline", help="another flightd binary, run in the same rounds")
    ap.add_argument("--baseline-label", help="how the results name the baseline (default: its path)")
    ap.add_argument("--data", default=os.path.join(os.path.expanduser("~"), ".cache", "tileflight-bench", "suite"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--box-repeats", type=int, default=20)
    ap.add_argument("--conc-queries", type=int, default=8, help="queries per client in the 16-client case")
    ap.add_argument("--only", help="comma-separated case keys")
    ap.add_argument("--out")
    ap.add_argument("--serve-python", metavar="ROOT")
    args = ap.parse_args()
    if args.serve_python:
        s = PyFlight("grpc://127.0.0.1:0", args.serve_python)
        print(f"ready grpc://127.0.0.1:{s.port}", flush=True)
        s.serve()
        return
    t = time.perf_counter()
    cases, results = run_all(args)
    report(args, cases, results, time.perf_counter() - t)


if __name__ == "__main__":
    main()
