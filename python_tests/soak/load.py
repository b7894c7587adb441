"""Load campaign: many clients mixing small reads and writes on one array.
Every acknowledged DoPut must be visible (the final row count, through
flightd and through TileDB, equals the acknowledged rows: no lost and no
phantom writes), latencies are reported, and after the load the daemon's
goroutines and open files are back where they were, and its RSS does not
grow once the load has ended. Between rounds the RSS and the Go heap after a
forced collection are reported, not judged: the array gains hundreds of
fragments per round, whose decoded metadata the daemon caches (bounded by
entries), so later rounds legitimately hold more."""

import os
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import tiledb

from .lib import Served, get, grpc_code, percentile, put, rng

WRITE_SHARE = 0.3


def _create(data):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 1 << 50), tile=1 << 30, dtype=np.int64))
    tiledb.Array.create(os.path.join(data, "load"), tiledb.ArraySchema(
        domain=dom, sparse=True, capacity=1000,
        attrs=[tiledb.Attr("client", dtype=np.int32), tiledb.Attr("v", dtype=np.float64)]))


def _client_loop(d, rnd, cid, seed, stop_at, st):
    r = rng(seed)
    c = d.client()
    seq = 0
    opts = fl.FlightCallOptions(timeout=60)
    while time.monotonic() < stop_at:
        t0 = time.monotonic()
        if r.random() < WRITE_SHARE:
            n = r.randint(1, 100)
            base = (rnd << 44) + (cid << 36) + (seq << 12)  # unique per round, client, put
            seq += 1
            tbl = pa.table({"x": np.arange(base, base + n, dtype=np.int64),
                            "client": np.full(n, cid, np.int32), "v": np.full(n, float(seq))})
            try:
                res = put(c, "load", tbl, options=opts)
                assert res["rows"] == n, res
                st["write_lat"].append(time.monotonic() - t0)
                st["acked_puts"] += 1
                st["acked_rows"] += n
            except Exception as e:  # noqa: BLE001
                st["errors"].append(f"put: {grpc_code(e)}: {str(e)[:200]}")
        else:
            lo = (rnd << 44) + (r.randrange(32) << 36) + (r.randrange(max(1, seq)) << 12)
            try:
                t = get(c, opts, array="load", subarray={"x": [[lo, lo + 4095]]})
                st["read_lat"].append(time.monotonic() - t0)
                st["reads"] += 1
                st["rows_read"] += t.num_rows
            except Exception as e:  # noqa: BLE001
                st["errors"].append(f"get: {grpc_code(e)}: {str(e)[:200]}")
    c.close()


def _round(d, rnd, clients, seconds, seed):
    stats = [{"write_lat": [], "read_lat": [], "acked_puts": 0, "acked_rows": 0, "reads": 0, "rows_read": 0,
              "errors": []} for _ in range(clients)]
    stop_at = time.monotonic() + seconds
    ths = [threading.Thread(target=_client_loop, args=(d, rnd, i, seed * 1000 + i, stop_at, stats[i])) for i in range(clients)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    agg = {k: sum(s[k] for s in stats) for k in ("acked_puts", "acked_rows", "reads", "rows_read")}
    wl = [x for s in stats for x in s["write_lat"]]
    rl = [x for s in stats for x in s["read_lat"]]
    agg["errors"] = [e for s in stats for e in s["errors"]]
    agg["write_ms"] = {"p50": round(percentile(wl, 50) * 1000, 1), "p99": round(percentile(wl, 99) * 1000, 1)}
    agg["read_ms"] = {"p50": round(percentile(rl, 50) * 1000, 1), "p99": round(percentile(rl, 99) * 1000, 1)}
    agg["ops_per_s"] = round((len(wl) + len(rl)) / seconds, 1)
    return agg


def _settled(d, base, wait=15):
    """Process figures once the goroutines have settled (gRPC closes
    connections asynchronously)."""
    deadline = time.monotonic() + wait
    s = d.proc_stats()
    while time.monotonic() < deadline and \
            (s["goroutines"] > base["goroutines"] + 2 or s["fds"] > base["fds"] + 2):
        time.sleep(0.5)
        s = d.proc_stats()
    return s


def _heap_after_gc(d, pprof):
    """The Go heap in use after a forced collection (pprof's ?gc=1)."""
    import urllib.request
    with urllib.request.urlopen(f"http://{pprof}/debug/pprof/heap?gc=1", timeout=30) as r:
        r.read()
    return int(d.metrics().get("go_memstats_heap_inuse_bytes", -1))


def run(exe, workdir, clients=32, seconds=60, rounds=2, seed=1, quiet=15, log=print):
    data = os.path.join(workdir, "data")
    os.makedirs(data)
    _create(data)
    from .lib import free_port
    pprof = f"127.0.0.1:{free_port()}"
    d = Served(exe, data, args=["-pprof", pprof])
    failures = []
    # Warm up (first connections, caches), then the baseline.
    acked_rows = _round(d, 0, 2, 1, seed)["acked_rows"]
    base = d.quiet_stats()
    out = {"clients": clients, "seconds_per_round": seconds, "baseline": base, "rounds": []}
    for i in range(rounds):
        res = _round(d, i + 1, clients, seconds, seed + i + 1)
        acked_rows += res["acked_rows"]
        after = _settled(d, base)
        res["after"] = after
        # Once the load has ended nothing may keep growing.
        time.sleep(quiet)
        later = d.proc_stats()
        res["after_quiet"] = later
        res["heap_after_gc"] = _heap_after_gc(d, pprof)
        res["fragments"] = len(os.listdir(os.path.join(data, "load", "__fragments")))
        if later["rss"] > after["rss"] * 1.05 + (16 << 20):
            failures.append(f"round {i}: RSS kept growing after the load: {after['rss'] >> 20} -> {later['rss'] >> 20} MiB in {quiet}s")
        if later["goroutines"] > base["goroutines"] + 2 or later["fds"] > base["fds"] + 2:
            failures.append(f"round {i}: {quiet}s after the load: goroutines {later['goroutines']}, fds {later['fds']} (baseline {base})")
        errs = res.pop("errors")
        res["errors"] = len(errs)
        out["rounds"].append(res)
        for e in errs[:10]:
            failures.append(f"round {i}: {e}")
        if after["goroutines"] > base["goroutines"] + 2:
            failures.append(f"round {i}: goroutines {base['goroutines']} before the load, {after['goroutines']} after")
        if after["fds"] > base["fds"] + 2:
            failures.append(f"round {i}: open files {base['fds']} before the load, {after['fds']} after")
        log(f"load round {i}: {res}")
    fl_rows = get(d.client(), array="load", columns=["x"]).num_rows
    with tiledb.open(os.path.join(data, "load")) as A:
        td_rows = len(A.query(attrs=["client"], dims=[])[:]["client"])
    out.update(acked_rows=acked_rows, flightd_rows=fl_rows, tiledb_rows=td_rows,
               fragments=len(os.listdir(os.path.join(data, "load", "__fragments"))))
    if fl_rows != acked_rows or td_rows != acked_rows:
        failures.append(f"acknowledged {acked_rows} rows; flightd sees {fl_rows}, TileDB {td_rows}")
    m = d.metrics()
    out["metrics"] = {k: v for k, v in m.items() if k.startswith(("tileflight_doput", "tileflight_metadata_cache"))}
    d.stop()
    out["failures"] = failures
    return out
