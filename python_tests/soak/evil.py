"""Slow and hostile clients: DoGets that are never read, hundreds of idle
connections (gRPC clients and raw sockets that never speak HTTP/2),
clients killed mid-DoGet and mid-DoPut, calls with short deadlines, and
the server's idle-connection limit. The daemon must stay responsive, hold
bounded memory, release every stream slot, goroutine and file, and make
none of an interrupted DoPut's rows visible."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import tiledb

from .lib import Served, get, grpc_code, put, rng

BIG_CELLS = 8 << 20  # dense cells of the big array: 8 Mi x (int64 + float64) = 128 MiB decoded
BUDGET = 16 << 20


def _create(data):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, BIG_CELLS - 1), tile=1 << 16, dtype=np.int64))
    uri = os.path.join(data, "big")
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("a", dtype=np.int64, filters=tiledb.FilterList([tiledb.LZ4Filter()])),
        tiledb.Attr("b", dtype=np.float64, filters=tiledb.FilterList([tiledb.LZ4Filter()]))]))
    with tiledb.open(uri, "w") as A:
        A[:] = {"a": np.arange(BIG_CELLS, dtype=np.int64), "b": np.arange(BIG_CELLS, dtype=np.float64)}
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 1 << 40), tile=1 << 20, dtype=np.int64))
    tiledb.Array.create(os.path.join(data, "w"), tiledb.ArraySchema(
        domain=dom, sparse=True, attrs=[tiledb.Attr("v", dtype=np.float64)]))


def _wait(pred, timeout=20, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def _running(d):
    return d.metrics().get("tileflight_streams_running", -1)


def _settle(d, base, timeout=60):
    ok = _wait(lambda: (lambda s: s["goroutines"] <= base["goroutines"] + 2 and s["fds"] <= base["fds"] + 2)(d.proc_stats()),
               timeout)
    return ok, d.proc_stats()


def _calls(d, method):
    """The daemon's access-log records of one Flight method."""
    return [r for r in d.records() if r.get("message") == "call" and r.get("method", "").endswith("/" + method)]


def _responsive(d):
    """A small read answers within 5 s; returns its latency."""
    c = d.client()
    t0 = time.monotonic()
    t = get(c, fl.FlightCallOptions(timeout=5), array="big", subarray={"x": [[0, 999]]})
    c.close()
    assert t.num_rows == 1000
    return time.monotonic() - t0


CLIENT_GET = """
import json, sys, pyarrow.flight as fl
c = fl.connect(sys.argv[1])
r = c.do_get(fl.Ticket(json.dumps({"array": "big"}).encode()))
r.read_chunk()
print("reading", flush=True)
sys.stdin.read()
"""

CLIENT_PUT = """
import json, sys, numpy as np, pyarrow as pa, pyarrow.flight as fl
c = fl.connect(sys.argv[1])
base = int(sys.argv[2])
sch = pa.schema([("x", pa.int64()), ("v", pa.float64())])
w, _ = c.do_put(fl.FlightDescriptor.for_path("w"), sch)
i = 0
while True:
    x = np.arange(base + i * 1000, base + i * 1000 + 1000, dtype=np.int64)
    w.write_table(pa.table({"x": x, "v": x.astype(np.float64)}))
    i += 1
    if i == 20:
        print("writing", flush=True)
"""


def _spawn(code, *args):
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    return p, line.strip()


def run(exe, workdir, idle_conns=300, never_read=16, seed=1, log=print):
    r = rng(seed)
    data = os.path.join(workdir, "data")
    os.makedirs(data)
    _create(data)
    failures = []
    out = {}
    d = Served(exe, data, args=["-memory-budget", str(BUDGET), "-max-queries", "64", "-shutdown-timeout", "10s"])
    _responsive(d)
    base = d.quiet_stats()
    out["baseline"] = base

    # 1. DoGets that are never read (beyond the first batch).
    readers = []
    clients = []
    for _ in range(never_read):
        c = d.client()
        rd = c.do_get(fl.Ticket(json.dumps({"array": "big"}).encode()))
        rd.read_chunk()
        readers.append(rd)
        clients.append(c)
    time.sleep(3)
    st = d.proc_stats()
    grown = st["rss"] - base["rss"]
    # Each stream holds at most its memory budget of decoded tiles, one
    # batch being sent and gRPC's buffers; Go's collector lets the heap
    # reach twice what is live (GOGC=100), hence 2x.
    bound = never_read * 2 * (BUDGET + (4 << 20)) + (64 << 20)
    out["never_read"] = {"streams": never_read, "result_bytes_each": BIG_CELLS * 16, "rss_growth": grown,
                         "bound": bound, "running": _running(d), "responsive_s": round(_responsive(d), 3)}
    if grown > bound:
        failures.append(f"{never_read} unread DoGets grew RSS by {grown >> 20} MiB (bound {bound >> 20} MiB)")
    for rd in readers:
        rd.cancel()
    for c in clients:
        c.close()
    # A reader keeps its call, and the call its connection, open after its
    # client's close(): drop every reference, the loop variable's too.
    readers.clear()
    del rd
    ok = _wait(lambda: _running(d) == 0)
    if not ok:
        failures.append(f"unread DoGets: {_running(d)} streams still running after their clients closed")

    # 2. Idle connections: gRPC clients that made one call, and raw TCP
    # sockets that never send the HTTP/2 preface.
    port = int(d.url.rsplit(":", 1)[1])
    idle = []
    for i in range(idle_conns // 2):
        c = d.client()
        list(c.list_actions())
        idle.append(c)
    socks = []
    for i in range(idle_conns - idle_conns // 2):
        s = socket.create_connection(("127.0.0.1", port))
        socks.append(s)
    time.sleep(1)
    st = d.proc_stats()
    lat = _responsive(d)
    out["idle"] = {"grpc_clients": len(idle), "raw_sockets": len(socks), "fds_with_idle": st["fds"],
                   "goroutines_with_idle": st["goroutines"], "read_latency_s": round(lat, 3)}
    for c in idle:
        c.close()
    for s in socks:
        s.close()
    ok, st = _settle(d, base)
    out["idle"]["fds_after_close"] = st["fds"]
    out["idle"]["goroutines_after_close"] = st["goroutines"]
    if not ok:
        failures.append(f"idle connections closed: fds {base['fds']} -> {st['fds']}, goroutines {base['goroutines']} -> {st['goroutines']}\n"
                        + d.leak_report())

    # 3. Clients killed mid-DoGet and mid-DoPut.
    kills = max(4, never_read // 2)
    aborted0 = d.metrics().get("tileflight_doput_aborted_total", 0)
    for i in range(kills):
        p, line = _spawn(CLIENT_GET, d.url)
        if line != "reading":
            failures.append(f"mid-DoGet client {i}: {line!r}")
        time.sleep(r.uniform(0, 0.3))
        p.kill()
        p.wait()
    put_bases = []
    for i in range(kills):
        b = (i + 1) << 30
        put_bases.append(b)
        p, line = _spawn(CLIENT_PUT, d.url, b)
        if line != "writing":
            failures.append(f"mid-DoPut client {i}: {line!r}")
        time.sleep(r.uniform(0, 0.3))
        p.kill()
        p.wait()
    ok = _wait(lambda: _running(d) == 0)
    aborted = d.metrics().get("tileflight_doput_aborted_total", 0) - aborted0
    # A client of the test's own, closed before the settle check: an open
    # connection holds one FD and three goroutines in the server.
    rc = d.client()
    rows = get(rc, array="w").num_rows
    rc.close()
    frag_dirs = os.listdir(os.path.join(data, "w", "__fragments")) if os.path.isdir(os.path.join(data, "w", "__fragments")) else []
    out["hangups"] = {"doget_killed": kills, "doput_killed": kills, "doput_aborted": aborted,
                      "rows_visible": rows, "fragment_dirs_left": len(frag_dirs), "streams_running_after": _running(d)}
    if not ok:
        failures.append(f"hang-ups: {_running(d)} streams still running")
    if rows != 0:
        failures.append(f"killed DoPuts: {rows} rows visible")
    if aborted != kills:
        failures.append(f"killed DoPuts: {aborted} aborted, want {kills}")
    if frag_dirs:
        failures.append(f"killed DoPuts left {len(frag_dirs)} fragment directories")
    ok, st = _settle(d, base)
    if not ok:
        failures.append(f"after hang-ups: fds {base['fds']} -> {st['fds']}, goroutines {base['goroutines']} -> {st['goroutines']}\n"
                        + d.leak_report())

    # 4. Per-call deadlines: the server must end the call when its
    # deadline passes (its access-log duration), whatever the client
    # process takes to notice on a loaded machine.
    def server_duration(method, n_before):
        # No record: the call expired before it reached the handler (the
        # client gave up first, or gRPC refused it on arrival), so the
        # server ran nothing: 0 s.
        _wait(lambda: len(_calls(d, method)) > n_before, 5)
        recs = _calls(d, method)
        if len(recs) <= n_before:
            return 0.0, "never started"
        return recs[-1]["duration"] / 1000, recs[-1]["status"]

    dl = []
    c = d.client()
    for timeout in (0.05, 0.2, 0.5):
        n0 = len(_calls(d, "DoGet"))
        t0 = time.monotonic()
        try:
            # A slow consumer (small batches, a pause after each): the call
            # outlasts its deadline however fast the machine reads "big".
            r = c.do_get(fl.Ticket(json.dumps({"array": "big", "batch_rows": 1024}).encode()),
                         options=fl.FlightCallOptions(timeout=timeout))
            for _ in r:
                time.sleep(0.01)
            code = "OK"
        except Exception as e:  # noqa: BLE001
            code = grpc_code(e)
        el = time.monotonic() - t0
        srv, st = server_duration("DoGet", n0)
        dl.append({"deadline_s": timeout, "code": code, "returned_after_s": round(el, 3), "server_s": round(srv, 3)})
        if code != "DEADLINE_EXCEEDED" or srv > timeout + 1:
            failures.append(f"DoGet with deadline {timeout}s: {code} after {el:.2f}s, the server's call lasted {srv:.2f}s ({st})")
    n0 = len(_calls(d, "DoPut"))
    t0 = time.monotonic()
    try:
        sch = pa.schema([("x", pa.int64()), ("v", pa.float64())])
        w, _ = c.do_put(fl.FlightDescriptor.for_path("w"), sch, options=fl.FlightCallOptions(timeout=0.5))
        for i in range(1000):
            x = np.arange((99 << 30) + i * 100, (99 << 30) + i * 100 + 100, dtype=np.int64)
            w.write_table(pa.table({"x": x, "v": x.astype(np.float64)}))
            time.sleep(0.01)
        w.close()
        code = "OK"
    except Exception as e:  # noqa: BLE001
        code = grpc_code(e)
    el = time.monotonic() - t0
    srv, st = server_duration("DoPut", n0)
    dl.append({"call": "DoPut", "deadline_s": 0.5, "code": code, "returned_after_s": round(el, 3), "server_s": round(srv, 3)})
    if code == "OK" or srv > 0.5 + 1:
        failures.append(f"DoPut with deadline 0.5s: {code} after {el:.2f}s, the server's call lasted {srv:.2f}s ({st})")
    c.close()
    ok = _wait(lambda: _running(d) == 0)
    # A client of the test's own, closed before the settle check: an open
    # connection holds one FD and three goroutines in the server.
    rc = d.client()
    rows = get(rc, array="w").num_rows
    rc.close()
    out["deadlines"] = dl
    if not ok or rows != 0:
        failures.append(f"after deadlines: {_running(d)} streams running, {rows} rows visible")
    t0 = time.monotonic()
    try:
        d.stop()
    except AssertionError as e:
        failures.append(f"SIGTERM after the hostile clients: {e}\n" + "\n".join(d.log_lines[-15:]))
    out["sigterm_stop_s"] = round(time.monotonic() - t0, 2)

    # 5. The server closes idle connections (-idle-timeout).
    d = Served(exe, data, args=["-idle-timeout", "2s"])
    base = d.quiet_stats()
    idle = []
    for i in range(50):
        c = d.client()
        list(c.list_actions())
        idle.append(c)
    st = d.proc_stats()
    ok, after = _settle(d, base, timeout=15)
    out["idle_timeout"] = {"connections": 50, "fds_before": base["fds"], "fds_with_idle": st["fds"],
                           "fds_after_2s_idle_timeout": after["fds"]}
    if not ok:
        failures.append(f"-idle-timeout 2s: fds {base['fds']} -> {st['fds']} -> {after['fds']}")
    # the clients reconnect transparently
    try:
        list(idle[0].list_actions())
    except Exception as e:  # noqa: BLE001
        failures.append(f"a client whose idle connection was closed: {e}")
    for c in idle:
        c.close()
    d.stop()
    out["failures"] = failures
    return out
