"""The array lifecycle of docs/protocol.md, "Array lifecycle" through the real daemon, judged by
TileDB 2.30: staged writes (DoPut "stage": true, commit_fragments,
abort_fragments); consolidation and vacuum of every mode, compared file by
file (UUIDs aside) and read by read with TileDB's own on a copy of the same
array; arrays consolidated by one and written by the other; uncommitted
fragments removed after -vacuum-grace; kill -9 of the daemon during
consolidate, vacuum and commit_fragments."""

import json
import os
import random
import re
import shutil
import signal
import threading
import time

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
    for k in ["commit_fragments", "abort_fragments", "consolidate", "vacuum", "delete", "evolve_schema"]:
        assert "Body:" in kinds.get(k, ""), k


# ---- consolidation and vacuum, against TileDB's own ----

def file_tree(uri):
    """Every file under the array, UUIDs masked."""
    out = []
    for r, _, fs in os.walk(uri):
        for f in fs:
            out.append(re.sub(r"[0-9a-f]{32}", "U", os.path.relpath(os.path.join(r, f), uri)))
    return sorted(out)


def make_array(uri, dense, frags=3):
    if dense:
        dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99), tile=10, dtype=np.int64),
                            tiledb.Dim("y", domain=(0, 99), tile=10, dtype=np.int64))
        attrs = [tiledb.Attr("v", dtype=np.float64), tiledb.Attr("s", dtype=str, var=True)]
    else:
        dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 1000), tile=10, dtype=np.int64))
        attrs = [tiledb.Attr("v", dtype=np.float64)]
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=not dense, attrs=attrs))
    for t in range(1, frags + 1):
        with tiledb.open(uri, "w", timestamp=t) as A:
            if dense:
                A[0:20, t * 5:t * 5 + 20] = {"v": np.full((20, 20), t * 1.0),
                                             "s": np.array([f"s{t}"] * 400, dtype=object).reshape(20, 20)}
            else:
                A[[t, t + 1, t + 50]] = {"v": [t * 1.0, t * 2.0, t * 3.0]}
        with tiledb.open(uri, "w", timestamp=t) as A:
            A.meta[f"m{t}"] = t
            A.meta["k"] = t


def tiledb_view(uri, ts=None):
    """What TileDB reads (as a comparable string: dense fill values are NaN)."""
    with tiledb.open(uri, timestamp=ts) as A:
        if A.schema.sparse:
            r = A.query()[:]
            return repr(sorted(zip(r["k"].tolist(), r["v"].tolist())))
        r = A[:]
        return repr((r["v"].tolist(), r["s"].tolist()))


def tiledb_meta(uri):
    with tiledb.open(uri) as A:
        return dict(A.meta.items())


def our_view(c, name, dense):
    """What we read, in the same form as tiledb_view."""
    t = read(c, array=name, subarray={"x": [[0, 99]], "y": [[0, 99]]}) if dense else read(c, array=name)
    if not dense:
        return repr(sorted(zip(t.column("k").to_pylist(), t.column("v").to_pylist())))
    v = np.array(t.column("v").to_pylist(), dtype=np.float64).reshape(100, 100)
    # TileDB's var-sized fill value is one NUL byte; tiledb-py shows it as ''.
    s = np.array([x.rstrip("\x00") for x in t.column("s").to_pylist()], dtype=object).reshape(100, 100)
    return repr((v.tolist(), s.tolist()))


MODES = ["commits", "fragment_meta", "array_meta", "fragments"]


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "sparse"])
@pytest.mark.parametrize("mode", MODES)
def test_consolidate_and_vacuum_match_tiledb(small, dense, mode):
    c = small.client()
    kind = "dense" if dense else "sparse"
    ours, theirs = f"cv/{kind}-{mode}-ours", f"cv/{kind}-{mode}-theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    make_array(a, dense)
    shutil.copytree(a, b)
    before = [tiledb_view(a, t) for t in (1, 2, 3)]
    tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": mode}))
    res = action(c, "consolidate", {"array": ours, "mode": mode})
    assert res["mode"] == mode and res["written"], res
    # The same files as TileDB's consolidation, UUIDs aside.
    assert file_tree(a) == file_tree(b)
    for t in (1, 2, 3):
        assert tiledb_view(a, t) == tiledb_view(b, t) == before[t - 1], t
    assert tiledb_meta(a) == tiledb_meta(b)
    assert our_view(c, ours, dense) == before[2]
    assert [tuple(f["timestamps"]) for f in action(c, "list_fragments", {"array": ours})] == \
        [f.timestamp_range for f in tiledb.array_fragments(b)]
    # TileDB lists the same fragments (by timestamp range) in both.
    ranges = lambda u: [f.timestamp_range for f in tiledb.array_fragments(u)]  # noqa: E731
    assert ranges(a) == ranges(b)

    tiledb.vacuum(b, config=tiledb.Config({"sm.vacuum.mode": mode}))
    vres = action(c, "vacuum", {"array": ours, "mode": mode})
    assert vres["mode"] == mode
    assert file_tree(a) == file_tree(b)
    for t in (1, 2, 3):
        assert tiledb_view(a, t) == tiledb_view(b, t), t
    assert tiledb_view(a) == before[2]
    assert our_view(c, ours, dense) == before[2]
    assert tiledb_meta(a) == tiledb_meta(b)
    assert ranges(a) == ranges(b)
    # A second round of fragments or array_meta finds nothing to do
    # (TileDB rewrites commits and fragment_meta files every time).
    again = action(c, "consolidate", {"array": ours, "mode": mode})
    if mode in ("fragments", "array_meta"):
        assert again["written"] == [], again


def with_future_fragment(uri, dense):
    """make_array's array plus a fragment and metadata stamped a day ahead;
    returns that timestamp."""
    make_array(uri, dense)
    ahead = int(time.time() * 1000) + 86_400_000
    with tiledb.open(uri, "w", timestamp=ahead) as A:
        if dense:
            A[50:60, 50:60] = {"v": np.full((10, 10), 9.0), "s": np.array(["f"] * 100, dtype=object).reshape(10, 10)}
        else:
            A[[500, 501]] = {"v": [9.0, 9.5]}
    with tiledb.open(uri, "w", timestamp=ahead) as A:
        A.meta["future"] = 1
    return ahead


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "sparse"])
@pytest.mark.parametrize("mode", ["fragment_meta", "array_meta", "fragments"])
def test_consolidate_default_window_takes_future_fragments(small, dense, mode):
    """TileDB's default consolidation window ends at UINT64_MAX, not now: a
    fragment (and metadata) stamped a day ahead is consolidated with the
    rest, and the files are TileDB's."""
    c = small.client()
    kind = "dense" if dense else "sparse"
    ours, theirs = f"cvf/{kind}-{mode}-ours", f"cvf/{kind}-{mode}-theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    ahead = with_future_fragment(a, dense)
    shutil.copytree(a, b)
    tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": mode}))
    action(c, "consolidate", {"array": ours, "mode": mode})
    assert file_tree(a) == file_tree(b)
    ranges = lambda u: [f.timestamp_range for f in tiledb.array_fragments(u)]  # noqa: E731
    assert ranges(a) == ranges(b)
    for t in (1, 2, 3, ahead):
        assert tiledb_view(a, t) == tiledb_view(b, t), t
    tiledb.vacuum(b, config=tiledb.Config({"sm.vacuum.mode": mode}))
    action(c, "vacuum", {"array": ours, "mode": mode})
    assert file_tree(a) == file_tree(b)
    assert tiledb_view(a, ahead) == tiledb_view(b, ahead)


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "sparse"])
def test_consolidate_commits_with_a_future_commit(small, dense):
    """TileDB 2.30 cannot consolidate the commits of an array holding a
    commit stamped ahead of the clock ("start timestamp cannot be after
    end timestamp"); ours does, and TileDB reads the result as before at
    every timestamp, also after the vacuum."""
    c = small.client()
    kind = "dense" if dense else "sparse"
    name = f"cvf/{kind}-commits-future"
    a = os.path.join(small.data, name)
    ahead = with_future_fragment(a, dense)
    b = a + "-theirs"
    shutil.copytree(a, b)
    with pytest.raises(tiledb.TileDBError, match="start timestamp cannot be after end timestamp"):
        tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "commits"}))
    stamps = (1, 2, 3, int(time.time() * 1000), ahead)
    before = [tiledb_view(a, t) for t in stamps]
    res = action(c, "consolidate", {"array": name, "mode": "commits"})
    assert res["written"], res
    assert [tiledb_view(a, t) for t in stamps] == before
    action(c, "vacuum", {"array": name, "mode": "commits"})
    assert [tiledb_view(a, t) for t in stamps] == before
    assert our_view(c, name, dense) == before[3]


def test_consolidate_timestamp_window_matches_tiledb(small):
    c = small.client()
    a, b = os.path.join(small.data, "cv/win-ours"), os.path.join(small.data, "cv/win-theirs")
    make_array(a, True, frags=4)
    shutil.copytree(a, b)
    for mode in ["fragments", "array_meta", "commits"]:
        tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": mode,
                                                    "sm.consolidation.timestamp_start": "2",
                                                    "sm.consolidation.timestamp_end": "3"}))
        action(c, "consolidate", {"array": "cv/win-ours", "mode": mode, "timestamp": [2, 3]})
        assert file_tree(a) == file_tree(b), mode
    for t in (1, 2, 3, 4):
        assert tiledb_view(a, t) == tiledb_view(b, t), t
    assert [f.timestamp_range for f in tiledb.array_fragments(a)] == [f.timestamp_range for f in tiledb.array_fragments(b)]
    for mode in ["fragments", "array_meta", "commits"]:
        tiledb.vacuum(b, config=tiledb.Config({"sm.vacuum.mode": mode}))
        action(c, "vacuum", {"array": "cv/win-ours", "mode": mode})
        assert file_tree(a) == file_tree(b), mode
    for t in (1, 2, 3, 4):
        assert tiledb_view(a, t) == tiledb_view(b, t), t
    expect_code("INVALID_ARGUMENT", action, c, "consolidate", {"array": "cv/win-ours", "mode": "everything"})
    expect_code("INVALID_ARGUMENT", action, c, "vacuum", {"array": "cv/win-ours", "timestamp": 3})
    expect_code("NOT_FOUND", action, c, "consolidate", {"array": "cv/none"})


@pytest.mark.parametrize("unit", ["D", "ms"])
def test_dense_datetime_consolidation_matches_tiledb(small, unit):
    """Dense arrays on datetime dimensions (TileDB's only dense dimension
    types besides the integers and times; one starting before the epoch):
    overlapping writes consolidated by us and by TileDB on a copy give the
    same files and the same reads at every timestamp, by TileDB and by us,
    also of TileDB's consolidation; the same for a window, and vacuum."""
    c = small.client()
    ours, theirs = f"dt/{unit}-ours", f"dt/{unit}-theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    dt = np.dtype(f"M8[{unit}]")
    lo, y0 = np.datetime64("1969-12-20", unit), np.datetime64("2001-01-01", unit)  # dense: one type
    dom = tiledb.Domain(tiledb.Dim("d", domain=(lo, lo + 39), tile=8, dtype=dt),
                        tiledb.Dim("y", domain=(y0, y0 + 5), tile=3, dtype=dt))
    tiledb.Array.create(a, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("s", dtype=str, var=True)]))
    for t, (x0, x1) in enumerate([(30, 39), (0, 9), (6, 17), (15, 23)], start=1):
        with tiledb.open(a, "w", timestamp=t) as A:
            n = (x1 - x0 + 1) * 6
            # (datetime slices include their end)
            A[lo + x0:lo + x1, y0:y0 + 5] = {"v": np.arange(n, dtype=np.float64).reshape(-1, 6) + 100 * t,
                                             "s": np.array([f"s{t}.{i}" for i in range(n)], dtype=object).reshape(-1, 6)}
    shutil.copytree(a, b)

    def view(u, ts):
        with tiledb.open(u, timestamp=ts) as A:
            r = A[:]
        return repr((r["v"].tolist(), r["s"].tolist()))

    def ours_view(name, ts):
        whole = {"d": [[int(lo.astype(np.int64)), int(lo.astype(np.int64)) + 39]],
                 "y": [[int(y0.astype(np.int64)), int(y0.astype(np.int64)) + 5]]}
        got = read(c, array=name, timestamp=ts, subarray=whole)
        v = np.array(got.column("v").to_pylist(), dtype=np.float64).reshape(40, 6)
        s = np.array([x.rstrip("\x00") for x in got.column("s").to_pylist()], dtype=object).reshape(40, 6)
        return repr((v.tolist(), s.tolist()))

    before = [view(a, t) for t in range(1, 5)]
    for rng in ([2, 3], None):  # a window, then all
        cfg = {"sm.consolidation.mode": "fragments"}
        body = {"array": ours, "mode": "fragments"}
        if rng:
            cfg.update({"sm.consolidation.timestamp_start": str(rng[0]), "sm.consolidation.timestamp_end": str(rng[1])})
            body["timestamp"] = rng
        tiledb.consolidate(b, config=tiledb.Config(cfg))
        res = action(c, "consolidate", body)
        assert res["written"], res
        # (file names carry the fragments' timestamp ranges; tiledb-py's
        # FragmentInfoList overflows on this domain before the epoch)
        assert file_tree(a) == file_tree(b), rng
        for t in range(1, 5):
            assert view(a, t) == view(b, t), (rng, t)
            assert ours_view(ours, t) == ours_view(theirs, t) == view(a, t), (rng, t)
        assert view(a, 4) == before[3]
        tiledb.vacuum(b, config=tiledb.Config({"sm.vacuum.mode": "fragments"}))
        action(c, "vacuum", {"array": ours, "mode": "fragments"})
        assert file_tree(a) == file_tree(b), rng


def test_tiledb_consolidated_then_our_writes_and_back(small):
    """TileDB consolidates and vacuums; we write more and read; we
    consolidate and vacuum; TileDB writes more; both read the same."""
    c = small.client()
    name = "cv/cross"
    uri = os.path.join(small.data, name)
    make_array(uri, True, frags=3)
    for m in MODES:
        tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": m}))
        tiledb.vacuum(uri, config=tiledb.Config({"sm.vacuum.mode": m}))
    put(c, cmd(array=name, subarray={"x": [[50, 59]], "y": [[0, 9]]}, timestamp=4),
        pa.table({"v": np.full(100, 7.0), "s": ["ours"] * 100}))
    assert our_view(c, name, True) == tiledb_view(uri)
    with tiledb.open(uri) as A:
        assert A[55, 5]["v"] == 7.0 and A[55, 5]["s"] == "ours"
    twin = uri + "-twin"
    shutil.copytree(uri, twin)
    for m in MODES:
        action(c, "consolidate", {"array": name, "mode": m})
        action(c, "vacuum", {"array": name, "mode": m})
        tiledb.consolidate(twin, config=tiledb.Config({"sm.consolidation.mode": m}))
        tiledb.vacuum(twin, config=tiledb.Config({"sm.vacuum.mode": m}))
        assert file_tree(uri) == file_tree(twin), m
    assert our_view(c, name, True) == tiledb_view(uri) == tiledb_view(twin)
    with tiledb.open(uri, "w", timestamp=5) as A:
        A[90:100, 90:100] = {"v": np.full((10, 10), 9.0), "s": np.array(["theirs"] * 100, dtype=object).reshape(10, 10)}
    assert our_view(c, name, True) == tiledb_view(uri)


def test_vacuum_grace_removes_old_uncommitted(flightd_bin, tmp_path):
    d = Daemon(flightd_bin, tmp_path, args=["-vacuum-grace", "300ms"])
    try:
        c = d.client()
        name = "g/a"
        create_kv(c, name)
        uri = os.path.join(d.data, name)
        kept = put(c, name, kv(0, 10))["fragments"]
        staged = put(c, cmd(array=name, stage=True), kv(100, 10))["fragments"]
        young = action(c, "vacuum", {"array": name})
        assert young["uncommitted"] == []
        time.sleep(0.5)
        fresh = put(c, cmd(array=name, stage=True), kv(200, 10))["fragments"]
        res = action(c, "vacuum", {"array": name})
        assert res["uncommitted"] == staged
        left = set(os.listdir(os.path.join(uri, "__fragments")))
        assert left == set(kept + fresh)
        assert len(tiledb_rows(uri)) == 10
        expect_code("NOT_FOUND", action, c, "commit_fragments", {"array": name, "fragments": staged})
        action(c, "commit_fragments", {"array": name, "fragments": fresh})
        assert len(tiledb_rows(uri)) == 20
    finally:
        d.stop()


# ---- kill -9 during consolidate, vacuum and commit_fragments ----

def dense_many(uri, frags):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 399), tile=40, dtype=np.int64),
                        tiledb.Dim("y", domain=(0, 99), tile=100, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr("v", dtype=np.float64)]))
    for t in range(1, frags + 1):
        lo = (t - 1) * 400 // frags
        hi = t * 400 // frags
        with tiledb.open(uri, "w", timestamp=t) as A:
            A[lo:hi, 0:100] = {"v": np.arange((hi - lo) * 100, dtype=np.float64).reshape(hi - lo, 100) + t}


def dense_view(uri):
    with tiledb.open(uri) as A:
        return A[:]["v"].tobytes()


def our_dense(c, name):
    t = read(c, array=name, subarray={"x": [[0, 399]], "y": [[0, 99]]}, columns=["v"])
    return np.array(t.column("v").to_pylist(), dtype=np.float64).tobytes()


def test_kill9_during_lifecycle_actions(flightd_bin, tmp_path):
    """30 trials: the daemon is killed with SIGKILL at a random moment of a
    consolidate, a vacuum or a commit_fragments; TileDB then reads exactly
    the data before (consolidate, vacuum) or before-or-after (commit), we
    read what TileDB reads, and the action rerun completes and changes
    nothing TileDB reads."""
    data = tmp_path / "data"
    data.mkdir()
    pristine = str(tmp_path / "pristine")
    dense_many(pristine, 9)  # single-digit timestamps: TileDB 2.30 cannot consolidate commits "__10_.." sorted before "__1_.."
    want = dense_view(pristine)
    consolidated = str(tmp_path / "consolidated")  # TileDB-consolidated, not vacuumed
    shutil.copytree(pristine, consolidated)
    for m in MODES:
        tiledb.consolidate(consolidated, config=tiledb.Config({"sm.consolidation.mode": m}))
    staged = str(tmp_path / "staged")  # 8 staged fragments over x in [0, 79]
    shutil.copytree(pristine, staged)
    d = Daemon(flightd_bin, tmp_path, args=["-max-fragment-bytes", "8000"])
    try:
        c = d.client()
        shutil.copytree(staged, str(tmp_path / "st"))
        r = put(c, cmd(array="st", stage=True, timestamp=100, subarray={"x": [[0, 79]], "y": [[0, 99]]}),
                pa.table({"v": np.full(8000, -1.0)}), chunk=1000)
        frags = r["fragments"]
        assert len(frags) >= 2
    finally:
        d.stop()
    shutil.rmtree(staged)
    shutil.move(str(tmp_path / "st"), staged)
    after_commit = bytearray(want)
    after_commit[:8000 * 8] = np.full(8000, -1.0).tobytes()
    after_commit = bytes(after_commit)

    rnd = random.Random(11)
    seen = {"consolidate": set(), "vacuum": set(), "commit_fragments": set()}
    for trial in range(30):
        kind = ["consolidate", "vacuum", "commit_fragments"][trial % 3]
        src = {"consolidate": pristine, "vacuum": consolidated, "commit_fragments": staged}[kind]
        name = f"t{trial}"
        uri = str(data / name)
        shutil.copytree(src, uri)
        body = {"array": name}
        if kind == "consolidate":
            body["mode"] = rnd.choice(MODES)
        elif kind == "vacuum":
            body["mode"] = rnd.choice(MODES)
        else:
            body["fragments"] = frags
        d = Daemon(flightd_bin, data)
        c = d.client()
        errs = []
        th = threading.Thread(target=lambda: errs.append(_try(lambda: action(c, kind, body))))
        th.start()
        time.sleep(rnd.uniform(0, 0.05))
        d.proc.send_signal(signal.SIGKILL)
        th.join(30)
        d.stop(check=False)
        finished = errs and errs[0] is None

        got = dense_view(uri)
        if kind == "commit_fragments":
            assert got in (want, after_commit), trial
            seen[kind].add(got == after_commit)
        else:
            assert got == want, (trial, body)
            seen[kind].add(finished)
        # We read what TileDB reads; the rerun completes and changes nothing.
        d = Daemon(flightd_bin, data)
        try:
            c = d.client()
            assert our_dense(c, name) == got, trial
            action(c, kind, body)
            if kind == "vacuum":
                for m in MODES:
                    action(c, "vacuum", {"array": name, "mode": m})
            final = after_commit if kind == "commit_fragments" else want
            assert dense_view(uri) == final and our_dense(c, name) == final, trial
            for t in (1, 5, 9, 100):
                with tiledb.open(uri, timestamp=t) as A:
                    A[:]  # every timestamp still opens
        finally:
            d.stop()
        shutil.rmtree(uri)
    print("kill -9 trials: outcomes seen", seen)
    assert all(seen.values()), seen


def _try(fn):
    try:
        fn()
        return None
    except Exception as e:  # the daemon was killed under the call
        return e


# ---- deletes ----

def test_delete_honoured_by_tiledb(small):
    c = small.client()
    ours, theirs = "del/ours", "del/theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 1000), tile=10, dtype=np.int64))
    sch = tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr("v", dtype=np.float64),
                                                              tiledb.Attr("s", dtype=str, var=True, nullable=True)])
    tiledb.Array.create(a, sch)
    for t in (1, 2):
        with tiledb.open(a, "w", timestamp=t) as A:
            ks = np.arange(t * 10, t * 10 + 20)
            A[ks] = {"v": ks * 0.5, "s": np.array([f"n{k % 3}" for k in ks], dtype=object)}
    shutil.copytree(a, b)
    cases = [("v > 12 and s == 'n1'", 3), ("k < 12 or v == 14.5", 4), ("s in ['n0', 'n2'] and k >= 30", 5)]
    for cond, t in cases:
        res = action(c, "delete", {"array": ours, "filter": cond, "timestamp": t})
        assert res["commit"].startswith(f"__commits/__{t}_{t}_") and res["commit"].endswith("_22.del")
        with tiledb.open(b, "d", timestamp=t) as B:
            B.query(cond=cond).submit()
        for ts in (1, 2, t, None):
            assert tiledb_view_s(a, ts) == tiledb_view_s(b, ts), (cond, ts)
    assert file_tree(a) == file_tree(b)
    got = read(c, array=ours)
    assert sorted(got.column("k").to_pylist()) == sorted(int(x) for x in tiledb_view_keys(b))
    # Commits holding deletes consolidate as TileDB's do.
    action(c, "consolidate", {"array": ours, "mode": "commits"})
    tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "commits"}))
    assert file_tree(a) == file_tree(b)
    with open(sorted(glob_con(a))[0], "rb") as f1, open(sorted(glob_con(b))[0], "rb") as f2:
        # The same entries (delete tiles are gzip streams: zlib's bytes differ from Go's).
        assert f1.read().count(b"__commits/") == f2.read().count(b"__commits/") == 5
    assert tiledb_view_s(a) == tiledb_view_s(b)
    expect_code("INVALID_ARGUMENT", action, c, "delete", {"array": ours, "filter": "v >"})
    expect_code("INVALID_ARGUMENT", action, c, "delete", {"array": ours, "filter": "nope == 1"})
    expect_code("INVALID_ARGUMENT", action, c, "delete", {"array": ours})
    action(c, "create_array", {"array": "del/dense", "type": "dense",
                               "dimensions": [{"name": "x", "type": "int32", "domain": [0, 9], "tile": 10}],
                               "attributes": [{"name": "a", "type": "int64"}]})
    expect_code("INVALID_ARGUMENT", action, c, "delete", {"array": "del/dense", "filter": "a > 1"})


def glob_con(uri):
    d = os.path.join(uri, "__commits")
    return [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".con")]


def tiledb_view_s(uri, ts=None):
    with tiledb.open(uri, timestamp=ts) as A:
        r = A.query()[:]
    return repr(sorted(zip(r["k"].tolist(), r["v"].tolist(), r["s"].tolist())))


def tiledb_view_keys(uri):
    with tiledb.open(uri) as A:
        return A.query()[:]["k"].tolist()


# ---- schema evolution ----

def test_evolve_schema_matches_tiledb(small):
    c = small.client()
    ours, theirs = "evo/ours", "evo/theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 1000), tile=10, dtype=np.int64))
    tiledb.Array.create(a, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("w", dtype=np.int32)]))
    with tiledb.open(a, "w", timestamp=1) as A:
        A[[1, 2, 3]] = {"v": [1.0, 2.0, 3.0], "w": [1, 2, 3]}
    shutil.copytree(a, b)
    res = action(c, "evolve_schema", {"array": ours, "timestamp": 5, "drop_attributes": ["w"], "add_attributes": [
        {"name": "n", "type": "float32", "nullable": True, "filters": [{"name": "zstd", "level": 3}]},
        {"name": "s", "type": "string_utf8", "cell_val_num": "var"}]})
    assert [x["name"] for x in res["attributes"]] == ["v", "n", "s"]
    se = tiledb.ArraySchemaEvolution(tiledb.Ctx())
    se.add_attribute(tiledb.Attr("n", dtype=np.float32, nullable=True, filters=[tiledb.ZstdFilter(3)]))
    se.add_attribute(tiledb.Attr("s", dtype=str, var=True))
    se.drop_attribute("w")
    se.timestamp(5)
    se.array_evolve(b)
    assert file_tree(a) == file_tree(b)  # one new schema file __5_5_<uuid> each
    with tiledb.open(a) as A, tiledb.open(b) as B:
        assert A.schema == B.schema
        ra, rb = A.query()[:], B.query()[:]
        assert repr(ra) == repr(rb)
    for ts in (1, 4):  # before the evolution: the old schema, w still there
        with tiledb.open(a, timestamp=ts) as A, tiledb.open(b, timestamp=ts) as B:
            assert A.schema == B.schema and "w" in [A.schema.attr(i).name for i in range(A.schema.nattr)]
    assert [x["name"] for x in action(c, "describe", {"array": ours, "timestamp": 4})["attributes"]] == ["v", "w"]
    old = read(c, array=ours)
    assert old.column_names == ["k", "v", "n", "s"] and old.column("n").to_pylist() == [None] * 3
    # TileDB writes the new attribute, we read it; we write it, TileDB reads it.
    with tiledb.open(a, "w", timestamp=6) as A:
        A[[4]] = {"v": [4.0], "n": np.array([4.5], dtype=np.float32), "s": np.array(["four"], dtype=object)}
    put(c, cmd(array=ours, timestamp=7), pa.table({"k": pa.array([5], pa.int64()), "v": [5.0],
                                                   "n": pa.array([5.5], pa.float32()), "s": ["five"]}))
    got = read(c, array=ours).sort_by("k")
    assert got.column("n").to_pylist() == [None, None, None, 4.5, 5.5]
    with tiledb.open(a) as A:
        r = A.query()[:]
        assert r["s"].tolist()[3:] == ["four", "five"]
        assert list(np.ma.filled(r["n"], -1.0)) == [-1.0, -1.0, -1.0, 4.5, 5.5]
    expect_code("INVALID_ARGUMENT", action, c, "evolve_schema", {"array": ours, "drop_attributes": ["k"]})
    expect_code("INVALID_ARGUMENT", action, c, "evolve_schema", {"array": ours, "drop_attributes": ["nope"]})
    expect_code("INVALID_ARGUMENT", action, c, "evolve_schema", {"array": ours, "add_attributes": [{"name": "v", "type": "int8"}]})
    expect_code("INVALID_ARGUMENT", action, c, "evolve_schema", {"array": ours, "add_attributes": [{"name": "x", "type": "nonsense"}]})
    expect_code("INVALID_ARGUMENT", action, c, "evolve_schema", {"array": ours})
    expect_code("INVALID_ARGUMENT", action, c, "evolve_schema", {"array": ours, "drop_attributes": ["v", "n", "s"]})


def test_sparse_consolidated_by_tiledb_then_ours_and_back(small):
    """A sparse array consolidated (with per-cell timestamps) and vacuumed
    by TileDB: we read it at every timestamp, write to it; we consolidate
    its commits and metadata; TileDB writes again; both read the same."""
    c = small.client()
    name = "cv/sparse-cross"
    uri = os.path.join(small.data, name)
    make_array(uri, False, frags=3)
    before = [tiledb_view(uri, t) for t in (1, 2, 3)]
    for m in MODES:
        tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": m}))
        tiledb.vacuum(uri, config=tiledb.Config({"sm.vacuum.mode": m}))
    assert len(tiledb.array_fragments(uri)) == 1
    for t in (1, 2, 3):
        t_ours = read(c, array=name, timestamp=t)
        assert repr(sorted(zip(t_ours.column("k").to_pylist(), t_ours.column("v").to_pylist()))) == tiledb_view(uri, t) == before[t - 1]
    put(c, cmd(array=name, timestamp=4), pa.table({"k": pa.array([2, 500], pa.int64()), "v": [-2.0, 500.0]}))
    assert our_view(c, name, False) == tiledb_view(uri)
    for m in ["commits", "fragment_meta", "array_meta"]:
        action(c, "consolidate", {"array": name, "mode": m})
        action(c, "vacuum", {"array": name, "mode": m})
    with tiledb.open(uri, "w", timestamp=5) as A:
        A[[3, 600]] = {"v": [-3.0, 600.0]}
    assert our_view(c, name, False) == tiledb_view(uri)
    for t in (1, 2, 3, 4, 5):
        t_ours = read(c, array=name, timestamp=t)
        assert repr(sorted(zip(t_ours.column("k").to_pylist(), t_ours.column("v").to_pylist()))) == tiledb_view(uri, t), t


@pytest.mark.parametrize("dups", [False, True], ids=["unique", "dups"])
def test_sparse_fragments_with_timestamps_match_tiledb(small, dups):
    """Sparse fragment consolidation keeps every cell version with its
    timestamp, as TileDB's: strings, nulls, a string dimension, duplicates."""
    c = small.client()
    ours, theirs = f"sp/{dups}-ours", f"sp/{dups}-theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 1000), tile=10, dtype=np.int64),
                        tiledb.Dim("name", domain=(None, None), tile=None, dtype="ascii"))
    tiledb.Array.create(a, tiledb.ArraySchema(domain=dom, sparse=True, allows_duplicates=dups, capacity=3, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("s", dtype=str, var=True, nullable=True)]))
    rng = np.random.default_rng(5)
    for t in range(1, 6):
        ks = rng.integers(0, 20, 8)
        if not dups:
            ks = np.unique(ks)
        with tiledb.open(a, "w", timestamp=t) as A:
            A[ks, np.array([f"n{k % 3}" for k in ks], dtype=object)] = {
                "v": ks * 1.0 + t, "s": pa.array([None if k % 4 == 0 else f"s{t}" for k in ks]).to_numpy(zero_copy_only=False)}
    shutil.copytree(a, b)

    def view(u, ts=None):
        with tiledb.open(u, timestamp=ts) as A:
            r = A.query()[:]
        return sorted(zip(r["k"].tolist(), r["name"].tolist(), r["v"].tolist(), [str(x) for x in r["s"].tolist()]))

    before = [view(a, t) for t in range(1, 6)]
    tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
    res = action(c, "consolidate", {"array": ours, "mode": "fragments"})
    assert len(res["consolidated"]) == 5
    assert file_tree(a) == file_tree(b)
    for t in range(1, 6):
        assert view(a, t) == view(b, t) == before[t - 1], t
    tiledb.vacuum(b, config=tiledb.Config({"sm.vacuum.mode": "fragments"}))
    action(c, "vacuum", {"array": ours, "mode": "fragments"})
    assert file_tree(a) == file_tree(b)
    assert [f.cell_num for f in tiledb.array_fragments(a)] == [f.cell_num for f in tiledb.array_fragments(b)]
    for t in range(1, 6):
        assert view(a, t) == view(b, t) == before[t - 1], t
        got = read(c, array=ours, timestamp=t)
        ours_rows = sorted(zip(got.column("k").to_pylist(), [as_str(n) for n in got.column("name").to_pylist()],
                               got.column("v").to_pylist(), [str(x) for x in got.column("s").to_pylist()]))
        assert ours_rows == sorted((k, as_str(n), v, s) for k, n, v, s in before[t - 1]), t
    # We read TileDB's consolidated fragment and ours alike.
    assert read(c, array=ours).sort_by([("k", "ascending"), ("name", "ascending")]).equals(
        read(c, array=theirs).sort_by([("k", "ascending"), ("name", "ascending")]))


def as_str(x):
    return x.decode() if isinstance(x, bytes) else x


@pytest.mark.parametrize("history", ["plain", "deletes", "evolved"])
def test_kill9_during_sparse_consolidation(flightd_bin, tmp_path, history):
    """6 more kill -9 trials per history (48 in all with the test above), during the consolidation of a sparse array's
    fragments (every cell version rewritten with its timestamp; with
    "deletes", over two delete commits and a fragment TileDB consolidated
    before, so with per-cell delete metadata; "evolved" as "deletes" with
    a schema evolution at 6 adding a fixed and a nullable var-sized
    attribute, filled in for the fragments before): TileDB reads exactly the
    data before at every timestamp, we read what TileDB reads, the rerun
    (which finishes a consolidation killed between its commit and its .vac
    file) completes and changes nothing."""
    data = tmp_path / "data"
    data.mkdir()
    pristine = str(tmp_path / "pristine")
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 10**6), tile=1000, dtype=np.int64))
    tiledb.Array.create(pristine, tiledb.ArraySchema(domain=dom, sparse=True, capacity=100,
                                                     attrs=[tiledb.Attr("v", dtype=np.float64)]))
    rng = np.random.default_rng(3)
    for t in range(1, 10):
        if history == "evolved" and t == 6:
            se = tiledb.ArraySchemaEvolution(tiledb.Ctx())
            se.add_attribute(tiledb.Attr("w", dtype=np.int32))
            se.add_attribute(tiledb.Attr("s", dtype=str, var=True, nullable=True))
            se.timestamp(6)
            se.array_evolve(pristine)
        ks = np.unique(rng.integers(0, 10000, 3000))
        cols = {"v": ks * 1.0 + t}
        if history == "evolved" and t >= 6:
            cols.update(w=(ks % 1000).astype(np.int32),
                        s=pa.array([None if k % 3 == 0 else f"s{k % 7}" for k in ks]).to_numpy(zero_copy_only=False))
        with tiledb.open(pristine, "w", timestamp=t) as A:
            A[ks] = cols
        if history != "plain" and t in (4, 7):
            with tiledb.open(pristine, "d", timestamp=t) as A:
                A.query(cond=f"v < {300 * t}").submit()
    if history != "plain":
        # (evolved: TileDB's window must hold a fragment with the var-sized
        # attribute, or TileDB dies of SIGFPE)
        tiledb.consolidate(pristine, config=tiledb.Config({"sm.consolidation.mode": "fragments",
                                                           "sm.consolidation.timestamp_start": "1",
                                                           "sm.consolidation.timestamp_end": "3" if history == "deletes" else "7"}))

    def view(u, ts=None):
        return _tdb_rows(u, ts)

    want = {t: view(pristine, t) for t in (1, 4, 5, 7, 9)}
    # How long one consolidation takes on this machine, call included: the
    # kills land at fractions of it, so that they fall inside it on a quiet
    # machine too (a fixed 0-150 ms delay let every consolidation finish
    # first once the machine was idle).
    shutil.copytree(pristine, str(data / "probe"))
    d = Daemon(flightd_bin, data)
    try:
        t0 = time.monotonic()
        action(d.client(), "consolidate", {"array": "probe"})
        took = time.monotonic() - t0
    finally:
        d.stop()
    shutil.rmtree(str(data / "probe"))
    fractions = [0.1, 0.25, 0.4, 0.55, 0.7, 0.85]
    outcomes = set()
    for trial in range(6):
        name = f"s{trial}"
        uri = str(data / name)
        shutil.copytree(pristine, uri)
        d = Daemon(flightd_bin, data)
        c = d.client()
        errs = []
        th = threading.Thread(target=lambda: errs.append(_try(lambda: action(c, "consolidate", {"array": name}))))
        th.start()
        time.sleep(took * fractions[trial])
        d.proc.send_signal(signal.SIGKILL)
        th.join(30)
        d.stop(check=False)
        outcomes.add(bool(errs) and errs[0] is None)
        for t in want:
            assert view(uri, t) == want[t], (trial, t)
        # A kill between the intent file and the commit leaves an intent
        # and a staged fragment nobody can tell from a consolidation still
        # running (on this node or another): the rerun leaves them alone and
        # the vacuum removes both once they are older than -vacuum-grace,
        # here 1 s, waited out below.
        d = Daemon(flightd_bin, data, args=["-vacuum-grace", "1s"])
        try:
            c = d.client()
            got = read(c, array=name)
            assert _rows({n: got.column(n).to_pylist() for n in got.column_names}) == want[9], trial
            action(c, "consolidate", {"array": name})
            time.sleep(1.2)
            action(c, "vacuum", {"array": name})
            assert len(tiledb.array_fragments(uri)) == 1, trial
            assert not [f for f in os.listdir(os.path.join(uri, "__commits")) if f.endswith(".pending")], trial
            for t in want:
                assert view(uri, t) == want[t], (trial, t)
        finally:
            d.stop()
        shutil.rmtree(uri)
    print(f"sparse kill -9 trials: a consolidation took {took:.3f} s; finished before the kill", outcomes)
    assert False in outcomes, f"every consolidation finished before its kill (one takes {took:.3f} s)"


# ---- sparse consolidation over deletes and earlier consolidations ----

DEL_CONDS = ["v > {x}", "k < {k}", "s == 's{m}'", "v < {x} and k > {k}", "k in [{k}, {k2}, {k3}]",
             "s != 's{m}' or v >= {x}", "s == None", "not (v < {x})", "name == 'n{m}'"]


def _del_cond(rnd):
    return rnd.choice(DEL_CONDS).format(x=rnd.randint(0, 60) + 0.5, k=rnd.randint(0, 20), k2=rnd.randint(0, 20),
                                        k3=rnd.randint(0, 20), m=rnd.randint(0, 3))


@pytest.mark.parametrize("seed,dups,window", [(1, False, False), (3, True, False), (4, False, False), (8, False, True)])
def test_sparse_consolidation_over_deletes_matches_tiledb(small, seed, dups, window):
    """Random histories of writes, deletes (ours through the delete action,
    TileDB's through its delete query) and fragment consolidations (ours
    through the action, TileDB's with tiledb.consolidate), every one of
    them after the first consolidation a re-consolidation of a fragment
    holding per-cell timestamps and delete metadata. After each
    consolidation: the same files (UUIDs aside), TileDB reads both arrays
    identically at every timestamp and as before, we read both (ours and
    TileDB's consolidation) as TileDB does, and TileDB lists the same
    fragments; vacuum keeps all that."""
    c = small.client()
    rnd = random.Random(seed)
    ours, theirs = f"spdel/{seed}-ours", f"spdel/{seed}-theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 1000), tile=10, dtype=np.int64),
                        tiledb.Dim("name", domain=(None, None), tile=None, dtype="ascii"))
    sch = tiledb.ArraySchema(domain=dom, sparse=True, allows_duplicates=dups, capacity=4, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("s", dtype=str, var=True, nullable=True)])
    tiledb.Array.create(a, sch)
    tiledb.Array.create(b, sch)

    def view(u, ts=None):
        with tiledb.open(u, timestamp=ts) as A:
            r = A.query()[:]
        return sorted(zip(r["k"].tolist(), [as_str(x) for x in r["name"].tolist()], r["v"].tolist(),
                          [str(x) for x in r["s"].tolist()]))

    def ours_view(name, ts):
        got = read(c, array=name, timestamp=ts)
        return sorted(zip(got.column("k").to_pylist(), [as_str(n) for n in got.column("name").to_pylist()],
                          got.column("v").to_pylist(), [str(x) for x in got.column("s").to_pylist()]))

    ranges = lambda u: [f.timestamp_range for f in tiledb.array_fragments(u)]  # noqa: E731
    t, consolidations, deletes = 0, 0, 0
    for step in range(12):
        t += 1
        kind = rnd.choices(["write", "delete", "consolidate"], [5, 3, 2])[0]
        if step < 2:
            kind = "write"
        if kind == "write":
            ks = [rnd.randint(0, 20) for _ in range(rnd.randint(1, 8))]
            if not dups:
                ks = sorted(set(ks))
            data = {"v": np.array([k * 2.0 + t for k in ks]),
                    "s": pa.array([None if (k + t) % 5 == 0 else f"s{(k + t) % 4}" for k in ks]).to_numpy(zero_copy_only=False)}
            for u in (a, b):
                with tiledb.open(u, "w", timestamp=t) as A:
                    A[np.array(ks), np.array([f"n{k % 4}" for k in ks], dtype=object)] = data
        elif kind == "delete":
            cond = _del_cond(rnd)
            action(c, "delete", {"array": ours, "filter": cond, "timestamp": t})
            with tiledb.open(b, "d", timestamp=t) as B:
                B.query(cond=cond).submit()
            deletes += 1
        else:
            before = [view(a, x) for x in range(1, t + 1)]
            if window and t >= 5:  # a window that leaves the first and the last writes out
                w0, w1 = 2, t - 2
                tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "fragments",
                                                            "sm.consolidation.timestamp_start": str(w0),
                                                            "sm.consolidation.timestamp_end": str(w1)}))
                action(c, "consolidate", {"array": ours, "mode": "fragments", "timestamp": [w0, w1]})
            else:
                tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
                action(c, "consolidate", {"array": ours, "mode": "fragments"})
            consolidations += 1
            assert file_tree(a) == file_tree(b), (seed, step)
            assert ranges(a) == ranges(b), (seed, step)
            for x in range(1, t + 1):
                assert view(a, x) == view(b, x) == before[x - 1], (seed, step, x)
                assert ours_view(ours, x) == ours_view(theirs, x) == before[x - 1], (seed, step, x)
            if rnd.random() < 0.5:
                tiledb.vacuum(b, config=tiledb.Config({"sm.vacuum.mode": "fragments"}))
                action(c, "vacuum", {"array": ours, "mode": "fragments"})
                assert file_tree(a) == file_tree(b), (seed, step)
    # A last consolidation: its input holds earlier consolidations.
    before = [view(a, x) for x in range(1, t + 1)]
    tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
    action(c, "consolidate", {"array": ours, "mode": "fragments"})
    assert file_tree(a) == file_tree(b) and ranges(a) == ranges(b)
    for x in range(1, t + 1):
        assert view(a, x) == view(b, x) == before[x - 1], (seed, x)
        assert ours_view(ours, x) == ours_view(theirs, x) == before[x - 1], (seed, x)
    assert [f.cell_num for f in tiledb.array_fragments(a)] == [f.cell_num for f in tiledb.array_fragments(b)]
    print(f"seed {seed}: {consolidations + 1} consolidations over {deletes} deletes")


# ---- sparse consolidation over deletes and schema evolutions ----

# (TileDB's attribute, our evolve_schema JSON) added by each evolution; the
# first also drops x.
EVOLUTIONS = [
    [(tiledb.Attr("w", dtype=np.int32), {"name": "w", "type": "int32"}),
     (tiledb.Attr("n", dtype=np.float32, nullable=True), {"name": "n", "type": "float32", "nullable": True}),
     (tiledb.Attr("u", dtype=str, var=True), {"name": "u", "type": "string_utf8", "cell_val_num": "var"}),
     (tiledb.Attr("f", dtype=np.int16, fill=7), {"name": "f", "type": "int16", "fill": 7})],
    [(tiledb.Attr("e", dtype=str, var=True, nullable=True),
      {"name": "e", "type": "string_utf8", "cell_val_num": "var", "nullable": True}),
     (tiledb.Attr("g", dtype=np.float64), {"name": "g", "type": "float64"})],
]
# Delete conditions by the attribute they need (None: the first schema's).
EVO_CONDS = {None: ["v > {x}", "k < {k}", "s == 's{m}'", "v < {x} and k > {k}", "s != 's{m}' or v >= {x}", "s == None",
                    "name == 'n{m}'"],
             "w": ["w > {k}", "w < {k} or v > {x}"], "n": ["n < {x}"], "u": ["u == 'u{m}'"], "f": ["f != {m}"],
             "e": ["e == None", "e == 'e{m}'"], "g": ["g >= {x}"]}


def _norm(x):
    """A cell as a comparable string. TileDB's var-sized fill value is one
    NUL byte, which tiledb-py shows as ''."""
    x = as_str(x)
    return str(x.rstrip("\x00") if isinstance(x, str) else x)


def _rows(cols, keep=None):
    names = sorted(n for n in cols if keep is None or n in keep)
    return sorted(tuple((n, _norm(v)) for n, v in zip(names, row)) for row in zip(*(cols[n] for n in names)))


def _tdb_rows(u, ts, keep=None):
    with tiledb.open(u, timestamp=ts) as A:
        r = A.query()[:]
    return _rows({n: v.tolist() for n, v in r.items()}, keep)


def _our_rows(c, name, ts):
    t = read(c, array=name, timestamp=ts)
    return _rows({n: t.column(n).to_pylist() for n in t.column_names})


def _after_creation(uri, ahead_ms=100):
    """The array's creation timestamp, once the clock is ahead_ms past it.
    Tests stamp their writes and evolutions just after it, in the past:
    TileDB orders schema files by name, so evolutions at small timestamps
    would not be the latest, and its consolidation's defaults are about
    the present."""
    t0 = max(int(f.split("_")[2]) for f in os.listdir(os.path.join(uri, "__schema")) if f != "__enumerations")
    time.sleep(max(0.0, (t0 + ahead_ms) / 1000 - time.time()))
    return t0


def _evolve_both(c, ours, theirs_uri, ts, adds=(), drops=()):
    """The same schema evolution through our action and TileDB's
    ArraySchemaEvolution; adds are (tiledb.Attr, our JSON) pairs."""
    body = {"array": ours, "timestamp": ts}
    if adds:
        body["add_attributes"] = [j for _, j in adds]
    if drops:
        body["drop_attributes"] = list(drops)
    action(c, "evolve_schema", body)
    se = tiledb.ArraySchemaEvolution(tiledb.Ctx())
    for at, _ in adds:
        se.add_attribute(at)
    for d in drops:
        se.drop_attribute(d)
    se.timestamp(ts)
    se.array_evolve(theirs_uri)


@pytest.mark.parametrize("seed,dups,window", [(2, False, False), (5, True, False), (6, False, True)])
def test_sparse_consolidation_evolved_matches_tiledb(small, seed, dups, window):
    """Histories of writes, deletes (on attributes of the first schema and
    on added ones), two schema evolutions (dropping x; adding fixed,
    nullable, var-sized and fill-valued attributes) and fragment
    consolidations (ours through the actions, TileDB's on its copy), so
    that consolidations over deletes and earlier consolidations meet
    fragments written before an evolution added an attribute. After each:
    the same files (UUIDs aside) and fragments; TileDB reads both arrays
    identically at every timestamp and as before (on the attributes the
    latest schema keeps: a dropped attribute's values are gone from the
    consolidated fragment, for TileDB's as for ours); we read both as
    TileDB does; vacuum keeps all that."""
    c = small.client()
    rnd = random.Random(seed)
    ours, theirs = f"spevo/{seed}-ours", f"spevo/{seed}-theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 1000), tile=10, dtype=np.int64),
                        tiledb.Dim("name", domain=(None, None), tile=None, dtype="ascii"))
    sch = tiledb.ArraySchema(domain=dom, sparse=True, allows_duplicates=dups, capacity=4, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("s", dtype=str, var=True, nullable=True),
        tiledb.Attr("x", dtype=np.int32)])
    tiledb.Array.create(a, sch)
    shutil.copytree(a, b)
    attrs, added, t = ["v", "s", "x"], [None], 0
    t0 = _after_creation(a)
    ranges = lambda u: [f.timestamp_range for f in tiledb.array_fragments(u)]  # noqa: E731

    def write():
        ks = [rnd.randint(0, 20) for _ in range(rnd.randint(2, 8))]
        if not dups:
            ks = sorted(set(ks))
        gen = {"v": lambda k: k * 2.0 + t,
               "s": lambda k: None if (k + t) % 5 == 0 else f"s{(k + t) % 4}",
               "x": lambda k: k + 100 * t, "w": lambda k: k - t, "n": lambda k: None if k % 3 == 0 else k / 4,
               "u": lambda k: f"u{k % 3}" if k % 4 else "", "f": lambda k: k % 4,
               "e": lambda k: None if k % 2 else f"e{k % 3}", "g": lambda k: k * 0.5 - t}
        typ = {"x": np.int32, "w": np.int32, "n": np.float32, "f": np.int16, "v": np.float64, "g": np.float64}
        data = {}
        for n in attrs:
            vals = [gen[n](k) for k in ks]
            if n in ("s", "u", "e"):
                data[n] = pa.array(vals, pa.string()).to_numpy(zero_copy_only=False)
            elif n == "n":
                data[n] = pa.array(vals, pa.float32()).to_numpy(zero_copy_only=False)
            else:
                data[n] = np.array(vals, dtype=typ[n])
        for u in (a, b):
            with tiledb.open(u, "w", timestamp=t0 + t) as A:
                A[np.array(ks), np.array([f"n{k % 4}" for k in ks], dtype=object)] = data

    def delete():
        field = rnd.choice(added)
        cond = rnd.choice(EVO_CONDS[field]).format(x=rnd.randint(0, 40) + 0.5, k=rnd.randint(0, 20), m=rnd.randint(0, 3))
        action(c, "delete", {"array": ours, "filter": cond, "timestamp": t0 + t})
        with tiledb.open(b, "d", timestamp=t0 + t) as B:
            B.query(cond=cond).submit()

    def evolve(i):
        adds = EVOLUTIONS[i]
        drops = ["x"] if i == 0 else []
        _evolve_both(c, ours, b, t0 + t, adds, drops)
        for d in drops:
            attrs.remove(d)
        attrs.extend(j["name"] for _, j in adds)
        added.extend(j["name"] for _, j in adds)
        assert file_tree(a) == file_tree(b)

    def consolidate(step):
        before = [_tdb_rows(a, t0 + x) for x in range(1, t + 1)]
        if window and t >= 5:  # leaves the first and the last writes out
            w0, w1 = 2, t - 2
            tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "fragments",
                                                        "sm.consolidation.timestamp_start": str(t0 + w0),
                                                        "sm.consolidation.timestamp_end": str(t0 + w1)}))
            action(c, "consolidate", {"array": ours, "mode": "fragments", "timestamp": [t0 + w0, t0 + w1]})
        else:
            tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
            action(c, "consolidate", {"array": ours, "mode": "fragments"})
        assert file_tree(a) == file_tree(b), (seed, step)
        assert ranges(a) == ranges(b), (seed, step)
        with tiledb.open(a) as A:
            keep = {"k", "name"} | {A.schema.attr(i).name for i in range(A.schema.nattr)}
        for x in range(1, t + 1):
            got = _tdb_rows(a, t0 + x)
            assert got == _tdb_rows(b, t0 + x), (seed, step, x)
            assert _tdb_rows(a, t0 + x, keep) == _project(before[x - 1], keep), (seed, step, x)
            assert _our_rows(c, ours, t0 + x) == _our_rows(c, theirs, t0 + x) == got, (seed, step, x)
        if rnd.random() < 0.5:
            tiledb.vacuum(b, config=tiledb.Config({"sm.vacuum.mode": "fragments"}))
            action(c, "vacuum", {"array": ours, "mode": "fragments"})
            assert file_tree(a) == file_tree(b), (seed, step)
            for x in range(1, t + 1):
                assert _tdb_rows(a, t0 + x) == _tdb_rows(b, t0 + x) == _our_rows(c, ours, t0 + x), (seed, step, x)

    # Each consolidation after an evolution takes in a write after it:
    # TileDB 2.30 dies of a division by zero (SIGFPE, in
    # Array::get_average_var_cell_sizes) when no fragment it consolidates
    # has a var-sized attribute of the latest schema; ours fills it in
    # (TestSparseWindowBeforeEvolution).
    plan = ["write", "write", "delete", "write", "consolidate", "write", "delete", "evolve0", "delete", "write",
            "delete", "consolidate", "write", "evolve1", "write", "delete", "write", "consolidate", "write", "delete",
            "consolidate"]
    for step, op in enumerate(plan):
        t += 1
        if op == "write":
            write()
        elif op == "delete":
            delete()
        elif op.startswith("evolve"):
            evolve(int(op[-1]))
        else:
            consolidate(step)
        if op != "consolidate" and rnd.random() < 0.3:
            t += 1
            delete()
    assert [f.cell_num for f in tiledb.array_fragments(a)] == [f.cell_num for f in tiledb.array_fragments(b)]


def _project(rows, keep):
    """_rows's output on the fields of keep only."""
    return sorted(tuple(p for p in r if p[0] in keep) for r in rows)


@pytest.mark.parametrize("dups", [False, True], ids=["unique", "dups"])
def test_sparse_consolidation_evolved_no_deletes_matches_tiledb(small, dups):
    """No deletes, no earlier consolidation: fragments written before an
    evolution (dropping x, adding the attributes of EVOLUTIONS[0]) and
    after it, consolidated by us and by TileDB on a copy: same files, same
    reads at every timestamp by both (the kept attributes as before), our
    reads of both alike."""
    c = small.client()
    ours, theirs = f"spevo/plain-{dups}-ours", f"spevo/plain-{dups}-theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 1000), tile=10, dtype=np.int64))
    tiledb.Array.create(a, tiledb.ArraySchema(domain=dom, sparse=True, allows_duplicates=dups, capacity=3, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("x", dtype=np.int32)]))
    t0 = _after_creation(a)
    for t in (1, 2):
        with tiledb.open(a, "w", timestamp=t0 + t) as A:
            A[[1, 2, 3 * t, 10 + t]] = {"v": [1.0 * t, 2.0 * t, 3.0 * t, 4.0 * t], "x": [t, t, t, t]}
    shutil.copytree(a, b)
    _evolve_both(c, ours, b, t0 + 3, EVOLUTIONS[0], ["x"])
    for u in (a, b):
        with tiledb.open(u, "w", timestamp=t0 + 4) as A:
            A[[2, 20]] = {"v": [-2.0, -20.0], "w": np.array([2, 20], dtype=np.int32),
                          "n": pa.array([None, 0.5], pa.float32()).to_numpy(zero_copy_only=False),
                          "u": np.array(["", "u20"], dtype=object), "f": np.array([1, 2], dtype=np.int16)}
    before = [_tdb_rows(a, t0 + x) for x in range(1, 6)]
    tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
    res = action(c, "consolidate", {"array": ours, "mode": "fragments"})
    assert len(res["consolidated"]) == 3, res
    assert file_tree(a) == file_tree(b)
    keep = {"k", "v", "w", "n", "u", "f"}
    for x in range(1, 6):
        got = _tdb_rows(a, t0 + x)
        assert got == _tdb_rows(b, t0 + x), x
        assert _project(got, keep) == _project(before[x - 1], keep), x
        assert _our_rows(c, ours, t0 + x) == _our_rows(c, theirs, t0 + x) == got, x
    tiledb.vacuum(b, config=tiledb.Config({"sm.vacuum.mode": "fragments"}))
    action(c, "vacuum", {"array": ours, "mode": "fragments"})
    assert file_tree(a) == file_tree(b)
    for x in range(1, 6):
        assert _tdb_rows(a, t0 + x) == _tdb_rows(b, t0 + x) == _our_rows(c, ours, t0 + x), x


def test_dense_consolidation_evolved_matches_tiledb(small):
    """A dense array whose fragments straddle an evolution (dropping x,
    adding the attributes of EVOLUTIONS[0]) consolidated by us and by
    TileDB on a copy: same files, same reads at every timestamp by both."""
    c = small.client()
    ours, theirs = "dnevo/ours", "dnevo/theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, 11), tile=4, dtype=np.int64),
                        tiledb.Dim("c", domain=(0, 5), tile=3, dtype=np.int64))
    tiledb.Array.create(a, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("x", dtype=np.int32)]))
    t0 = _after_creation(a)
    for t, r0 in ((1, 0), (2, 2)):
        with tiledb.open(a, "w", timestamp=t0 + t) as A:
            A[r0:r0 + 4, 0:6] = {"v": np.full((4, 6), 1.0 * t), "x": np.full((4, 6), t, dtype=np.int32)}
    shutil.copytree(a, b)
    _evolve_both(c, ours, b, t0 + 3, EVOLUTIONS[0], ["x"])
    for u in (a, b):
        with tiledb.open(u, "w", timestamp=t0 + 4) as A:
            A[4:8, 0:6] = {"v": np.full((4, 6), -4.0), "w": np.arange(24, dtype=np.int32).reshape(4, 6),
                           "n": pa.array([None if i % 2 else i / 2 for i in range(24)], pa.float32()).to_numpy(
                               zero_copy_only=False).reshape(4, 6),
                           "u": np.array([f"u{i}" for i in range(24)], dtype=object).reshape(4, 6),
                           "f": np.full((4, 6), 3, dtype=np.int16)}

    def view(u, ts):
        with tiledb.open(u, timestamp=ts) as A:
            r = A[:]
        return repr({k: np.ma.filled(v, -1).tolist() if np.ma.isMaskedArray(v) else v.tolist() for k, v in sorted(r.items())})

    tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
    res = action(c, "consolidate", {"array": ours, "mode": "fragments"})
    assert len(res["consolidated"]) == 3, res
    assert file_tree(a) == file_tree(b)
    for x in range(1, 6):
        assert view(a, t0 + x) == view(b, t0 + x), x
    got = read(c, array=ours, subarray={"r": [[0, 11]], "c": [[0, 5]]})
    want = read(c, array=theirs, subarray={"r": [[0, 11]], "c": [[0, 5]]})
    assert repr(got.to_pydict()) == repr(want.to_pydict())  # (NaN fills: compared as text)
    assert got.column("f").to_pylist()[:48] == [7] * 24 + [3] * 24  # rows 0-3 written before f existed


def test_delete_on_dropped_attribute_fails_as_tiledb(small):
    """A delete on an attribute a later evolution drops: TileDB 2.30 fails
    reads from the drop on and consolidations ("Field doesn't exist"); so
    do we (FAILED_PRECONDITION), on our array and on TileDB's, leaving the
    same files; reads before the drop agree."""
    c = small.client()
    ours, theirs = "spevo/dropdel-ours", "spevo/dropdel-theirs"
    a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 100), tile=10, dtype=np.int64))
    tiledb.Array.create(a, tiledb.ArraySchema(domain=dom, sparse=True, capacity=4, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("x", dtype=np.int32)]))
    t0 = _after_creation(a)
    with tiledb.open(a, "w", timestamp=t0 + 1) as A:
        A[[1, 2, 3]] = {"v": [1.0, 2.0, 3.0], "x": [10, 20, 30]}
    with tiledb.open(a, "w", timestamp=t0 + 3) as A:
        A[[4, 5]] = {"v": [4.0, 5.0], "x": [40, 50]}
    shutil.copytree(a, b)
    action(c, "delete", {"array": ours, "filter": "x > 15", "timestamp": t0 + 2})
    with tiledb.open(b, "d", timestamp=t0 + 2) as B:
        B.query(cond="x > 15").submit()
    _evolve_both(c, ours, b, t0 + 4, drops=["x"])
    assert file_tree(a) == file_tree(b)
    for x in (1, 2, 3):
        assert _tdb_rows(a, t0 + x) == _tdb_rows(b, t0 + x) == _our_rows(c, ours, t0 + x) == _our_rows(c, theirs, t0 + x), x
    for u, name in ((a, ours), (b, theirs)):
        for ts in (t0 + 4, None):
            with pytest.raises(tiledb.TileDBError, match="Field doesn't exist"):
                _tdb_rows(u, ts)
            expect_code("FAILED_PRECONDITION", read, c, array=name, **({} if ts is None else {"timestamp": ts}))
    with pytest.raises(tiledb.TileDBError, match="Field doesn't exist"):
        tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
    expect_code("FAILED_PRECONDITION", action, c, "consolidate", {"array": ours, "mode": "fragments"})
    assert file_tree(a) == file_tree(b)


ENUM_DELETES = ["c > 'green'", "not (c == 'red')", "c in ['red', 'nope'] or v > 4",
                "u != 2.5", "u in [1.5, 7.0]", "c <= 'green' and u == 7.0"]
ENUM_DELETES_REFUSED = ["c != 'nope'", "c < 'nope'", "u == 3.0", "u != 3.0"]
# TileDB writes these, then cannot read the array any more (an empty set;
# a null test of the index): we refuse them.
ENUM_DELETES_POISON = ["c in ['nope']", "u == None"]


def _enum_array(uri):
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 100), tile=10, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=4, attrs=[
        tiledb.Attr("c", dtype=np.uint8, enum_label="e"), tiledb.Attr("u", dtype=np.int16, enum_label="f", nullable=True),
        tiledb.Attr("v", dtype=np.int32)], enums=[tiledb.Enumeration("e", True, ["red", "green", "blue"]),
                                                  tiledb.Enumeration("f", False, np.array([1.5, 2.5, 7.0]))]))
    rng = random.Random(8)
    for t in (1, 2):
        ks = np.arange(t * 4, t * 4 + 12)
        with tiledb.open(uri, "w", timestamp=t) as A:
            A[ks] = {"c": np.array([rng.randint(0, 2) for _ in ks], dtype=np.uint8),
                     "u": pa.array([None if rng.random() < 0.25 else rng.randint(0, 2) for _ in ks], type=pa.int16()),
                     "v": np.array([rng.randint(0, 9) for _ in ks], dtype=np.int32)}


def test_delete_enumerated_matches_tiledb(small):
    """Deletes whose condition names enumerated attributes (strings,
    ordered; numbers, nullable) are honoured as TileDB's own: our delete
    action on one copy, TileDB's delete query on the other, the same reads
    (TileDB's and ours) at every timestamp, and after both consolidate
    their fragments. The deletes TileDB refuses (a value the enumeration
    lacks, a null test) are InvalidArgument and write nothing."""
    c = small.client()
    for i, cond in enumerate(ENUM_DELETES):
        ours, theirs = f"edel/{i}-ours", f"edel/{i}-theirs"
        a, b = os.path.join(small.data, ours), os.path.join(small.data, theirs)
        _enum_array(a)
        shutil.copytree(a, b)
        action(c, "delete", {"array": ours, "filter": cond, "timestamp": 3})
        with tiledb.open(b, "d", timestamp=3) as B:
            B.query(cond=cond).submit()

        def view(u, ts=None):
            with tiledb.open(u, timestamp=ts) as A:
                r = A.query(attrs=["c", "u", "v"])[:]
            return sorted(zip(r["k"].tolist(), [int(x) for x in r["c"]], [None if np.ma.is_masked(x) else int(x) for x in r["u"]],
                              r["v"].tolist()))

        def ours_view(ts):
            got = read(c, array=ours, timestamp=ts)
            return sorted(zip(got.column("k").to_pylist(), [int(x) for x in got.column("c").chunk(0).indices.to_pylist()],
                              [None if x is None else int(x) for x in pa.chunked_array(
                                  [ch.indices for ch in got.column("u").chunks]).to_pylist()], got.column("v").to_pylist()))

        for ts in (1, 2, 3):
            assert view(a, ts) == view(b, ts) == ours_view(ts), (cond, ts)
        assert len(view(b, 3)) < len(view(b, 2)), cond  # the delete removed something
        assert file_tree(a) == file_tree(b), cond
        before = [view(b, ts) for ts in (1, 2, 3)]
        tiledb.consolidate(b, config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
        action(c, "consolidate", {"array": ours, "mode": "fragments"})
        assert file_tree(a) == file_tree(b), cond
        for ts in (1, 2, 3):
            assert view(a, ts) == view(b, ts) == ours_view(ts) == before[ts - 1], (cond, ts)
    name = "edel/refused"
    uri = os.path.join(small.data, name)
    _enum_array(uri)
    for cond in ENUM_DELETES_REFUSED:
        with pytest.raises(tiledb.TileDBError):
            with tiledb.open(uri, "d", timestamp=3) as B:
                B.query(cond=cond).submit()
        expect_code("INVALID_ARGUMENT", action, c, "delete", {"array": name, "filter": cond, "timestamp": 3})
    assert not [f for f in os.listdir(os.path.join(uri, "__commits")) if f.endswith(".del")]
    for i, cond in enumerate(ENUM_DELETES_POISON):
        expect_code("INVALID_ARGUMENT", action, c, "delete", {"array": name, "filter": cond, "timestamp": 3})
        poisoned = os.path.join(small.data, f"edel/poison{i}")
        _enum_array(poisoned)
        with tiledb.open(poisoned, "d", timestamp=3) as B:
            B.query(cond=cond).submit()
        with pytest.raises(tiledb.TileDBError):
            with tiledb.open(poisoned) as A:
                A.query()[:]
    assert not [f for f in os.listdir(os.path.join(uri, "__commits")) if f.endswith(".del")]


def test_encrypted_deletes_and_consolidation_with_tiledb(flightd_bin, tmp_path):
    """An encrypted sparse array (AES-256-GCM): TileDB's delete commit is
    read by us, ours by TileDB (both encrypted with the array's key), and our
    consolidation over them is read by TileDB at every timestamp as before."""
    key = "0123456789abcdeF0123456789abcdeF"
    ctx = tiledb.Ctx(tiledb.Config({"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": key}))
    data = tmp_path / "data"
    data.mkdir()
    uri = str(data / "enc")
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 100), tile=10, dtype=np.int64), ctx=ctx)
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr("v", dtype=np.int64, ctx=ctx)], ctx=ctx), ctx=ctx)
    for t in (1, 2):
        with tiledb.open(uri, "w", timestamp=t, ctx=ctx) as A:
            A[np.arange(t, t + 10)] = {"v": np.arange(t, t + 10) * 10 + t}
    with tiledb.open(uri, "d", timestamp=3, ctx=ctx) as A:
        A.query(cond="v > 80").submit()

    def view(ts):
        with tiledb.open(uri, timestamp=ts, ctx=ctx) as A:
            r = A.query()[:]
        return sorted(zip(r["k"].tolist(), r["v"].tolist()))

    d = Daemon(flightd_bin, data, env={"TILEFLIGHT_ENCRYPTION_KEY": key})
    try:
        c = d.client()

        def ours(ts):
            got = read(c, array="enc", timestamp=ts)
            return sorted(zip(got.column("k").to_pylist(), got.column("v").to_pylist()))

        assert ours(3) == view(3) and ours(2) == view(2)
        action(c, "delete", {"array": "enc", "filter": "k < 4", "timestamp": 4})
        before = {ts: view(ts) for ts in (1, 2, 3, 4)}
        assert ours(4) == before[4] and len(before[4]) < len(before[3])
        action(c, "consolidate", {"array": "enc", "mode": "fragments"})
        assert len(tiledb.array_fragments(uri, ctx=ctx)) == 1
        for ts in (1, 2, 3, 4):
            assert view(ts) == ours(ts) == before[ts], ts
    finally:
        d.stop()
