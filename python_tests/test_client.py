"""The tileflight Python package (python/) against the real daemon.

Every Client call is driven against flightd; TileDB (the tiledb package)
writes what is read and reads what is written, so each result is checked
against the reference. Errors must arrive as tileflight exception classes
with the gRPC code and the daemon's message; reader() and write() must
stream (their Arrow memory stays at a few batches whatever the size)."""

import io
import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.flight as fl
import pytest
import tiledb

import tileflight
from tileflight import errors
from flightd_fixture import Daemon, flightd, flightd_bin  # noqa: F401

ROWS, COLS = 300, 40


@pytest.fixture(scope="module")
def client(flightd):
    c = tileflight.connect(flightd.url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def dense(flightd):
    """A 300 x 40 dense array (tiles 25 x 20) with an int32 and a float64
    attribute, written by TileDB in one fragment."""
    uri = os.path.join(flightd.data, "pyc", "dense")
    os.makedirs(os.path.dirname(uri), exist_ok=True)
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, ROWS - 1), tile=25, dtype=np.int64),
                        tiledb.Dim("c", domain=(0, COLS - 1), tile=20, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("a", dtype=np.int32, filters=[tiledb.ZstdFilter()]),
        tiledb.Attr("b", dtype=np.float64)]))
    r = np.arange(ROWS)[:, None]
    c = np.arange(COLS)[None, :]
    with tiledb.open(uri, "w", timestamp=100) as A:
        A[:] = {"a": (r * 1000 + c).astype(np.int32), "b": (r * 0.5 - c * 0.25).astype(np.float64)}
    return "pyc/dense", uri


def sparse_schema(name, nullable=False):
    return {"array": name, "type": "sparse", "cell_order": "row-major", "tile_order": "row-major",
            "capacity": 1000, "allows_duplicates": False,
            "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999999], "tile": 10000}],
            "attributes": [{"name": "v", "type": "float64", "nullable": nullable},
                           {"name": "s", "type": "string_utf8", "cell_val_num": "var"}]}


def tiledb_df(uri, **kw):
    """TileDB's read of the whole array as a DataFrame, dimensions first
    (built from A.query()[:]: TileDB-Py's .df needs pandas < 3)."""
    with tiledb.open(uri, **kw) as A:
        dims = [A.schema.domain.dim(i).name for i in range(A.schema.ndim)]
        attrs = [A.schema.attr(i).name for i in range(A.schema.nattr)]
        d = A.query(dims=dims, attrs=attrs)[:]
    cols = {}
    for k in dims + attrs:
        v = d[k]
        if isinstance(v, np.ma.MaskedArray):
            v = v.astype(np.float64).filled(np.nan)
        cols[k] = np.asarray(v).ravel()
    return pd.DataFrame(cols)


def sparse_table(lo, hi):
    x = np.arange(lo, hi, dtype=np.int64)
    return pa.table({"x": x, "v": x * 0.5, "s": [f"s{i}" for i in x]})


# -- calls and their answers -------------------------------------------------------------


def test_create_describe_arrays_drop(client, flightd):
    schema = client.create(sparse_schema("pyc/created"))
    uri = os.path.join(flightd.data, "pyc", "created")
    with tiledb.open(uri) as A:  # TileDB opens what create made
        assert A.schema.sparse and [A.schema.attr(i).name for i in range(A.schema.nattr)] == ["v", "s"]
        assert A.schema.domain.dim(0).domain == (0, 999999)
    assert schema["array"] == "pyc/created"
    d = client.describe("pyc/created")
    assert d["type"] == "sparse" and [a["name"] for a in d["attributes"]] == ["v", "s"]
    assert "pyc/created" in client.arrays()
    assert client.arrays(prefix="pyc/") == sorted(client.arrays(prefix="pyc/"))
    assert all(n.startswith("pyc/") for n in client.arrays(prefix="pyc/"))
    # name= overrides, describe's output creates a twin.
    d2 = client.create(d, name="pyc/created2")
    assert d2["array"] == "pyc/created2" and d2["attributes"] == d["attributes"]
    with pytest.raises(tileflight.AlreadyExists) as e:
        client.create(sparse_schema("pyc/created"))
    assert e.value.code == "ALREADY_EXISTS" and "pyc/created" in e.value.message
    client.drop("pyc/created2")
    assert tiledb.object_type(os.path.join(flightd.data, "pyc", "created2")) is None
    assert "pyc/created2" not in client.arrays()
    with pytest.raises(tileflight.NotFound):
        client.drop("pyc/created2")


def test_read_equals_tiledb(client, dense):
    name, uri = dense
    with tiledb.open(uri) as A:
        ref = A.query(attrs=["a", "b"], dims=["r", "c"]).multi_index[10:59, 5:24]
    t = client.read(name, subarray={"r": (10, 59), "c": (5, 24)})
    assert t.column_names == ["r", "c", "a", "b"]
    for k in ("r", "c", "a", "b"):
        np.testing.assert_array_equal(t.column(k).to_numpy(), ref[k].ravel())
    # columns, a single value, several ranges
    t = client.read(name, columns=["b"], subarray={"r": 7, "c": [(0, 1), (30, 31)]})
    with tiledb.open(uri) as A:
        ref = A.multi_index[7:7, [slice(0, 1), slice(30, 31)]]["b"].ravel()
    assert t.column_names == ["b"]
    np.testing.assert_array_equal(t.column("b").to_numpy(), ref)


def test_read_parallel_endpoints_in_order(client, dense):
    name, uri = dense
    info = client.flight_info(name, partitions=6)
    assert len(info.endpoints) > 1
    whole = client.read(name, partitions=1)
    for workers in (1, 4):
        t = client.read(name, partitions=6, max_workers=workers)
        assert t.equals(whole)
    with tiledb.open(uri) as A:
        ref = A[:]
    np.testing.assert_array_equal(whole.column("a").to_numpy(), ref["a"].ravel())
    assert info.total_records == ROWS * COLS


def test_read_pandas_and_index(client, dense):
    name, uri = dense
    df = client.read_pandas(name, subarray={"r": (0, 4)})
    ref = tiledb_df(uri).query("r <= 4").reset_index(drop=True)
    pd.testing.assert_frame_equal(df, ref[df.columns.tolist()], check_dtype=True)
    di = client.read_pandas(name, subarray={"r": (0, 4)}, index=True)
    assert list(di.index.names) == ["r", "c"] and list(di.columns) == ["a", "b"]
    assert client.read_pandas(name, columns=["r", "a"], subarray={"r": 3}, index=["r"]).index.name == "r"


def test_reader_streams_and_duckdb(client, dense):
    name, uri = dense
    r = client.reader(name, batch_rows=1000, partitions=3)
    assert isinstance(r, pa.RecordBatchReader)
    sizes = [b.num_rows for b in r]
    assert max(sizes) <= 1000 and sum(sizes) == ROWS * COLS
    import duckdb
    rel = client.reader(name, columns=["a", "b"])
    got = duckdb.sql("select count(*), sum(a), sum(b) from rel").fetchall()[0]
    with tiledb.open(uri) as A:
        ref = A[:]
    assert got[0] == ROWS * COLS and got[1] == int(ref["a"].astype(np.int64).sum())
    assert got[2] == pytest.approx(float(ref["b"].sum()))


def test_schema_and_flight_info(client, dense):
    name, _ = dense
    s = client.schema(name, columns=["b", "r"])
    assert s.names == ["b", "r"] and s.field("b").type == pa.float64()
    assert s.field("r").metadata[b"tiledb.role"] == b"dimension"
    info = client.flight_info(name, subarray={"r": (0, 9)})
    assert info.total_records == 10 * COLS


def test_timestamp(client, flightd):
    client.create(sparse_schema("pyc/ts"))
    client.write("pyc/ts", sparse_table(0, 10), timestamp=1000)
    client.write("pyc/ts", sparse_table(5, 20), timestamp=2000)
    assert client.read("pyc/ts", timestamp=1500).num_rows == 10
    assert client.read("pyc/ts").num_rows == 20
    assert client.read("pyc/ts", timestamp=(1500, 2500)).num_rows == 15
    frags = client.fragments("pyc/ts")
    uri = os.path.join(flightd.data, "pyc", "ts")
    fi = tiledb.FragmentInfoList(uri)
    assert [f["timestamps"] for f in frags] == [list(f.timestamp_range) for f in fi]
    assert [f["cell_num"] for f in frags] == [f.cell_num for f in fi]
    assert len(client.fragments("pyc/ts", timestamp=1500)) == 1


# -- writes ------------------------------------------------------------------------------


def test_write_table_dataframe_reader_iterable(client, flightd):
    name = "pyc/w"
    client.create(sparse_schema(name, nullable=True))
    uri = os.path.join(flightd.data, "pyc", "w")
    res = client.write(name, sparse_table(0, 1000), batch_rows=300)
    assert isinstance(res, tileflight.WriteResult) and res.rows == 1000 and len(res.fragments) == 1
    assert res["rows"] == 1000
    df = sparse_table(1000, 2000).to_pandas()
    df.loc[3, "v"] = None
    assert client.write(name, df, batch_rows=128).rows == 1000
    t3 = sparse_table(2000, 3000)
    assert client.write(name, pa.RecordBatchReader.from_batches(t3.schema, t3.to_batches(200))).rows == 1000
    assert client.write(name, iter(sparse_table(3000, 3100).to_batches(30))).rows == 100
    assert client.write(name, sparse_table(3100, 3110).to_pydict()).rows == 10
    # a DataFrame with the dimension as its index (read_pandas(index=True) output)
    assert client.write(name, sparse_table(3110, 3120).to_pandas().set_index("x")).rows == 10
    ref = tiledb_df(uri).sort_values("x").reset_index(drop=True)
    assert len(ref) == 3120 and ref["x"].tolist() == list(range(3120))
    assert ref["s"].tolist() == [f"s{i}" for i in range(3120)]
    assert np.isnan(ref["v"][1003]) and ref["v"][1004] == 502.0
    assert len(tiledb.FragmentInfoList(uri)) == 6


def test_write_polars_stream(client):
    import polars as pl
    client.create(sparse_schema("pyc/pl"))
    frame = pl.DataFrame({"x": [1, 2, 3], "v": [1.0, 2.0, 3.0], "s": ["a", "b", "c"]})
    assert client.write("pyc/pl", frame).rows == 3
    assert client.read("pyc/pl").column("s").to_pylist() == ["a", "b", "c"]


def test_write_dense_subarray(client, flightd):
    name = "pyc/dw"
    client.create({"array": name, "type": "dense",
                   "dimensions": [{"name": "r", "type": "int32", "domain": [0, 9], "tile": 5},
                                  {"name": "c", "type": "int32", "domain": [0, 9], "tile": 5}],
                   "attributes": [{"name": "a", "type": "int64"}]})
    vals = np.arange(12, dtype=np.int64)
    client.write(name, pa.table({"a": vals}), subarray={"r": (2, 4), "c": (3, 6)})
    with tiledb.open(os.path.join(flightd.data, "pyc", "dw")) as A:
        np.testing.assert_array_equal(A[2:5, 3:7]["a"], vals.reshape(3, 4))
    client.write(name, pa.table({"a": vals}), subarray={"r": (2, 4), "c": (3, 6)}, layout="col-major")
    with tiledb.open(os.path.join(flightd.data, "pyc", "dw")) as A:
        np.testing.assert_array_equal(A[2:5, 3:7]["a"], vals.reshape(4, 3).T)


def test_write_refused_leaves_array_unchanged(client, flightd):
    name = "pyc/wbad"
    client.create(sparse_schema(name))
    client.write(name, sparse_table(0, 10))
    uri = os.path.join(flightd.data, "pyc", "wbad")
    before = sorted(os.listdir(os.path.join(uri, "__fragments")))
    with pytest.raises(tileflight.InvalidArgument) as e:  # unknown column
        client.write(name, pa.table({"x": [1], "v": [1.0], "s": ["a"], "zz": [1]}))
    assert e.value.code == "INVALID_ARGUMENT" and "zz" in e.value.message
    with pytest.raises(tileflight.InvalidArgument):  # outside the domain, in a later batch
        bad = sparse_table(10, 2010).to_pydict()
        bad["x"][-1] = 5_000_000
        client.write(name, pa.table(bad), batch_rows=100)

    def failing():  # the caller's own data fails half-way: nothing is committed
        yield sparse_table(100, 200).to_batches()[0]
        raise RuntimeError("source broke")
    with pytest.raises(RuntimeError, match="source broke"):
        client.write(name, failing())
    with pytest.raises(TypeError):
        client.write(name, 42)
    assert sorted(os.listdir(os.path.join(uri, "__fragments"))) == before
    assert len(tiledb_df(uri)) == 10


# -- metadata and actions ----------------------------------------------------------------


def test_metadata(client, flightd):
    name = "pyc/meta"
    client.create(sparse_schema(name))
    assert client.metadata(name) == {}
    assert client.put_metadata(name, {"unit": "K", "n": 3, "scale": 0.5, "xs": [1, 2, 3]}) == 4
    got = client.metadata(name)
    assert got == {"unit": "K", "n": 3, "scale": 0.5, "xs": [1, 2, 3]}
    with tiledb.open(os.path.join(flightd.data, "pyc", "meta")) as A:
        assert A.meta["unit"] == "K" and A.meta["n"] == 3 and tuple(A.meta["xs"]) == (1, 2, 3)


def test_list_actions_and_generic_action(client):
    acts = client.list_actions()
    assert {"describe", "list_arrays", "create_array", "put_metadata"} <= set(acts)
    assert client.action("list_arrays") == client.arrays()


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("call, cls, code, builtin", [
    (lambda c: c.describe("pyc/nope"), tileflight.NotFound, "NOT_FOUND", LookupError),
    (lambda c: c.read("pyc/nope"), tileflight.NotFound, "NOT_FOUND", LookupError),
    (lambda c: c.metadata("pyc/nope"), tileflight.NotFound, "NOT_FOUND", LookupError),
    (lambda c: c.read("pyc/dense", columns=["zz"]), tileflight.InvalidArgument, "INVALID_ARGUMENT", ValueError),
    (lambda c: c.read("pyc/dense", subarray={"r": (0, 10**6)}), tileflight.InvalidArgument,
     "INVALID_ARGUMENT", ValueError),
    (lambda c: c.read("../etc"), tileflight.InvalidArgument, "INVALID_ARGUMENT", ValueError),
    (lambda c: c.action("no_such_action"), tileflight.InvalidArgument, "INVALID_ARGUMENT", ValueError),
    (lambda c: list(c.reader("pyc/dense", layout="diagonal")), tileflight.InvalidArgument,
     "INVALID_ARGUMENT", ValueError),
])
def test_errors_keep_code_and_message(client, dense, call, cls, code, builtin):
    with pytest.raises(cls) as e:
        call(client)
    err = e.value
    assert isinstance(err, tileflight.TileflightError) and isinstance(err, builtin)
    assert err.code == code and str(err).startswith(code + ": ")
    # the daemon's own message, without pyarrow's decorations
    assert err.message and "gRPC client debug context" not in err.message
    assert "Flight returned" not in err.message
    assert isinstance(e.value.__cause__, (pa.ArrowException, fl.FlightError))


def test_error_text_parsing():
    cases = [
        ("Flight returned not found error, with message: no such array \"a\". gRPC client debug context: "
         "NOT_FOUND:no such array. Client context: IOError: x", errors.NotFound, 'no such array "a"'),
        ("Flight returned invalid argument error, with message: bad JSON", errors.InvalidArgument, "bad JSON"),
        ("gRPC returned precondition failed error, with message: no key", errors.FailedPrecondition, "no key"),
        ("Flight returned unimplemented error, with message: b2nd", errors.Unimplemented, "b2nd"),
        ("Flight returned internal error, with message: bug", errors.Internal, "bug"),
        ("gRPC returned aborted error, with message: conflict", errors.Aborted, "conflict"),
    ]
    for text, cls, msg in cases:
        e = errors.from_arrow(pa.ArrowException(text))
        assert type(e) is cls and e.message == msg, (text, e)
    assert errors.from_arrow(pa.ArrowException("odd")).code == "UNKNOWN"


def test_unreachable_daemon():
    c = tileflight.connect("grpc://127.0.0.1:1")
    with pytest.raises(tileflight.Unavailable) as e:
        c.arrays()
    assert e.value.code == "UNAVAILABLE" and isinstance(e.value, ConnectionError)


def test_tokens(flightd_bin, tmp_path):
    d = Daemon(flightd_bin, tmp_path / "data", env={"TILEFLIGHT_TOKENS": "tok-rw:rw,tok-ro:ro"})
    try:
        with pytest.raises(tileflight.Unauthenticated):
            tileflight.connect(d.url).arrays()
        with pytest.raises(tileflight.Unauthenticated):
            tileflight.connect(d.url, token="wrong").arrays()
        rw = tileflight.connect(d.url, token="tok-rw")
        rw.create(sparse_schema("a"))
        rw.write("a", sparse_table(0, 5))
        ro = tileflight.connect(d.url, token="tok-ro")
        assert ro.read("a", partitions=2).num_rows == 5
        with pytest.raises(tileflight.PermissionDenied) as e:
            ro.write("a", sparse_table(5, 6))
        assert e.value.code == "PERMISSION_DENIED"
        with pytest.raises(tileflight.PermissionDenied):
            ro.put_metadata("a", {"k": 1})
    finally:
        d.stop()


# -- streaming in constant memory ------------------------------------------------------------


@pytest.fixture(scope="module")
def big(flightd):
    """4 Mi float64 cells (32 MiB) in a dense array, written by TileDB."""
    uri = os.path.join(flightd.data, "pyc", "big")
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, (4 << 20) - 1), tile=1 << 18, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False,
                                                attrs=[tiledb.Attr("v", dtype=np.float64)]))
    with tiledb.open(uri, "w") as A:
        A[:] = np.arange(4 << 20, dtype=np.float64)
    return "pyc/big"


def rss():
    """This process's resident set size in bytes (Flight's buffers come from
    gRPC, not Arrow's memory pool, so only the RSS sees them)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_reader_constant_memory(client, big):
    """Consuming reader() batch by batch keeps the RSS within a few batches
    of where it started, not the 64 MiB (i and v) of the result; read()
    of the same data does grow by it."""
    list(client.reader(big, subarray={"i": (0, 1 << 20)}))  # warm up gRPC and the allocator
    base = rss()
    peak, rows, total = 0, 0, 0.0
    for b in client.reader(big, batch_rows=65536, partitions=4):
        rows += b.num_rows
        total += pa.compute.sum(b.column("v")).as_py()
        peak = max(peak, rss() - base)
        del b
    n = 4 << 20
    assert rows == n and total == float(n * (n - 1) // 2)
    assert peak < 24 << 20, f"reader() grew the RSS by {peak >> 20} MiB"
    t = client.read(big)  # read() materializes: for contrast
    assert t.num_rows == n and rss() - base >= 40 << 20
    del t


def test_write_streams_constant_memory(client):
    """A write from a generator of batches keeps the RSS within a few
    batches, not the ~60 MiB it sends."""
    client.create(sparse_schema("pyc/wbig"))
    schema = pa.schema([("x", pa.int64()), ("v", pa.float64()), ("s", pa.large_utf8())])

    def make(lo):  # one batch of 64 Ki rows (3.9 MiB)
        x = np.arange(lo, lo + (1 << 16), dtype=np.int64)
        return pa.record_batch([pa.array(x), pa.array(x * 0.5),
                                pa.array(["abcdefghijklmnopqrstuvwxyz0123456789"] * len(x), pa.large_utf8())],
                               schema=schema)

    # Warm up with one batch of the same shape: what the first such batch
    # and the first write of that size cost the process (Arrow's and
    # gRPC's pools) is there whatever streams, and run alone this test
    # would count it.
    client.write("pyc/wbig", make(0))  # the stream writes these cells again
    base = rss()
    peak = [0]

    def gen():
        for lo in range(0, 15 << 16, 1 << 16):  # 983040 rows, 15 batches of 64 Ki
            b = make(lo)
            peak[0] = max(peak[0], rss() - base)
            yield b
    res = client.write("pyc/wbig", pa.RecordBatchReader.from_batches(schema, gen()))
    assert res.rows == 983040
    assert peak[0] < 24 << 20, f"write() grew the RSS by {peak[0] >> 20} MiB"
    assert client.read("pyc/wbig", columns=["x"]).num_rows == 983040


# -- progress ----------------------------------------------------------------------------


def test_progress_bar(client, dense, capsys):
    client.read(dense[0], progress=True)
    err = capsys.readouterr().err
    assert "pyc/dense" in err and "rows" in err
    client.read(dense[0], progress=False)
    assert capsys.readouterr().err == ""
    client.read(dense[0])  # not a terminal under pytest: no bar
    assert capsys.readouterr().err == ""


# -- filter, staged writes and the lifecycle actions (docs/protocol.md, "Array lifecycle") ----------------


def test_filter_equals_tiledb_condition(client, flightd):
    name = "pyc/cond"
    client.create(sparse_schema(name, nullable=True))
    t = sparse_table(0, 2000).to_pydict()
    t["v"] = [None if i % 9 == 0 else v for i, v in enumerate(t["v"])]
    client.write(name, pa.table(t, schema=pa.schema([("x", pa.int64()), ("v", pa.float64()), ("s", pa.utf8())])))
    uri = os.path.join(flightd.data, "pyc", "cond")
    for cond in ["v > 300.5", "v < 10 and s in ['s1', 's2', 's3']", "x >= 1500 or v == None", "s == 's77'"]:
        got = client.read(name, filter=cond).sort_by("x")
        with tiledb.open(uri) as A:
            ref = A.query(cond=cond)[:]
        np.testing.assert_array_equal(got.column("x").to_numpy(), np.sort(ref["x"]), err_msg=cond)
    with pytest.raises(tileflight.InvalidArgument) as e:
        client.read(name, filter="v >")
    assert "v >" in e.value.message or "position" in e.value.message or "filter" in e.value.message


def test_staged_write_commit_and_abort(client, flightd):
    name = "pyc/stage"
    client.create(sparse_schema(name))
    uri = os.path.join(flightd.data, "pyc", "stage")
    a = client.write(name, sparse_table(0, 100), stage=True)
    b = client.write(name, sparse_table(100, 250), stage=True)
    assert a["staged"] is True and a.rows == 100 and len(a.fragments) == 1
    assert client.read(name).num_rows == 0 and len(tiledb.FragmentInfoList(uri)) == 0  # invisible
    res = client.commit_fragments(name, a.fragments + b.fragments)
    assert sorted(res["committed"]) == sorted(a.fragments + b.fragments)
    assert client.read(name).num_rows == 250
    with tiledb.open(uri) as A:
        assert sorted(A[:]["x"].tolist()) == list(range(250))
    c = client.write(name, sparse_table(300, 400), stage=True)
    assert client.abort_fragments(name, c.fragments)["aborted"] == c.fragments
    assert not any(os.path.exists(os.path.join(uri, "__fragments", f)) for f in c.fragments)
    assert client.read(name).num_rows == 250
    with pytest.raises(tileflight.NotFound):
        client.commit_fragments(name, ["__1_1_" + "0" * 32 + "_22"])
    with pytest.raises(tileflight.InvalidArgument):
        client.commit_fragments(name, [])


def test_consolidate_vacuum_delete_evolve(client, flightd):
    name = "pyc/life"
    client.create({"array": name, "type": "dense",
                   "dimensions": [{"name": "r", "type": "int64", "domain": [0, 99], "tile": 10}],
                   "attributes": [{"name": "a", "type": "int32"}]})
    uri = os.path.join(flightd.data, "pyc", "life")
    for i in range(3):
        client.write(name, {"a": np.full(10, i, np.int32)}, subarray={"r": (i * 10, i * 10 + 9)})
    before = client.read(name)
    res = client.consolidate(name)
    assert res["mode"] == "fragments" and len(res["consolidated"]) == 3
    vac = client.vacuum(name)
    assert vac["removed"]
    assert len(tiledb.FragmentInfoList(uri)) == 1 and client.read(name).equals(before)
    with tiledb.open(uri) as A:
        np.testing.assert_array_equal(A[0:30]["a"], np.repeat(np.arange(3, dtype=np.int32), 10))
    with pytest.raises(tileflight.InvalidArgument):
        client.consolidate(name, mode="everything")
    # delete (sparse arrays) and schema evolution
    sp = "pyc/life_sparse"
    client.create(sparse_schema(sp))
    client.write(sp, sparse_table(0, 50), timestamp=1000)
    assert client.delete(sp, "x < 20", timestamp=2000)["commit"].endswith(".del")
    assert client.read(sp).num_rows == 30 and client.read(sp, timestamp=1500).num_rows == 50
    with tiledb.open(os.path.join(flightd.data, "pyc", "life_sparse")) as A:
        assert sorted(A[:]["x"].tolist()) == list(range(20, 50))
    new = client.evolve_schema(sp, add_attributes=[{"name": "n", "type": "int32", "fill": 7}])
    assert [a["name"] for a in new["attributes"]] == ["v", "s", "n"]
    assert set(client.read(sp, columns=["n"]).column("n").to_pylist()) == {7}
    with pytest.raises(tileflight.InvalidArgument):
        client.delete(name, "a < 1")  # dense arrays have no deletes


def test_package_installed_and_typed():
    """make setup installs the package into the venv (pip knows it), and it
    ships py.typed for type checkers."""
    import importlib.metadata
    assert importlib.metadata.version("tileflight") == tileflight.__version__
    assert os.path.isfile(os.path.join(os.path.dirname(tileflight.__file__), "py.typed"))
    assert tileflight.connect.__doc__ and tileflight.Client.read.__doc__
