"""The daemon as an operator meets it: version, sizes with units in the
environment, console logs without colours off a terminal, an access log
naming peer and token, metrics and health."""

import json
import os
import subprocess
import time
import urllib.request

import pyarrow.flight as fl

from flightd_fixture import Daemon, flightd_bin  # noqa: F401 (fixture)
from soak.lib import free_port


def test_version_and_bad_flags(flightd_bin):  # noqa: F811
    for args in (["version"], ["-version"]):
        r = subprocess.run([flightd_bin, *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stdout.startswith("flightd ") and "commit" in r.stdout, (args, r)
    r = subprocess.run([flightd_bin, "-no-such-flag"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and r.stderr.count("no-such-flag") == 1, r.stderr


def test_sizes_in_environment_and_plain_console_logs(flightd_bin, tmp_path):  # noqa: F811
    env = dict(os.environ, TILEFLIGHT_MEMORY_BUDGET="1GiB", TILEFLIGHT_MAX_PUT_BYTES="64 MiB")
    env.pop("NO_COLOR", None)
    p = subprocess.Popen([flightd_bin, "-data", str(tmp_path), "-listen", "127.0.0.1:0"],
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stderr.readline()
        assert "grpc://" in line, line
        assert "\x1b[" not in line, repr(line)   # stderr is a pipe: no ANSI colours
    finally:
        p.terminate()
        p.wait(30)
    r = subprocess.run([flightd_bin, "-data", str(tmp_path)], env=dict(env, TILEFLIGHT_MEMORY_BUDGET="lots"),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "TILEFLIGHT_MEMORY_BUDGET" in r.stderr and "512MiB" in r.stderr, r.stderr


def test_access_log_names_peer_and_token_and_metrics_count_calls(flightd_bin, tmp_path):  # noqa: F811
    tokens = tmp_path / "tokens"
    tokens.write_text("s3cret-a rw alice\ns3cret-b ro\n")
    mport = free_port()
    d = Daemon(flightd_bin, tmp_path / "data", args=["-tokens-file", str(tokens), "-metrics-listen", f"127.0.0.1:{mport}"])
    try:
        c = d.client()
        for tok in ("s3cret-a", "s3cret-b"):
            opts = fl.FlightCallOptions(headers=[(b"authorization", f"Bearer {tok}".encode())])
            list(c.do_action(fl.Action("list_arrays", b""), options=opts))
        time.sleep(0.3)
        calls = [r for r in d.records() if r.get("message") == "call" and r.get("method", "").endswith("/DoAction")]
        assert [r.get("token") for r in calls] == ["alice", "sha256:" + __import__("hashlib").sha256(b"s3cret-b").hexdigest()[:12]], calls
        assert all(r.get("peer", "").startswith("127.0.0.1:") for r in calls), calls
        assert not any("s3cret" in line for line in d.log_lines)   # never the secret
        text = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
        assert 'grpc_server_handled_total{grpc_code="OK",grpc_method="DoAction",grpc_service="arrow.flight.protocol.FlightService",grpc_type="server_stream"} 2' in text
    finally:
        d.stop()
