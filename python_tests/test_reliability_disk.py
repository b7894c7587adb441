"""Storage faults against the real daemon: a full disk (a small tmpfs) is
RESOURCE_EXHAUSTED saying so on every write path while reads go on; kill -9
during DoPut and drop_array leaves hidden staging entries that the next
start removes, losing no committed data (TileDB reads the array); a
fragment footer with one byte changed is DATA_LOSS naming the fragment in
full and subarray reads alike."""

import json
import os
import random
import subprocess
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest
import tiledb

from flightd_fixture import Daemon, action, expect_code, flightd_bin, put, read  # noqa: F401 (fixture)

SCHEMA = {"type": "sparse", "allows_duplicates": True,
          "dimensions": [{"name": "x", "type": "int64", "domain": [0, 10**6], "tile": 1000}],
          "attributes": [{"name": "v", "type": "float64"}]}


def table(n, seed):
    rng = np.random.default_rng(seed)
    return pa.table({"x": pa.array(rng.integers(0, 10**6, n), pa.int64()),
                     "v": pa.array(rng.standard_normal(n))})


def litter(data):
    return sorted(e for e in os.listdir(data) if e.startswith(".tfput-"))


@pytest.fixture
def tmpfs(tmp_path):
    d = tmp_path / "small"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (%s); the Go tests inject ENOSPC instead" % r.stderr.strip())
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def fill(d):
    """Fill the filesystem at d; returns the filler's path."""
    p = os.path.join(d, "filler")
    with open(p, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return p


def test_full_disk_every_write_path(flightd_bin, tmpfs):
    d = Daemon(flightd_bin, tmpfs)
    try:
        c = d.client()
        action(c, "create_array", dict(SCHEMA, array="a"))
        for seed in range(2):
            put(c, "a", table(1000, seed))
        before = read(c, array="a").num_rows
        filler = fill(tmpfs)
        calls = {
            "DoPut": lambda: put(c, "a", table(50000, 9)),
            "create_array": lambda: action(c, "create_array", dict(SCHEMA, array="b")),
            "put_metadata": lambda: action(c, "put_metadata", {"array": "a", "metadata": {"unit": "m" * 100000}}),
            "consolidate": lambda: action(c, "consolidate", {"array": "a", "mode": "fragments"}),
        }
        for name, call in calls.items():
            msg = expect_code("RESOURCE_EXHAUSTED", call)
            assert "storage is full" in msg, (name, msg)
            assert str(tmpfs) not in msg, (name, msg)  # array-relative names only
            # Nothing partial is visible and reads go on.
            assert read(c, array="a").num_rows == before, name
        with tiledb.open(os.path.join(tmpfs, "a")) as A:
            assert len(A.query(attrs=["v"])[:]["v"]) == before
        assert not os.path.exists(os.path.join(tmpfs, "b"))  # no half-made array
        # Space freed: the same writes succeed.
        os.remove(filler)
        put(c, "a", table(1000, 3))
        action(c, "consolidate", {"array": "a", "mode": "fragments"})
        assert read(c, array="a").num_rows == before + 1000
        assert litter(tmpfs) == []
    finally:
        d.stop()


def test_kill9_litter_removed_at_start(flightd_bin, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rnd = random.Random(11)
    committed_rows = None
    saw_litter = 0
    for trial in range(6):
        d = Daemon(flightd_bin, data, args=["-temp-grace", "1s"])
        try:
            assert litter(data) == [], (trial, litter(data))  # the start cleaned the last trial's
            c = d.client()
            names = [e for e in os.listdir(data) if not e.startswith(".")]
            if "a" not in names:
                action(c, "create_array", dict(SCHEMA, array="a"))
            committed_rows = read(c, array="a").num_rows
            # A drop victim, so that drop_array can be killed too.
            action(c, "create_array", dict(SCHEMA, array="victim%d" % trial))
            put(c, "victim%d" % trial, table(20000, trial))

            def work():
                try:
                    if trial % 2:
                        action(d.client(), "drop_array", {"array": "victim%d" % trial})
                    put(d.client(), "a", table(400000, trial), chunk=20000)
                except Exception:
                    pass  # the daemon dies under it

            t = threading.Thread(target=work, daemon=True)
            t.start()
            time.sleep(rnd.uniform(0.05, 0.6))
        finally:
            d.proc.kill()
            d.proc.wait()
            d._reader.join(5)
        t.join(30)
        saw_litter += bool(litter(data))
        time.sleep(1.2)  # past -temp-grace
    d = Daemon(flightd_bin, data, args=["-temp-grace", "1s"])
    try:
        assert litter(data) == []
        rows = read(d.client(), array="a").num_rows
        assert rows >= committed_rows and rows % 400000 == 0, rows
        with tiledb.open(os.path.join(data, "a")) as A:
            assert len(A.query(attrs=["v"])[:]["v"]) == rows
    finally:
        d.stop()
    print("trials that left litter:", saw_litter)


def test_vacuum_removes_litter_of_a_dead_process(flightd_bin, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    d = Daemon(flightd_bin, data, args=["-temp-grace", "1s"])
    try:
        c = d.client()
        action(c, "create_array", dict(SCHEMA, array="a"))
        # What a killed writer left: a staged file of a pid that ran and is gone.
        dead = subprocess.Popen(["true"])
        dead.wait()
        stale = data / (".tfput-%d-00112233" % dead.pid)
        stale.write_bytes(b"x" * 1000)
        old = time.time() - 60
        os.utime(stale, (old, old))
        mine = data / (".tfput-%d-44556677" % d.proc.pid)  # the running daemon's own
        mine.write_bytes(b"y")
        os.utime(mine, (old, old))
        res = action(c, "vacuum", {"array": "a"})
        assert res["temp"]["names"] == [stale.name] and res["temp"]["bytes"] == 1000, res
        assert mine.exists() and not stale.exists()
        mine.unlink()
    finally:
        d.stop()


def test_corrupt_footer_is_data_loss(flightd_bin, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    uri = str(data / "pts")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 999), tile=100, dtype=np.int64),
                        tiledb.Dim("y", domain=(0, 999), tile=100, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=100,
                                                attrs=[tiledb.Attr("v", dtype=np.int64)]))
    xs = np.arange(0, 3000) % 1000
    ys = 100 + np.arange(0, 3000) % 300
    with tiledb.open(uri, "w") as A:
        A[xs, ys] = {"v": np.arange(3000)}
    fdirs = os.listdir(os.path.join(uri, "__fragments"))
    assert len(fdirs) == 1
    meta = os.path.join(uri, "__fragments", fdirs[0], "__fragment_metadata.tdb")
    b = bytearray(open(meta, "rb").read())
    # y's non-empty domain [100, 399]: its lower bound made larger than its
    # upper one, by one byte (100 -> 612).
    pat = np.array([100, 399], np.int64).tobytes()
    i = b.rfind(pat)
    assert i >= 0
    b[i + 1] = 0x02  # 100 -> 612
    open(meta, "wb").write(bytes(b))
    d = Daemon(flightd_bin, data)
    try:
        c = d.client()
        for q in [dict(array="pts"), dict(array="pts", subarray={"x": [[0, 499]]}),
                  dict(array="pts", subarray={"y": [[100, 150]]}, layout="row-major"),
                  dict(array="pts", aggregates={"v": ["sum"]})]:
            msg = expect_code("DATA_LOSS", read, c, **q)
            assert fdirs[0] in msg and "inverted" in msg, (q, msg)
            assert str(data) not in msg, msg
    finally:
        d.stop()
