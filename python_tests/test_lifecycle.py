"""The array lifecycle of DESIGN.md §5 through the real daemon, judged by
TileDB 2.30: staged writes (DoPut "stage": true, commit_fragments,
abort_fragments)."""

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest
import tiledb

from flightd_fixture import (Daemon, action, cmd, expect_code, flightd, flightd_bin, put,  # noqa: F401
                             read)


@pytest.fixture(scope="module")
def small(flightd_bin, tmp_path_factory):
    """A daemon that cuts a fragment every ~20 kB, so that one DoPut makes several."""
    d = Daemon(flightd_bin, tmp_path_factory.mktemp("lifecycle"), args=["-max-fragment-bytes", "20000"])
    try:
        yield d
    finally:
        d.stop()


def create_kv(c, name, dups=False):
    action(c, "create_array", {"array": name, "type": "sparse", "capacity": 500, "allows_duplicates": dups,
                               "dimensions": [{"name": "k", "type": "int64", "domain": [0, 1 << 40], "tile": 1000}],
                               "attributes": [{"name": "v", "type": "float64"}]})


def kv(lo, n, scale=0.5):
    ks = np.arange(lo, lo + n, dtype=np.int64)
    return pa.table({"k": ks, "v": ks * scale})


def tiledb_rows(path, **kw):
    with tiledb.open(path, **kw) as A:
        r = A.query()[:]
    return dict(zip(r["k"].tolist(), r["v"].tolist()))


def committed_commits(path):
    d = os.path.join(path, "__commits")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_staged_invisible_until_committed_then_at_once(small):
    c = small.client()
    name = "life/staged"
    create_kv(c, name)
    uri = os.path.join(small.data, name)
    put(c, name, kv(0, 100))  # an ordinary committed write first
    r1 = put(c, cmd(array=name, stage=True, timestamp=5_000), kv(1000, 3000), chunk=500)
    r2 = put(c, cmd(array=name, stage=True, timestamp=5_001), kv(5000, 2000), chunk=500)
    assert r1["staged"] and r2["staged"] and r1["rows"] == 3000
    assert len(r1["fragments"]) > 1, r1  # several fragments per DoPut
    frags = r1["fragments"] + r2["fragments"]
    on_disk = set(os.listdir(os.path.join(uri, "__fragments")))
    assert set(frags) <= on_disk
    # Invisible to TileDB and to us.
    assert len(tiledb_rows(uri)) == 100
    assert read(c, array=name).num_rows == 100
    assert len(action(c, "list_fragments", {"array": name})) == 1
    with tiledb.open(uri) as A:
        assert len(tiledb.array_fragments(uri)) == 1

    res = action(c, "commit_fragments", {"array": name, "fragments": frags})
    assert res["committed"] == frags and res["commit"].endswith(".con")
    got = tiledb_rows(uri)
    want = {k: k * 0.5 for k in list(range(100)) + list(range(1000, 4000)) + list(range(5000, 7000))}
    assert got == want
    assert read(c, array=name).num_rows == len(want)
    assert len(tiledb.array_fragments(uri)) == 1 + len(frags)

    # A retry (lost reply) succeeds and writes nothing.
    before = committed_commits(uri)
    again = action(c, "commit_fragments", {"array": name, "fragments": frags})
    assert again["commit"] == "" and committed_commits(uri) == before


def test_abort_and_errors(small):
    c = small.client()
    name = "life/abort"
    create_kv(c, name)
    uri = os.path.join(small.data, name)
    done = put(c, name, kv(0, 10))["fragments"]
    st = put(c, cmd(array=name, stage=True), kv(100, 1000), chunk=250)["fragments"]
    expect_code("FAILED_PRECONDITION", action, c, "commit_fragments", {"array": name, "fragments": st + done})
    expect_code("FAILED_PRECONDITION", action, c, "abort_fragments", {"array": name, "fragments": st + done})
    expect_code("NOT_FOUND", action, c, "commit_fragments",
                {"array": name, "fragments": ["__1_1_0123456789abcdef0123456789abcdef_22"]})
    expect_code("INVALID_ARGUMENT", action, c, "commit_fragments", {"array": name, "fragments": ["../../etc"]})
    expect_code("INVALID_ARGUMENT", action, c, "commit_fragments", {"array": name, "fragments": []})
    expect_code("INVALID_ARGUMENT", action, c, "commit_fragments", {"array": name, "fragment": st})
    expect_code("NOT_FOUND", action, c, "commit_fragments", {"array": "life/none", "fragments": st})
    expect_code("INVALID_ARGUMENT", read, c, array=name, stage=True)
    # Nothing changed by the refusals.
    assert set(st) <= set(os.listdir(os.path.join(uri, "__fragments")))
    assert len(tiledb_rows(uri)) == 10

    res = action(c, "abort_fragments", {"array": name, "fragments": st})
    assert res["aborted"] == st
    assert not set(st) & set(os.listdir(os.path.join(uri, "__fragments")))
    assert action(c, "abort_fragments", {"array": name, "fragments": st})["aborted"] == st  # idempotent
    expect_code("NOT_FOUND", action, c, "commit_fragments", {"array": name, "fragments": st})
    assert len(tiledb_rows(uri)) == 10


def test_staged_dense(small):
    c = small.client()
    name = "life/dense"
    action(c, "create_array", {"array": name, "type": "dense",
                               "dimensions": [{"name": "x", "type": "int32", "domain": [0, 99], "tile": 10},
                                              {"name": "y", "type": "int32", "domain": [0, 99], "tile": 10}],
                               "attributes": [{"name": "a", "type": "int64"}]})
    uri = os.path.join(small.data, name)
    vals = np.arange(50 * 100, dtype=np.int64)
    r = put(c, cmd(array=name, stage=True, subarray={"x": [[0, 49]], "y": [[0, 99]]}), pa.table({"a": vals}), chunk=1000)
    assert len(r["fragments"]) > 1
    assert len(tiledb.array_fragments(uri)) == 0
    action(c, "commit_fragments", {"array": name, "fragments": r["fragments"]})
    with tiledb.open(uri) as A:
        assert np.array_equal(A[0:50, 0:100]["a"].ravel(), vals)


def test_list_actions_describes_lifecycle(small):
    kinds = {a.type: a.description for a in small.client().list_actions()}
    for k in ["commit_fragments", "abort_fragments"]:
        assert "Body:" in kinds.get(k, ""), k
