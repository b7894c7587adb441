"""Start the real flightd binary for tests.

Test modules import the fixtures they use from here:

    from flightd_fixture import flightd_bin, flightd, Daemon

`flightd_bin` builds ./cmd/flightd once per session with `go build` into a
temporary directory (or uses $TILEFLIGHT_FLIGHTD when set). `flightd` is a
session-wide daemon on a free port with a temporary data directory; its
`.data` is where tests create arrays with the tiledb package and its
`.client()` is a pyarrow Flight client. `Daemon` starts extra daemons (auth,
demo data) and stops them with SIGTERM, checking that they exit 0;
`running(exe, data, *flags)` does the same as a context manager.
"""

import contextlib
import json
import re
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pyarrow as pa
import pyarrow.flight as fl
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def build_flightd(outdir):
    """Build the daemon into outdir and return the binary's path."""
    exe = os.path.join(outdir, "flightd")
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-mod=mod")
    subprocess.run(["go", "build", "-o", exe, "./cmd/flightd"], cwd=REPO, env=env, check=True)
    return exe


class Daemon:
    """One flightd process serving data_dir on a free loopback port."""

    def __init__(self, exe, data_dir, args=(), env=None, ready_timeout=60):
        self.exe = exe
        self.data = str(data_dir)
        self.log_lines = []
        self._ready = threading.Event()
        self.url = None
        full_env = dict(os.environ)
        full_env.pop("TILEFLIGHT_TOKENS", None)
        if env:
            full_env.update(env)
        cmd = [exe, "-data", self.data, "-listen", "127.0.0.1:0", "-log-format", "json", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=full_env, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        if not self._ready.wait(ready_timeout) or self.url is None:
            self.stop(check=False)
            raise RuntimeError("flightd did not log its grpc:// line:\n" + "\n".join(self.log_lines[-50:]))

    def _read_log(self):
        for line in self.proc.stderr:
            line = line.rstrip("\n")
            self.log_lines.append(line)
            if self.url is None and ("grpc://" in line or "grpc+tls://" in line):
                # Other records may name a grpc:// URL too (a cluster's
                # peers); the ready record is the one with a "url" key.
                try:
                    self.url = json.loads(line).get("url")
                except ValueError:
                    i = line.index("grpc")
                    self.url = line[i:].split()[0]
                if self.url is not None:
                    self._ready.set()
        self._ready.set()

    def records(self):
        """The JSON log records logged so far."""
        out = []
        for line in list(self.log_lines):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def client(self, **kw):
        import pyarrow.flight as fl
        return fl.connect(self.url, **kw)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, check=True, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                if check:
                    raise AssertionError("flightd did not stop on SIGTERM within %ds" % timeout)
        self._reader.join(5)
        if check and self.proc.returncode != 0:
            raise AssertionError("flightd exited %d:\n%s" % (self.proc.returncode, "\n".join(self.log_lines[-50:])))
        return self.proc.returncode


@contextlib.contextmanager
def running(exe, data_dir, *flags, env=None, check=True):
    """A Daemon started with extra command-line flags (e.g. "-tls-cert",
    path), stopped on exit; check=True also wants exit status 0."""
    d = Daemon(exe, data_dir, args=list(flags), env=env)
    try:
        yield d
    finally:
        d.stop(check=check)


@pytest.fixture(scope="session")
def flightd_bin():
    exe = os.environ.get("TILEFLIGHT_FLIGHTD")
    if exe:
        yield exe
        return
    d = tempfile.mkdtemp(prefix="flightd-bin-")
    try:
        yield build_flightd(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def flightd(flightd_bin, tmp_path_factory):
    data = tmp_path_factory.mktemp("flightd-data")
    d = Daemon(flightd_bin, data, args=["-memory-budget", str(256 << 20)])
    try:
        yield d
    finally:
        d.stop()


# ---- helpers shared by the Flight test modules ----
import re

import pyarrow as pa
import pyarrow.flight as fl

_CODE_RE = re.compile(r"gRPC client debug context: ([A-Z_]+):")
_RETURNED = {
    "invalid argument": "INVALID_ARGUMENT", "not found": "NOT_FOUND", "already exists": "ALREADY_EXISTS",
    "unauthenticated": "UNAUTHENTICATED", "unauthorized": "PERMISSION_DENIED", "unimplemented": "UNIMPLEMENTED",
    "internal": "INTERNAL", "data loss": "DATA_LOSS", "resource exhausted": "RESOURCE_EXHAUSTED",
    "cancelled": "CANCELLED",
    # Codes Arrow's Flight client has no status of its own for: it words
    # them "gRPC returned ... error" (DoAction carries no debug context, so
    # this wording is all an action's error has).
    "precondition failed": "FAILED_PRECONDITION", "aborted": "ABORTED", "out-of-range": "OUT_OF_RANGE",
    "timeout": "DEADLINE_EXCEEDED", "unavailable": "UNAVAILABLE",
}


def grpc_code(exc):
    """The gRPC status code name a pyarrow Flight error carries."""
    m = _CODE_RE.search(str(exc))
    if m:
        return m.group(1)
    m = re.search(r"(?:Flight|gRPC) returned (.+?) error", str(exc))
    if m and m.group(1) in _RETURNED:
        return _RETURNED[m.group(1)]
    if isinstance(exc, fl.FlightUnauthenticatedError):
        return "UNAUTHENTICATED"
    if isinstance(exc, fl.FlightUnauthorizedError):
        return "PERMISSION_DENIED"
    return type(exc).__name__


def ticket(**q):
    return fl.Ticket(json.dumps(q).encode())


def read(client, options=None, **q):
    return client.do_get(ticket(**q), options=options).read_all()


def read_ticket(client, t, options=None):
    return client.do_get(t, options=options).read_all()


def action(client, name, body=None, options=None):
    raw = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    results = list(client.do_action(fl.Action(name, raw), options=options))
    assert len(results) == 1, results
    return json.loads(results[0].body.to_pybytes())


def cmd(**q):
    return fl.FlightDescriptor.for_command(json.dumps(q).encode())


def put(client, descriptor, table, options=None, chunk=None):
    """DoPut a table; returns the PutResult's app_metadata as JSON."""
    if isinstance(descriptor, str):
        descriptor = fl.FlightDescriptor.for_path(descriptor)
    writer, reader = client.do_put(descriptor, table.schema, options=options)
    try:
        if chunk:
            for b in table.to_batches(max_chunksize=chunk):
                writer.write_batch(b)
        else:
            writer.write_table(table)
        writer.done_writing()
        buf = reader.read()
    finally:
        writer.close()
    assert buf is not None, "DoPut answered no PutResult"
    return json.loads(buf.to_pybytes())


def sort_table(t, keys):
    return t.sort_by([(k, "ascending") for k in keys])


def as_pylist(t):
    return {name: t.column(name).to_pylist() for name in t.column_names}


def expect_code(code, fn, *args, **kw):
    """Call fn and assert it fails with the gRPC status code name."""
    try:
        fn(*args, **kw)
    except (pa.ArrowException, fl.FlightError, KeyError, ValueError, NotImplementedError, OSError) as e:
        got = grpc_code(e)
        assert got == code, f"want {code}, got {got}: {e}"
        return str(e)
    raise AssertionError(f"want {code}, the call succeeded")
