"""Helpers shared by the campaigns: daemons, metrics, process figures."""

import json
import os
import random
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

import pyarrow as pa  # noqa: E402
import pyarrow.flight as fl  # noqa: E402

from flightd_fixture import Daemon, build_flightd, grpc_code  # noqa: E402,F401


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def flightd_binary(tmpdir):
    """$TILEFLIGHT_FLIGHTD, or a fresh build into tmpdir."""
    exe = os.environ.get("TILEFLIGHT_FLIGHTD")
    if exe:
        return exe
    return build_flightd(tmpdir)


class Served(Daemon):
    """A Daemon that also serves metrics on a free port."""

    def __init__(self, exe, data, args=(), env=None):
        self.metrics_port = free_port()
        super().__init__(exe, data, args=["-metrics-listen", f"127.0.0.1:{self.metrics_port}", *args], env=env)

    def client(self, **kw):
        # Each client owns its connections (gRPC core otherwise shares them
        # between channels to one target and may keep one open after
        # close()), so that a closed client leaves nothing open in the
        # daemon and the goroutine/FD checks see only the daemon's own.
        opts = list(kw.pop("generic_options", [])) + [("grpc.use_local_subchannel_pool", 1)]
        return super().client(generic_options=opts, **kw)

    def kill9(self):
        self.proc.kill()
        self.proc.wait()
        self._reader.join(5)

    def metrics(self):
        """The scraped metrics: {name{labels}: value}."""
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^(\S+?)(\{.*\})?\s+(\S+)", line)
            if m:
                out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
        return out

    def proc_stats(self):
        """Goroutines (metrics), open FDs and RSS bytes (/proc)."""
        pid = self.proc.pid
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        rss = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
        return {"goroutines": int(self.metrics().get("go_goroutines", -1)), "fds": fds, "rss": rss}


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def action(client, name, body, options=None):
    raw = json.dumps(body).encode()
    res = list(client.do_action(fl.Action(name, raw), options=options))
    return json.loads(res[0].body.to_pybytes()) if res else None


def put(client, array, table, descriptor=None, options=None):
    """DoPut table; returns the PutResult JSON."""
    desc = fl.FlightDescriptor.for_command(json.dumps(descriptor or {"array": array}).encode())
    w, r = client.do_put(desc, table.schema, options=options)
    w.write_table(table)
    w.done_writing()
    buf = r.read()
    w.close()
    return json.loads(buf.to_pybytes()) if buf is not None else None


def get(client, options=None, **q):
    return client.do_get(fl.Ticket(json.dumps(q).encode()), options=options).read_all()


def rng(seed):
    return random.Random(seed)


def summary_line(name, s):
    return f"{name}: " + json.dumps({k: v for k, v in s.items() if k != "failures"}) + f" failures={len(s['failures'])}"
