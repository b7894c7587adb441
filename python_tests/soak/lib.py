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
        self.pprof_port = free_port()
        super().__init__(exe, data, args=["-metrics-listen", f"127.0.0.1:{self.metrics_port}",
                                          "-pprof", f"127.0.0.1:{self.pprof_port}", *args], env=env)

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


    def quiet_stats(self, timeout=10):
        """proc_stats once no client holds a connection to the daemon: a
        baseline taken while a just-closed client's connection is still
        being torn down counts that connection's FD and goroutines as the
        daemon's own and hides a later leak of the same size."""
        deadline = time.monotonic() + timeout
        while self._connections() != ["none"] and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.proc_stats()

    def leak_report(self):
        """What a failed goroutine/FD settle check needs to be diagnosed:
        the daemon's goroutines grouped by stack (pprof), and for each of
        its TCP connections the peer address and the process holding the
        other end (found through /proc: socket inodes of every process)."""
        import urllib.request
        parts = []
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.pprof_port}/debug/pprof/goroutine?debug=1",
                                        timeout=10) as r:
                parts.append(r.read().decode(errors="replace"))
        except OSError as e:
            parts.append(f"goroutine dump failed: {e}")
        parts.append("daemon connections: " + "; ".join(self._connections()))
        return "\n".join(parts)

    def _connections(self):
        def inodes(pid):
            out = set()
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    try:
                        t = os.readlink(f"/proc/{pid}/fd/{fd}")
                    except OSError:
                        continue
                    if t.startswith("socket:["):
                        out.add(t[8:-1])
            except OSError:
                pass
            return out

        def addr(h):
            ip, port = h.split(":")
            if len(ip) == 32:  # tcp6: an IPv4-mapped address ends in the IPv4 word
                if ip[:24] != "0000000000000000FFFF0000":
                    return ip + ":" + str(int(port, 16))
                ip = ip[24:]
            return ".".join(str(int(ip[i:i + 2], 16)) for i in (6, 4, 2, 0)) + ":" + str(int(port, 16))

        mine = inodes(self.proc.pid)
        table = {}  # inode -> (local, remote, state)
        for path in ("/proc/net/tcp", "/proc/net/tcp6"):
            if not os.path.exists(path):
                continue
            with open(path) as f:
                next(f)
                for line in f:
                    c = line.split()
                    table[c[9]] = (addr(c[1]), addr(c[2]), c[3])
        by_local = {v[0]: k for k, v in table.items()}
        owners = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            if int(pid) == self.proc.pid:
                continue
            for ino in inodes(pid):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:80]
                except OSError:
                    cmd = "?"
                owners[ino] = f"pid {pid} ({cmd})"
        out = []
        for ino in sorted(mine):
            if ino not in table:
                continue
            local, remote, state = table[ino]
            if state == "0A":  # listening
                continue
            peer = by_local.get(remote)
            out.append(f"{local} <- {remote} state {state} peer {owners.get(peer, 'no local process')}")
        return out or ["none"]


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
