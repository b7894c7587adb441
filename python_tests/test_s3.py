"""flightd on S3-compatible storage (-data s3://bucket/prefix), against a
real S3 server (moto, see s3_fixture.py) that TileDB's own S3 VFS uses too.

- TileDB writes arrays into the bucket; flightd serves them exactly.
- flightd writes fragments into the bucket; TileDB reads them exactly.
- A subset of the reader conformance suites reruns with the daemon on S3:
  differential cases of test_diff_reader.py, and cases of the fixture
  matrix, read through S3 and compared with TileDB / the local daemon.
- Faults injected between flightd and the server (503s, throttling,
  truncated bodies, stalls) are retried, or give the right gRPC code, and a
  write that fails never leaves a partial commit."""

import concurrent.futures as cf
import json
import os
import random
import sys

import numpy as np
import pyarrow as pa
import pytest
import tiledb

from flightd_fixture import Daemon, action, cmd, expect_code, flightd_bin, put, read, read_ticket  # noqa: F401
from s3_fixture import S3_ENV, FaultProxy, moto, s3_flags, tiledb_ctx, upload_tree  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


@pytest.fixture(scope="module")
def bucket(moto):
    return moto.new_bucket()


@pytest.fixture(scope="module")
def s3d(flightd_bin, moto, bucket):
    d = Daemon(flightd_bin, f"s3://{bucket}/data", args=s3_flags(moto.url), env=S3_ENV)
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="module")
def ctx(moto):
    return tiledb_ctx(moto.url)


def write_tiledb_arrays(base, ctx):
    """A dense array with two fragments and a sparse one with strings and
    nulls, written by TileDB straight into the bucket."""
    dense = base + "/t/dense"
    dom = tiledb.Domain(tiledb.Dim("r", domain=(1, 40), tile=8, dtype=np.int32),
                        tiledb.Dim("c", domain=(1, 30), tile=7, dtype=np.int32))
    tiledb.Array.create(dense, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("a", dtype=np.int64, filters=[tiledb.ZstdFilter()]),
        tiledb.Attr("f", dtype=np.float32)]), ctx=ctx)
    a = np.arange(40 * 30, dtype=np.int64).reshape(40, 30)
    with tiledb.open(dense, "w", timestamp=1, ctx=ctx) as A:
        A[:] = {"a": a, "f": (a / 3).astype(np.float32)}
    with tiledb.open(dense, "w", timestamp=2, ctx=ctx) as A:
        A[5:12, 3:9] = {"a": -np.ones((7, 6), dtype=np.int64), "f": np.zeros((7, 6), dtype=np.float32)}
    sparse = base + "/t/sparse"
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 10000), tile=500, dtype=np.int64))
    tiledb.Array.create(sparse, tiledb.ArraySchema(domain=dom, sparse=True, capacity=50, attrs=[
        tiledb.Attr("s", dtype=str, var=True), tiledb.Attr("n", dtype=np.int16, nullable=True)]), ctx=ctx)
    xs = np.arange(0, 10000, 13, dtype=np.int64)
    with tiledb.open(sparse, "w", timestamp=5, ctx=ctx) as A:
        A[xs] = {"s": np.array([f"v{x}" for x in xs], dtype=object),
                 "n": np.ma.masked_array((xs % 1000).astype(np.int16), mask=xs % 3 == 0)}
    return dense, sparse


def test_tiledb_writes_flightd_serves(s3d, bucket, ctx):
    dense, sparse = write_tiledb_arrays(f"s3://{bucket}/data", ctx)
    c = s3d.client()
    names = [a["name"] if isinstance(a, dict) else a for a in action(c, "list_arrays")]
    assert "t/dense" in names and "t/sparse" in names, names
    t = read(c, array="t/dense")
    with tiledb.open(dense, ctx=ctx) as A:
        ref = A[:]
    assert t.num_rows == 40 * 30
    assert t.column("a").to_numpy().tolist() == ref["a"].ravel().tolist()
    assert t.column("f").to_numpy().tolist() == ref["f"].ravel().tolist()
    # A subarray in col-major order.
    t = read(c, array="t/dense", columns=["a"], layout="col-major", subarray={"r": [[3, 17]], "c": [[2, 29]]})
    with tiledb.open(dense, ctx=ctx) as A:
        ref = A.multi_index[3:17, 2:29]["a"]
    assert t.column("a").to_numpy().tolist() == ref.ravel(order="F").tolist()
    # Sparse: strings and nulls, endpoints read in parallel.
    info = c.get_flight_info(cmd(array="t/sparse", partitions=3, layout="row-major"))
    assert len(info.endpoints) >= 2
    with cf.ThreadPoolExecutor(4) as ex:
        parts = list(ex.map(lambda e: read_ticket(c, e.ticket), info.endpoints))
    t = pa.concat_tables(parts)
    with tiledb.open(sparse, ctx=ctx) as A:
        ref = A.query(order="G")[:]
    assert t.column("x").to_pylist() == ref["x"].tolist()
    assert t.column("s").to_pylist() == list(ref["s"])
    n = ref["n"]
    want = ([None if m else int(v) for v, m in zip(n.data, np.ma.getmaskarray(n))]
            if np.ma.isMaskedArray(n) else n.tolist())
    assert t.column("n").to_pylist() == want
    c.close()


def test_flightd_writes_tiledb_reads(s3d, bucket, ctx):
    c = s3d.client()
    action(c, "create_array", {"array": "w/points", "type": "sparse", "capacity": 100,
                               "dimensions": [{"name": "x", "type": "int64", "domain": [0, 1 << 20], "tile": 4096}],
                               "attributes": [{"name": "v", "type": "float64", "filters": [{"name": "zstd"}]},
                                              {"name": "s", "type": "string_utf8", "cell_val_num": "var",
                                               "nullable": True}]})
    rng = np.random.default_rng(7)
    xs = rng.choice(1 << 20, 5000, replace=False).astype(np.int64)
    vs = rng.random(5000)
    ss = [None if i % 7 == 0 else f"s{i}" for i in range(5000)]
    res = put(c, "w/points", pa.table({"x": xs, "v": vs, "s": pa.array(ss, pa.large_utf8())}))
    assert res["rows"] == 5000
    with tiledb.open(f"s3://{bucket}/data/w/points", ctx=ctx) as A:
        got = A.query(order="G")[:]
    order = np.argsort(xs)
    assert got["x"].tolist() == xs[order].tolist()
    assert got["v"].tolist() == vs[order].tolist()
    want_s = [ss[i] for i in order]
    got_s = got["s"]
    if np.ma.isMaskedArray(got_s):
        got_s = [None if m else v for v, m in zip(got_s.data, got_s.mask)]
    assert [None if v is None else v for v in got_s] == want_s
    # Dense: created and written through Flight, read by TileDB.
    action(c, "create_array", {"array": "w/grid", "type": "dense",
                               "dimensions": [{"name": "i", "type": "int32", "domain": [0, 99], "tile": 16},
                                              {"name": "j", "type": "int32", "domain": [0, 49], "tile": 16}],
                               "attributes": [{"name": "z", "type": "int32", "filters": [{"name": "lz4"}]}]})
    z = np.arange(30 * 50, dtype=np.int32)
    put(c, cmd(array="w/grid", subarray={"i": [[10, 39]], "j": [[0, 49]]}), pa.table({"z": z}))
    with tiledb.open(f"s3://{bucket}/data/w/grid", ctx=ctx) as A:
        ref = A.multi_index[10:39, 0:49]["z"]
        assert A.nonempty_domain() == ((10, 39), (0, 49))
    assert ref.ravel().tolist() == z.tolist()
    # And flightd reads its own write back through S3.
    t = read(c, array="w/grid", subarray={"i": [[10, 39]]})
    assert t.column("z").to_numpy().tolist() == z.tolist()
    c.close()


def test_inspect_and_demo_on_s3(flightd_bin, moto):
    import subprocess
    b = moto.new_bucket()
    d = Daemon(flightd_bin, f"s3://{b}/demo", args=s3_flags(moto.url) + ["-demo"], env=S3_ENV)
    try:
        c = d.client()
        t = read(c, array="demo/dense", subarray={"x": [[0, 0]], "y": [[0, 0]]})
        assert t.num_rows == 1
        c.close()
    finally:
        d.stop()
    out = subprocess.run([flightd_bin, "inspect", *s3_flags(moto.url), f"s3://{b}/demo/demo/points"],
                         capture_output=True, text=True, env=dict(os.environ, **S3_ENV), timeout=60)
    assert out.returncode == 0, out.stderr
    assert "points" in out.stdout or "sparse" in out.stdout, out.stdout


# ------------------------------------------------------- conformance subsets

def test_diff_reader_cases_on_s3(flightd_bin, moto, tmp_path):
    """Differential cases of test_diff_reader.py (random arrays, random
    queries, TileDB's answer as the reference), served from S3."""
    import test_diff_reader as dr
    saved = dr.N_ARRAYS
    dr.N_ARRAYS = 8
    try:
        arrays = dr.build_arrays(str(tmp_path))
    finally:
        dr.N_ARRAYS = saved
    b = moto.new_bucket()
    upload_tree(moto.client(), str(tmp_path), b, "p")
    d = Daemon(flightd_bin, f"s3://{b}/p", args=s3_flags(moto.url), env=S3_ENV)
    try:
        c = d.client()
        for name, uri, spec, times, rng in arrays:
            for _ in range(6):
                dr.run_case(c, uri, name, spec, times, rng)
        c.close()
    finally:
        d.stop()


def ipc_bytes(t):
    sink = pa.BufferOutputStream()
    t = t.combine_chunks()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()


FIXTURE_CASES = ["dense_1d", "dense_3d", "dense_all_types", "dense_nullable_fill", "sparse_string_dim",
                 "sparse_duplicates", "sparse_all_types", "var_nullable", "filters", "consolidated_vacuumed",
                 "consolidated_commits", "delete", "enumerations", "evolved_schema", "metadata"]


def test_fixture_matrix_on_s3(flightd_bin, moto, fixtures_dir):
    """Cases of the fixture matrix (written by TileDB 2.30): the daemon on S3
    answers exactly as the daemon on the local directory."""
    arrays = os.path.join(fixtures_dir, "arrays")
    b = moto.new_bucket()
    cl = moto.client()
    for name in FIXTURE_CASES:
        upload_tree(cl, os.path.join(arrays, name), b, "m/" + name)
    local = Daemon(flightd_bin, arrays)
    remote = Daemon(flightd_bin, f"s3://{b}/m", args=s3_flags(moto.url), env=S3_ENV)
    try:
        lc, rc = local.client(), remote.client()
        for name in FIXTURE_CASES:
            sch = action(lc, "describe", {"array": name})
            assert action(rc, "describe", {"array": name}) == sch, name
            layout = "global" if sch["type"] == "sparse" else "row-major"
            want = read(lc, array=name, layout=layout)
            got = read(rc, array=name, layout=layout)
            assert ipc_bytes(got) == ipc_bytes(want), name  # bytewise: NaN == NaN
            assert action(rc, "list_fragments", {"array": name}) == action(lc, "list_fragments", {"array": name}), name
            assert action(rc, "get_metadata", {"array": name}) == action(lc, "get_metadata", {"array": name}), name
        lc.close()
        rc.close()
    finally:
        local.stop()
        remote.stop()


# ------------------------------------------------------------ fault injection

@pytest.fixture
def faulty(flightd_bin, moto):
    """A daemon whose S3 traffic goes through a FaultProxy, with an array
    written by TileDB; yields (daemon, proxy, bucket)."""
    b = moto.new_bucket()
    ctx = tiledb_ctx(moto.url)
    uri = f"s3://{b}/f/arr"
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99999), tile=5000, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=2000, attrs=[
        tiledb.Attr("v", dtype=np.float64)]), ctx=ctx)
    xs = np.arange(0, 100000, 3, dtype=np.int64)
    with tiledb.open(uri, "w", timestamp=1, ctx=ctx) as A:
        A[xs] = {"v": xs * 0.5}
    proxy = FaultProxy(moto.url)
    d = Daemon(flightd_bin, f"s3://{b}/f",
               args=s3_flags(proxy.url, "-s3-max-attempts", "4", "-s3-timeout", "1s"), env=S3_ENV)
    try:
        yield d, proxy, b, uri, ctx, xs
    finally:
        d.stop()
        proxy.close()


def data_get(method, path, query):
    return method == "GET" and "/__fragments/" in path and path.endswith(".tdb") \
        and "__fragment_metadata" not in path


def first(n, what, match=data_get):
    left = [n]

    def rule(method, path, query):
        if match(method, path, query) and left[0] > 0:
            left[0] -= 1
            return what
        return None
    return rule


@pytest.mark.parametrize("fault", ["503", "slowdown", "truncate", ("stall", 3)],
                         ids=["503", "throttled", "truncated", "stalled"])
def test_transient_faults_are_retried(faulty, fault):
    d, proxy, b, uri, ctx, xs = faulty
    proxy.rule = first(3 if fault != ("stall", 3) else 1, fault)
    c = d.client()
    t = read(c, array="arr", layout="global")
    assert proxy.seen > 0, "no fault was injected"
    assert t.column("x").to_pylist() == xs.tolist()
    assert t.column("v").to_pylist() == (xs * 0.5).tolist()
    c.close()


def test_persistent_faults_give_the_right_code(faulty):
    d, proxy, b, uri, ctx, xs = faulty
    c = d.client()
    proxy.rule = lambda m, p, q: "truncate" if data_get(m, p, q) else None
    msg = expect_code("DATA_LOSS", read, c, array="arr")
    assert "arr" in msg
    proxy.rule = lambda m, p, q: "503" if data_get(m, p, q) else None
    expect_code("UNAVAILABLE", read, c, array="arr")
    proxy.rule = lambda m, p, q: None
    assert read(c, array="arr").num_rows == len(xs)  # and it recovers
    c.close()


@pytest.mark.parametrize("where", ["commit", "data", "fragment_metadata"])
def test_failed_write_leaves_no_partial_commit(faulty, where):
    d, proxy, b, uri, ctx, xs = faulty

    def rule(method, path, query):
        if method != "PUT":
            return None
        if where == "commit" and "/__commits/" in path:
            return "503"
        if where == "data" and "/__fragments/" in path and "__fragment_metadata" not in path:
            return "503"
        if where == "fragment_metadata" and path.endswith("__fragment_metadata.tdb"):
            return "503"
        return None
    proxy.rule = rule
    c = d.client()
    new = pa.table({"x": pa.array([1, 2, 4], pa.int64()), "v": pa.array([9.0, 9.0, 9.0])})
    code = expect_code("UNAVAILABLE", put, c, "arr", new)
    assert proxy.seen > 0
    proxy.rule = lambda m, p, q: None
    # Neither flightd nor TileDB sees any of the failed write.
    assert read(c, array="arr").num_rows == len(xs)
    with tiledb.open(uri, ctx=ctx) as A:
        assert len(A[:]["x"]) == len(xs)
    assert len(tiledb.array_fragments(uri, ctx=ctx)) == 1
    # The next write goes through.
    put(c, "arr", new)
    assert read(c, array="arr").num_rows == len(xs) + 3  # 1, 2 and 4 are not multiples of 3
    c.close()
    del code
