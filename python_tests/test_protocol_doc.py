"""Runs every example of docs/protocol.md against a live daemon.

Each fenced code block in the document is preceded by a marker comment:

    <!-- doc-test: python -->          run in one shared namespace, in order
    <!-- doc-test: python tokens -->   run alone against a daemon with tokens
    <!-- doc-test: query -->           a query JSON: DoGet it as a ticket
    <!-- doc-test: schema -->          a schema JSON: create_array it, describe it back
    <!-- doc-test: shell -->           run with bash, `flightd` being the binary
    <!-- doc-test: shell metrics -->   the same, against a daemon serving metrics
    <!-- doc-test: skip (why) -->      not runnable, and why

A block without a marker fails the test, so every new example is either run
or says why it cannot be. Addresses in the examples (127.0.0.1:8815 for
Flight, 127.0.0.1:9090 for metrics) are replaced by the live daemon's."""

import json
import os
import re
import subprocess

import pyarrow.flight as fl
import pytest

from flightd_fixture import REPO, Daemon, flightd_bin  # noqa: F401 (fixture)

DOC = os.path.join(REPO, "docs", "protocol.md")
MARK = re.compile(r"^<!-- doc-test: (\w+)(?: ([^>]*?))? -->$")


def blocks():
    """[(line, kind, arg, lang, code)] for every fenced block, in order."""
    lines = open(DOC, encoding="utf-8").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mk = MARK.match(lines[k].strip()) if k >= 0 else None
        kind, arg = (mk.group(1), mk.group(2) or "") if mk else (None, "")
        out.append((i + 1, kind, arg, m.group(1), "\n".join(lines[i + 1:j])))
        i = j + 1
    return out


def test_every_block_is_marked():
    bad = [f"docs/protocol.md:{ln}" for ln, kind, *_ in blocks()
           if kind not in ("python", "query", "schema", "shell", "skip")]
    assert not bad, "code blocks without a <!-- doc-test: ... --> marker: " + ", ".join(bad)
    skips = [(ln, arg) for ln, kind, arg, *_ in blocks() if kind == "skip"]
    assert all(arg.startswith("(") for _, arg in skips), f"skip markers must say why: {skips}"


@pytest.fixture(scope="module")
def daemons(flightd_bin, tmp_path_factory):  # noqa: F811
    from soak.lib import free_port
    mport = free_port()
    plain = Daemon(flightd_bin, tmp_path_factory.mktemp("doc-data"),
                   args=["-metrics-listen", f"127.0.0.1:{mport}"])
    tokens = tmp_path_factory.mktemp("doc-tokens") / "tokens"
    tokens.write_text("s3cret rw docs\n")
    auth = Daemon(flightd_bin, tmp_path_factory.mktemp("doc-auth"), args=["-tokens-file", str(tokens)])
    try:
        yield {"plain": plain, "auth": auth, "metrics": f"127.0.0.1:{mport}", "bin": flightd_bin}
    finally:
        plain.stop()
        auth.stop()


def _local(url, code):
    return code.replace("grpc://127.0.0.1:8815", url)


def test_examples_run(daemons, tmp_path):
    plain, auth = daemons["plain"], daemons["auth"]
    ns = {}
    ran = {}
    for ln, kind, arg, lang, code in blocks():
        where = f"docs/protocol.md:{ln}"
        if kind == "python" and arg == "tokens":
            exec(compile(_local(auth.url, code), where, "exec"), {})
        elif kind == "python":
            exec(compile(_local(plain.url, code), where, "exec"), ns)
        elif kind == "query":
            q = json.loads(code)
            client = fl.connect(plain.url)
            t = client.do_get(fl.Ticket(json.dumps(q).encode())).read_all()
            assert t.column_names == q["columns"], where
            assert t.num_rows >= 1, where
        elif kind == "schema":
            sch = json.loads(code)
            client = fl.connect(plain.url)
            [r] = client.do_action(fl.Action("create_array", json.dumps(sch).encode()))
            [d] = client.do_action(fl.Action("describe", json.dumps({"array": sch["array"]}).encode()))
            got = json.loads(d.body.to_pybytes())
            if sch["type"] == "b2nd":
                assert got["shape"] == sch["shape"], (where, got)
                ran["schema"] = ran.get("schema", 0) + 1
                continue
            for key in ("type", "cell_order", "tile_order", "capacity", "allows_duplicates"):
                assert got[key] == sch[key], (where, key, got[key])
            assert [x["name"] for x in got["dimensions"]] == [x["name"] for x in sch["dimensions"]]
            names = lambda fs: [f["name"] for f in fs]  # noqa: E731 (describe fills in default levels)
            assert names(got["attributes"][0]["filters"]) == names(sch["attributes"][0]["filters"]), where
            assert got["dimensions"][0]["filters"] == sch["dimensions"][0]["filters"], where
        elif kind == "shell":
            bindir = tmp_path / "bin"
            bindir.mkdir(exist_ok=True)
            link = bindir / "flightd"
            if not link.exists():
                link.symlink_to(os.path.abspath(daemons["bin"]))
            script = code.replace("127.0.0.1:9090", daemons["metrics"]).replace("127.0.0.1:8815", plain.url.split("//")[1])
            env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
            r = subprocess.run(["bash", "-eu", "-c", script], env=env, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, f"{where}: {r.stderr}"
            assert r.stdout.strip(), f"{where}: no output"
            if arg == "metrics":
                assert "tileflight_" in r.stdout and "grpc_server_handled_total" in r.stdout, r.stdout
            else:
                assert r.stdout.startswith("flightd "), r.stdout
        else:
            continue
        ran[kind] = ran.get(kind, 0) + 1
    assert ran.get("python", 0) >= 4 and ran.get("query") and ran.get("schema") and ran.get("shell", 0) >= 2, ran
