"""An embedded daemon: :func:`local` starts flightd on a free loopback port
over a data directory and returns a :class:`~tileflight.Client` connected
to it.

>>> import tileflight
>>> with tileflight.local(path="./data") as client:   # the daemon stops with the block
...     client.arrays()

Without ``with``, the daemon runs until ``client.close()`` or the end of the
process. The flightd binary is, in order: ``$TILEFLIGHT_FLIGHTD``, the one
``pip install "tileflight[server]"`` brings (the ``tileflight-server``
wheel), or ``flightd`` on ``PATH``.
"""

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, List, Optional, Sequence

from .client import Client

__all__ = ["local", "LocalClient", "flightd_binary"]


def flightd_binary() -> str:
    """The flightd executable :func:`local` runs (see the module docstring).

    FileNotFoundError, saying how to get one, when there is none.
    """
    env = os.environ.get("TILEFLIGHT_FLIGHTD")
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(f"TILEFLIGHT_FLIGHTD={env}: no such file")
        return env
    try:
        import tileflight_server  # type: ignore[import-not-found]
    except ImportError:
        pass
    else:
        path = tileflight_server.binary()
        if os.path.isfile(path):
            return path
    found = shutil.which("flightd")
    if found:
        return found
    raise FileNotFoundError('no flightd: pip install "tileflight[server]" (the daemon for this platform), '
                            "put flightd on PATH, or set TILEFLIGHT_FLIGHTD to its path")


class LocalClient(Client):
    """A :class:`~tileflight.Client` that owns the flightd it talks to:
    ``close()`` (or the end of a ``with`` block) stops the daemon too.

    Attributes: ``process`` (the daemon's ``subprocess.Popen``), ``data``
    (its data directory), ``log_path`` (its JSON log).
    """

    process: "subprocess.Popen[bytes]"
    data: str
    log_path: str

    def close(self) -> None:
        super().close()
        _stop(self.process)


def _stop(proc: "subprocess.Popen[bytes]", timeout: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()  # SIGTERM: flightd drains its streams and exits
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _ready_url(log_path: str, proc: "subprocess.Popen[bytes]", timeout: float) -> str:
    """The URL in flightd's "ready" log line, waiting for it."""
    deadline = time.monotonic() + timeout
    while True:
        with open(log_path, "rb") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and str(rec.get("message", "")).startswith("flightd ready on") and rec.get("url"):
                    return str(rec["url"])
        if proc.poll() is not None:
            with open(log_path, "rb") as f:
                tail = f.read()[-2000:].decode(errors="replace")
            raise RuntimeError(f"flightd exited with status {proc.returncode} before serving:\n{tail}")
        if time.monotonic() > deadline:
            _stop(proc)
            raise TimeoutError(f"flightd did not report ready within {timeout:g}s (log: {log_path})")
        time.sleep(0.05)


def local(path: str = "./data", *, args: Sequence[str] = (), binary: Optional[str] = None,
          timeout: float = 30.0, **client_kwargs: Any) -> LocalClient:
    """Start flightd serving ``path`` on a free loopback port and return a
    client connected to it.

    Args:
        path: the data directory (created if missing), or ``s3://bucket/prefix``.
        args: more flightd flags (``["-demo"]``, ``["-memory-budget", "1GiB"]``).
        binary: the flightd to run (default :func:`flightd_binary`).
        timeout: seconds to wait for the daemon to serve.
        **client_kwargs: passed to :class:`~tileflight.Client`.

    The daemon listens on 127.0.0.1 only, without tokens or TLS, and stops
    when the client is closed, its ``with`` block ends, or the process exits.
    """
    exe = binary or flightd_binary()
    data = path if "://" in path else os.path.abspath(path)
    fd, log_path = tempfile.mkstemp(prefix="flightd-", suffix=".log")
    cmd: List[str] = [exe, "-data", data, "-listen", "127.0.0.1:0", "-log-format", "json", *args]
    with os.fdopen(fd, "wb") as log:
        # The daemon's settings are the ones given here, not an operator's
        # TILEFLIGHT_* environment meant for another daemon.
        env = {k: v for k, v in os.environ.items() if not k.startswith("TILEFLIGHT_")}
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    atexit.register(_stop, proc)
    url = _ready_url(log_path, proc, timeout)
    client = LocalClient.__new__(LocalClient)
    try:
        Client.__init__(client, url, **client_kwargs)
    except BaseException:
        _stop(proc)
        raise
    client.process, client.data, client.log_path = proc, data, log_path
    return client
