"""The Flight service end to end: the real flightd binary, driven with
pyarrow.flight, checked against what the tiledb package reads and writes.

Arrays are written by TileDB itself into the daemon's data directory; reads
through Flight must equal TileDB's reads, and writes through Flight must read
back identically through TileDB."""

import concurrent.futures as cf
import json
import os
import re
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest
import tiledb

from flightd_fixture import (Daemon, action, as_pylist, cmd, expect_code, flightd, flightd_bin,  # noqa: F401
                             grpc_code, put, read, read_ticket, sort_table, ticket)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

ROWS, COLS = 20, 12


def dense_values():
    r = np.arange(1, ROWS + 1, dtype=np.int32)[:, None]
    c = np.arange(1, COLS + 1, dtype=np.int32)[None, :]
    return (r * 100 + c).astype(np.int32), (r * 0.5 + c * 0.25).astype(np.float64)


@pytest.fixture(scope="module")
def arrays(flightd):
    """A dense and a sparse array written by TileDB, plus the protocol example."""
    data = flightd.data
    os.makedirs(os.path.join(data, "t"), exist_ok=True)
    # Dense 20x12 with 5x4 tiles, two attributes.
    uri = os.path.join(data, "t", "dense2d")
    dom = tiledb.Domain(tiledb.Dim("rows", domain=(1, ROWS), tile=5, dtype=np.int32),
                        tiledb.Dim("cols", domain=(1, COLS), tile=4, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("a", dtype=np.int32, filters=[tiledb.ZstdFilter()]),
        tiledb.Attr("b", dtype=np.float64)]))
    a, b = dense_values()
    with tiledb.open(uri, "w") as A:
        A[:] = {"a": a, "b": b}
    # Sparse with an int64 dim, a string attribute and a float32.
    uri = os.path.join(data, "t", "sparse")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 999), tile=100, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=64, attrs=[
        tiledb.Attr("s", dtype=str), tiledb.Attr("f", dtype=np.float32)]))
    xs = np.arange(0, 1000, 7, dtype=np.int64)
    with tiledb.open(uri, "w", timestamp=10) as A:
        A[xs] = {"s": np.array([f"s{x}" for x in xs], dtype=object), "f": (xs / 2).astype(np.float32)}
    # docs/protocol.md, "Queries, tickets and descriptors": climate/temp with x, y, temp.
    os.makedirs(os.path.join(data, "climate"), exist_ok=True)
    uri = os.path.join(data, "climate", "temp")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 199), tile=50, dtype=np.int32),
                        tiledb.Dim("y", domain=(0, 99), tile=25, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False,
                                                attrs=[tiledb.Attr("temp", dtype=np.float32)]))
    temp = (np.arange(200 * 100, dtype=np.float32).reshape(200, 100) / 10)
    with tiledb.open(uri, "w", timestamp=1600000000000) as A:
        A[:] = temp
    return {"dense": "t/dense2d", "sparse": "t/sparse", "climate": "climate/temp"}


@pytest.fixture(scope="module")
def client(flightd):
    c = flightd.client()
    yield c
    c.close()


# ---------------------------------------------------------------- metadata RPCs

def test_list_flights_and_list_arrays(client, arrays):
    infos = list(client.list_flights())
    names = {"/".join(p.decode() for p in i.descriptor.path) for i in infos}
    assert {arrays["dense"], arrays["sparse"], arrays["climate"]} <= names
    for i in infos:
        assert i.descriptor.descriptor_type == fl.DescriptorType.PATH
        assert len(i.endpoints) >= 1
    dense = next(i for i in infos if i.descriptor.path == [arrays["dense"].encode()])
    assert dense.schema.names == ["rows", "cols", "a", "b"]
    only_t = {"/".join(p.decode() for p in i.descriptor.path) for i in client.list_flights(b"t/")}
    assert only_t == {arrays["dense"], arrays["sparse"]}
    assert set(action(client, "list_arrays")) >= names
    assert action(client, "list_arrays", {"prefix": "climate"}) == [arrays["climate"]]


def test_get_schema_types_and_field_metadata(client, arrays):
    s = client.get_schema(fl.FlightDescriptor.for_path(arrays["sparse"])).schema
    assert s.names == ["x", "s", "f"]
    assert s.field("x").type == pa.int64()
    assert s.field("s").type == pa.large_utf8()
    assert s.field("f").type == pa.float32()
    assert s.field("x").metadata[b"tiledb.role"] == b"dimension"
    assert s.field("s").metadata[b"tiledb.role"] == b"attribute"
    assert s.field("s").metadata[b"tiledb.datatype"] == b"string_utf8"
    # PATH split into segments, and a CMD with a column subset.
    s2 = client.get_schema(fl.FlightDescriptor.for_path("t", "sparse")).schema
    assert s2.names == s.names
    s3 = client.get_schema(cmd(array=arrays["dense"], columns=["b", "rows"])).schema
    assert s3.names == ["b", "rows"]


def test_get_flight_info_endpoints_and_total(client, arrays):
    info = client.get_flight_info(fl.FlightDescriptor.for_path(arrays["dense"]))
    assert info.total_records == ROWS * COLS
    assert len(info.endpoints) >= 1
    for e in info.endpoints:
        assert list(e.locations) == []
        json.loads(e.ticket.ticket)  # tickets are query JSON
    info4 = client.get_flight_info(cmd(array=arrays["dense"], partitions=4))
    assert len(info4.endpoints) == 4  # 20 rows in tiles of 5: four tile rows
    assert info4.total_records == ROWS * COLS
    sub = client.get_flight_info(cmd(array=arrays["dense"], subarray={"rows": [[2, 3]], "cols": [[1, 12]]}))
    assert sub.total_records == 24


def test_endpoints_read_in_parallel_equal_single_ticket(client, arrays):
    for name, parts in [(arrays["dense"], 4), (arrays["sparse"], 5), (arrays["climate"], 3)]:
        q = {"array": name, "partitions": parts}
        if name != arrays["sparse"]:
            q["layout"] = "row-major"
        info = client.get_flight_info(cmd(**q))
        assert len(info.endpoints) > 1, name
        with cf.ThreadPoolExecutor(len(info.endpoints)) as ex:
            tables = list(ex.map(lambda e: read_ticket(client, e.ticket), info.endpoints))
        q.pop("partitions")
        whole = read(client, **q)
        joined = pa.concat_tables(tables)
        assert joined.num_rows == whole.num_rows
        if name == arrays["sparse"]:
            keys = ["x"]
            assert sort_table(joined, keys).equals(sort_table(whole, keys))
        else:
            assert joined.equals(whole)  # row-major parts concatenate in order


# ---------------------------------------------------------------- reads vs TileDB

def test_dense_reads_match_tiledb(client, arrays, flightd):
    a, b = dense_values()
    t = read(client, array=arrays["dense"])
    assert t.num_rows == ROWS * COLS
    rr, cc = np.meshgrid(np.arange(1, ROWS + 1), np.arange(1, COLS + 1), indexing="ij")
    assert t.column("rows").to_numpy().tolist() == rr.ravel().tolist()
    assert t.column("cols").to_numpy().tolist() == cc.ravel().tolist()
    assert t.column("a").to_numpy().tolist() == a.ravel().tolist()
    assert t.column("b").to_numpy().tolist() == b.ravel().tolist()
    # col-major, a subarray and a column subset, checked against TileDB.
    uri = os.path.join(flightd.data, arrays["dense"])
    with tiledb.open(uri) as A:
        ref = A.query(attrs=["b"]).multi_index[3:9, 2:7]["b"]  # shaped (rows, cols)
    assert ref.shape == (7, 6)
    t = read(client, array=arrays["dense"], columns=["b"], layout="col-major",
             subarray={"rows": [[3, 9]], "cols": [[2, 7]]})
    assert t.column_names == ["b"]
    assert t.column("b").to_numpy().tolist() == ref.ravel(order="F").tolist()
    # Multi-range: the cross product in range order.
    t = read(client, array=arrays["dense"], columns=["rows", "cols", "a"],
             subarray={"rows": [[1, 2], [10, 11]], "cols": [[5, 5], [1, 2]]})
    want = [(r, c) for r in [1, 2, 10, 11] for c in [5, 1, 2]]
    assert list(zip(t.column("rows").to_pylist(), t.column("cols").to_pylist())) == want
    assert t.column("a").to_pylist() == [r * 100 + c for r, c in want]


def test_sparse_reads_match_tiledb(client, arrays, flightd):
    uri = os.path.join(flightd.data, arrays["sparse"])
    with tiledb.open(uri) as A:
        ref = A.multi_index[100:300]
    t = read(client, array=arrays["sparse"], subarray={"x": [[100, 300]]})
    t = sort_table(t, ["x"])
    order = np.argsort(ref["x"])
    assert t.column("x").to_pylist() == ref["x"][order].tolist()
    assert t.column("s").to_pylist() == list(ref["s"][order])
    assert t.column("f").to_pylist() == ref["f"][order].tolist()
    # row-major sparse order is by coordinate; batch_rows and limit.
    t = read(client, array=arrays["sparse"], layout="row-major", batch_rows=10, limit=25)
    assert t.num_rows == 25
    assert t.column("x").to_pylist() == sorted(t.column("x").to_pylist())
    batches = client.do_get(ticket(array=arrays["sparse"], batch_rows=10)).read_all().to_batches()
    assert all(b.num_rows <= 10 for b in batches)


def test_design_query_example(client, arrays, flightd):
    # The query of docs/protocol.md, "Queries, tickets and descriptors", verbatim.
    q = {"array": "climate/temp", "columns": ["x", "y", "temp"],
         "subarray": {"x": [[0, 99]], "y": [[10, 20], [30, 40]]}, "layout": "row-major",
         "timestamp": [0, 1700000000000], "batch_rows": 65536, "limit": 1000000, "partitions": 4}
    info = client.get_flight_info(cmd(**q))
    assert info.total_records == 100 * 22
    tables = [read_ticket(client, e.ticket) for e in info.endpoints]
    t = pa.concat_tables(tables)
    del q["partitions"]
    assert read(client, **q).equals(t)
    uri = os.path.join(flightd.data, "climate", "temp")
    with tiledb.open(uri, timestamp=(0, 1700000000000)) as A:
        ref = A.query(order="C").multi_index[[slice(0, 99)], [slice(10, 20), slice(30, 40)]]
    assert t.column("temp").to_numpy().tolist() == ref["temp"].ravel().tolist()
    assert t.column_names == ["x", "y", "temp"]
    # Before the write, the array holds only fill values.
    early = read(client, array="climate/temp", subarray={"x": [[0, 0]], "y": [[0, 3]]}, timestamp=1000)
    fill = np.finfo(np.float32).min  # TileDB's default fill for float32 is NaN or min; compare with TileDB
    with tiledb.open(uri, timestamp=(0, 1000)) as A:
        ref_early = A[0:1, 0:4]["temp"].ravel()
    got = early.column("temp").to_numpy()
    assert np.array_equal(got, ref_early, equal_nan=True), (got, ref_early, fill)


def test_pandas_duckdb_polars(client, arrays):
    import duckdb
    import polars as pl
    t = read(client, array=arrays["dense"])
    df = t.to_pandas()
    assert list(df.columns) == ["rows", "cols", "a", "b"]
    assert int(df["a"].sum()) == int(dense_values()[0].sum())
    reader = client.do_get(ticket(array=arrays["dense"], batch_rows=50))
    rbr = reader.to_reader()
    con = duckdb.connect()
    res = con.execute("SELECT rows, sum(a) AS s FROM rbr GROUP BY rows ORDER BY rows").fetchall()
    a = dense_values()[0]
    assert res == [(r + 1, int(a[r].sum())) for r in range(ROWS)]
    pdf = pl.from_arrow(read(client, array=arrays["sparse"]))
    assert pdf.height == len(range(0, 1000, 7))
    assert pdf.filter(pl.col("x") == 700)["s"].to_list() == ["s700"]


# ---------------------------------------------------------------- DoPut

def test_doput_sparse_roundtrip_with_conveniences(client, flightd):
    body = {"array": "w/sp", "type": "sparse", "capacity": 100,
            "dimensions": [{"name": "k", "type": "int64", "domain": [0, 100000], "tile": 1000},
                           {"name": "name", "type": "string_ascii", "cell_val_num": "var"}],
            "attributes": [{"name": "v", "type": "int32"},
                           {"name": "txt", "type": "string_utf8", "cell_val_num": "var", "nullable": True}]}
    action(client, "create_array", body)
    variants = [pa.utf8(), pa.large_utf8(), pa.string_view()]
    total = 0
    for i, st in enumerate(variants):
        n = 50
        ks = np.arange(i * n, (i + 1) * n, dtype=np.int64)[::-1]  # any order
        tbl = pa.table({
            "k": pa.array(ks),
            "name": pa.array([f"n{k}" for k in ks], type=st),
            "v": pa.array(ks * 3, type=pa.int64()),  # int64 -> int32, exact
            "txt": pa.array([None if k % 5 == 0 else f"é{k}" for k in ks], type=st),
        })
        res = put(client, cmd(array="w/sp", timestamp=1000 + i), tbl, chunk=17)
        assert res["rows"] == n and len(res["fragments"]) >= 1
        total += n
    uri = os.path.join(flightd.data, "w", "sp")
    with tiledb.open(uri) as A:
        ref = A[:]
        assert len(A.schema.domain) == 2
    assert len(ref["k"]) == total
    got = sort_table(read(client, array="w/sp"), ["k"])
    order = np.argsort(ref["k"])
    assert got.column("k").to_pylist() == ref["k"][order].tolist()
    assert got.column("v").to_pylist() == ref["v"][order].tolist()
    assert got.column("name").to_pylist() == [x.decode() if isinstance(x, bytes) else x for x in ref["name"][order]]
    want_txt = [None if k % 5 == 0 else f"é{k}" for k in got.column("k").to_pylist()]
    assert got.column("txt").to_pylist() == want_txt
    frags = action(client, "list_fragments", {"array": "w/sp"})
    assert [f["timestamps"] for f in frags] == [[1000, 1000], [1001, 1001], [1002, 1002]]
    assert sum(f["cell_num"] for f in frags) == total
    info = tiledb.array_fragments(uri)
    assert [f["name"] for f in frags] == [os.path.basename(u) for u in info.uri]


def test_doput_dense_roundtrip_row_and_col_major(client, flightd):
    body = {"array": "w/dn", "type": "dense",
            "dimensions": [{"name": "r", "type": "int32", "domain": [0, 9], "tile": 5},
                           {"name": "c", "type": "int32", "domain": [0, 9], "tile": 5}],
            "attributes": [{"name": "v", "type": "float64"}]}
    action(client, "create_array", body)
    block = np.arange(12, dtype=np.float64).reshape(3, 4)  # rows 2..4, cols 3..6
    put(client, cmd(array="w/dn", subarray={"r": [[2, 4]], "c": [[3, 6]]}, timestamp=5),
        pa.table({"v": block.ravel(order="C")}))
    put(client, cmd(array="w/dn", subarray={"r": [[6, 7]], "c": [[0, 1]]}, layout="col-major", timestamp=6),
        pa.table({"v": pa.array([100, 101, 102, 103], type=pa.int64())}))  # int -> float64, exact
    uri = os.path.join(flightd.data, "w", "dn")
    with tiledb.open(uri) as A:
        ref = A[:]["v"]
    assert ref[2:5, 3:7].tolist() == block.tolist()
    assert ref[6:8, 0:2].tolist() == [[100, 102], [101, 103]]
    got = read(client, array="w/dn", subarray={"r": [[0, 9]], "c": [[0, 9]]})
    assert np.array_equal(got.column("v").to_numpy(), ref.ravel(), equal_nan=True)


def fragment_count(flightd, name):
    return len(tiledb.array_fragments(os.path.join(flightd.data, name)))


def test_doput_refusals_are_atomic(client, flightd):
    body = {"array": "w/atomic", "type": "sparse",
            "dimensions": [{"name": "k", "type": "int32", "domain": [0, 1000], "tile": 10}],
            "attributes": [{"name": "v", "type": "int16"}]}
    action(client, "create_array", body)
    good = pa.table({"k": pa.array([1, 2], pa.int32()), "v": pa.array([1, 2], pa.int16())})
    put(client, "w/atomic", good)
    before = fragment_count(flightd, "w/atomic")
    bad = [
        ("missing column", pa.table({"k": pa.array([3], pa.int32())})),
        ("unknown column", pa.table({"k": pa.array([3], pa.int32()), "v": pa.array([3], pa.int16()),
                                     "zz": pa.array([1])})),
        ("wrong type", pa.table({"k": pa.array([3], pa.int32()), "v": pa.array(["x"])})),
        ("inexact cast", pa.table({"k": pa.array([3], pa.int32()), "v": pa.array([70000], pa.int64())})),
        ("out of domain", pa.table({"k": pa.array([3, 5000], pa.int32()), "v": pa.array([1, 2], pa.int16())})),
        ("null in non-nullable", pa.table({"k": pa.array([3], pa.int32()), "v": pa.array([None], pa.int16())})),
    ]
    for what, tbl in bad:
        msg = expect_code("INVALID_ARGUMENT", put, client, "w/atomic", tbl)
        assert "w/atomic" in msg, (what, msg)
    # A bad value in a later batch: the earlier batches are not written either.
    many = pa.table({"k": pa.array(list(range(10, 110)), pa.int32()),
                     "v": pa.array(list(range(99)) + [40000], pa.int32())})
    expect_code("INVALID_ARGUMENT", put, client, "w/atomic", many, chunk=10)
    # Dense: the row count must match the subarray.
    action(client, "create_array", {"array": "w/atomic_dense", "type": "dense",
                                    "dimensions": [{"name": "d", "type": "int32", "domain": [0, 9], "tile": 5}],
                                    "attributes": [{"name": "v", "type": "int32"}]})
    expect_code("INVALID_ARGUMENT", put, client, cmd(array="w/atomic_dense", subarray={"d": [[0, 4]]}),
                pa.table({"v": pa.array([1, 2, 3], pa.int32())}))
    expect_code("INVALID_ARGUMENT", put, client, cmd(array="w/atomic_dense", subarray={"d": [[0, 40]]}),
                pa.table({"v": pa.array([1], pa.int32())}))
    assert fragment_count(flightd, "w/atomic") == before
    assert fragment_count(flightd, "w/atomic_dense") == 0
    with tiledb.open(os.path.join(flightd.data, "w", "atomic")) as A:
        assert sorted(A[:]["k"].tolist()) == [1, 2]


def test_client_hangs_up_mid_put_leaves_nothing(client, flightd):
    action(client, "create_array", {"array": "w/hangup", "type": "sparse",
                                    "dimensions": [{"name": "k", "type": "int64", "domain": [0, 1 << 40], "tile": 1000}],
                                    "attributes": [{"name": "v", "type": "float64"}]})
    # A client process that dies with its DoPut half sent.
    script = f"""
import os, numpy as np, pyarrow as pa, pyarrow.flight as fl
c = fl.connect({flightd.url!r})
tbl = pa.table({{"k": pa.array(np.arange(100000, dtype=np.int64)), "v": pa.array(np.ones(100000))}})
w, r = c.do_put(fl.FlightDescriptor.for_path("w/hangup"), tbl.schema)
for b in tbl.to_batches(max_chunksize=10000)[:3]:
    w.write_batch(b)
os._exit(3)
"""
    import subprocess
    import sys
    assert subprocess.run([sys.executable, "-c", script], timeout=60).returncode == 3
    time.sleep(0.3)
    assert fragment_count(flightd, "w/hangup") == 0
    assert flightd.alive()


# ---------------------------------------------------------------- actions

EXAMPLE_SCHEMA = {"array": "points", "type": "sparse", "cell_order": "hilbert", "tile_order": "row-major",
                 "capacity": 10000, "allows_duplicates": False,
                 "dimensions": [{"name": "x", "type": "float64", "domain": [0, 1000], "tile": 100,
                                 "filters": [{"name": "zstd", "level": 3}]}],
                 "attributes": [{"name": "v", "type": "float32", "cell_val_num": 1, "nullable": True,
                                 "fill": 0, "filters": [{"name": "byteshuffle"}, {"name": "lz4"}]}],
                 "coords_filters": [], "offsets_filters": [], "validity_filters": []}


def test_actions_list_and_design_schema_lifecycle(client, flightd):
    kinds = {a.type: a.description for a in client.list_actions()}
    for k in ["list_arrays", "describe", "create_array", "drop_array", "list_fragments", "get_metadata", "put_metadata"]:
        assert kinds.get(k), k
    created = action(client, "create_array", EXAMPLE_SCHEMA)
    assert created["array"] == "points"
    desc = action(client, "describe", {"array": "points"})
    assert desc == created
    assert desc["cell_order"] == "hilbert" and desc["type"] == "sparse"
    assert desc["attributes"][0]["nullable"] is True
    assert [f["name"] for f in desc["attributes"][0]["filters"]] == ["byteshuffle", "lz4"]
    uri = os.path.join(flightd.data, "points")
    with tiledb.open(uri) as A:
        assert A.schema.cell_order == "hilbert"
        assert A.schema.attr("v").isnullable
        assert A.schema.domain.dim("x").tile == 100
    expect_code("ALREADY_EXISTS", action, client, "create_array", EXAMPLE_SCHEMA)
    # Write with nulls, read back through TileDB and Flight.
    xs = [5.5, 999.0, 0.0, 123.25]
    vs = [1.5, None, 3.0, None]
    put(client, "points", pa.table({"x": pa.array(xs), "v": pa.array(vs, pa.float32())}))
    with tiledb.open(uri) as A:
        ref = A[:]
    got = sort_table(read(client, array="points"), ["x"])
    assert got.column("x").to_pylist() == sorted(xs)
    want = dict(zip(xs, vs))
    assert got.column("v").to_pylist() == [want[x] for x in sorted(xs)]
    assert sorted(ref["x"].tolist()) == sorted(xs)
    # Metadata both ways.
    action(client, "put_metadata", {"array": "points", "metadata": {"units": "m", "scale": 2.5, "n": 3, "ids": [1, 2, 3]}})
    with tiledb.open(uri) as A:
        assert A.meta["units"] == "m" and A.meta["scale"] == 2.5 and A.meta["n"] == 3
        assert tuple(A.meta["ids"]) == (1, 2, 3)
    with tiledb.open(uri, "w") as A:
        A.meta["from_tiledb"] = "yes"
        A.meta["vals"] = (1.5, 2.5)
    md = action(client, "get_metadata", {"array": "points"})
    assert md["units"] == "m" and md["scale"] == 2.5 and md["n"] == 3 and md["ids"] == [1, 2, 3]
    assert md["from_tiledb"] == "yes" and md["vals"] == [1.5, 2.5]
    # Fragments as TileDB lists them.
    frags = action(client, "list_fragments", {"array": "points"})
    info = tiledb.array_fragments(uri)
    assert len(frags) == len(info) == 1
    assert frags[0]["cell_num"] == info[0].cell_num == 4
    assert frags[0]["non_empty_domain"]["x"] == [0.0, 999.0]
    assert tuple(frags[0]["timestamps"]) == tuple(info[0].timestamp_range)
    # Drop.
    assert action(client, "drop_array", {"array": "points"}) == {"dropped": "points"}
    assert "points" not in action(client, "list_arrays")
    expect_code("NOT_FOUND", action, client, "describe", {"array": "points"})


def test_describe_matches_tiledb_schema(client, arrays, flightd):
    d = action(client, "describe", {"array": arrays["sparse"]})
    with tiledb.open(os.path.join(flightd.data, arrays["sparse"])) as A:
        s = A.schema
    assert d["type"] == "sparse" and d["capacity"] == s.capacity == 64
    assert [x["name"] for x in d["dimensions"]] == ["x"]
    assert d["dimensions"][0]["domain"] == [0, 999] and d["dimensions"][0]["tile"] == 100
    assert [(x["name"], x["type"]) for x in d["attributes"]] == [("s", "string_utf8"), ("f", "float32")]
    assert d["attributes"][0]["cell_val_num"] == "var"


# ---------------------------------------------------------------- hostile input

def test_hostile_inputs_refused_and_daemon_keeps_serving(client, arrays, flightd):
    os.symlink("/etc", os.path.join(flightd.data, "escape"))
    os.makedirs(os.path.join(flightd.data, "notarray"), exist_ok=True)
    with open(os.path.join(flightd.data, "blob.b2nd"), "wb") as f:
        f.write(b"b2frame")
    big = "x" * (2 << 20)
    cases = [
        ("INVALID_ARGUMENT", lambda: client.do_get(fl.Ticket(b"{not json")).read_all()),
        ("INVALID_ARGUMENT", lambda: client.do_get(fl.Ticket(b"")).read_all()),
        ("INVALID_ARGUMENT", lambda: client.do_get(fl.Ticket(b"[1,2]")).read_all()),
        ("INVALID_ARGUMENT", lambda: client.do_get(fl.Ticket(b'{"array": 5}')).read_all()),
        ("INVALID_ARGUMENT", lambda: client.do_get(fl.Ticket(b"\xff\xfe")).read_all()),
        ("INVALID_ARGUMENT", lambda: read(client, array=arrays["dense"], colums=["a"])),
        ("INVALID_ARGUMENT", lambda: read(client, array=arrays["dense"], columns=["nope"])),
        ("INVALID_ARGUMENT", lambda: read(client, array=arrays["dense"], columns="a")),
        ("INVALID_ARGUMENT", lambda: read(client, array=arrays["dense"], subarray={"rows": [[0, 5]]})),
        ("INVALID_ARGUMENT", lambda: read(client, array=arrays["dense"], subarray={"rows": [[5, 1000]]})),
        ("INVALID_ARGUMENT", lambda: read(client, array=arrays["dense"], subarray={"zz": [[1, 2]]})),
        ("INVALID_ARGUMENT", lambda: read(client, array=arrays["dense"], subarray={"rows": [["a", "b"]]})),
        ("INVALID_ARGUMENT", lambda: read(client, array=arrays["dense"], layout="diagonal")),
        ("INVALID_ARGUMENT", lambda: read(client, array=arrays["dense"], batch_rows=0)),
        ("INVALID_ARGUMENT", lambda: read(client, array=arrays["dense"], timestamp=[5, 1])),
        ("INVALID_ARGUMENT", lambda: read(client, array="../etc")),
        ("INVALID_ARGUMENT", lambda: read(client, array="/etc")),
        ("INVALID_ARGUMENT", lambda: read(client, array="t/\u0000dense2d")),
        ("INVALID_ARGUMENT", lambda: read(client, array="escape/passwd")),
        ("INVALID_ARGUMENT", lambda: read(client, array="t/__schema")),
        ("INVALID_ARGUMENT", lambda: read(client, array=big)),
        ("NOT_FOUND", lambda: read(client, array="nope")),
        ("NOT_FOUND", lambda: read(client, array="notarray")),
        ("DATA_LOSS", lambda: read(client, array="blob.b2nd")),
        ("INVALID_ARGUMENT", lambda: client.get_schema(fl.FlightDescriptor.for_path("..", "x"))),
        ("INVALID_ARGUMENT", lambda: client.get_flight_info(fl.FlightDescriptor.for_command(b"{}"))),
        ("INVALID_ARGUMENT", lambda: client.get_flight_info(cmd(array=arrays["dense"], partitions=0))),
        ("NOT_FOUND", lambda: client.get_flight_info(fl.FlightDescriptor.for_path("missing"))),
        ("INVALID_ARGUMENT", lambda: action(client, "describe", b"{")),
        ("INVALID_ARGUMENT", lambda: action(client, "describe", {"array": ["x"]})),
        ("INVALID_ARGUMENT", lambda: action(client, "describe", {"array": "t/dense2d", "extra": 1})),
        ("INVALID_ARGUMENT", lambda: action(client, "no_such_action", {})),
        ("INVALID_ARGUMENT", lambda: action(client, "create_array", {"array": "bad/schema", "type": "sparse"})),
        ("INVALID_ARGUMENT", lambda: action(client, "create_array", {"array": "../up", "type": "sparse"})),
        ("INVALID_ARGUMENT", lambda: action(client, "create_array", dict(EXAMPLE_SCHEMA, array="t/dense2d/inner"))),
        ("INVALID_ARGUMENT", lambda: action(client, "put_metadata", {"array": arrays["dense"], "metadata": {"k": {"nested": 1}}})),
        ("INVALID_ARGUMENT", lambda: action(client, "put_metadata", {"array": arrays["dense"], "metadata": 5})),
        ("NOT_FOUND", lambda: action(client, "drop_array", {"array": "never/was"})),
        ("INVALID_ARGUMENT", lambda: put(client, "escape", pa.table({"a": [1]}))),
        ("INVALID_ARGUMENT", lambda: put(client, arrays["dense"], pa.table({"a": pa.array([1], pa.int32()),
                                                                          "b": pa.array([1.0])}))),
        ("INVALID_ARGUMENT", lambda: put(client, cmd(array=arrays["sparse"], columns=["x"]),
                                         pa.table({"x": pa.array([1])}))),
    ]
    for i, (code, fn) in enumerate(cases):
        expect_code(code, fn)
        assert flightd.alive(), i
    assert not any(f.startswith("up") for f in os.listdir(os.path.dirname(flightd.data)))
    # Still serving, with the right answers.
    t = read(client, array=arrays["dense"], columns=["a"])
    assert t.column("a").to_numpy().tolist() == dense_values()[0].ravel().tolist()
    os.unlink(os.path.join(flightd.data, "escape"))
    os.unlink(os.path.join(flightd.data, "blob.b2nd"))


def test_client_hangs_up_mid_stream(flightd, client):
    name = "w/bigdense"
    action(client, "create_array", {"array": name, "type": "dense",
                                    "dimensions": [{"name": "i", "type": "int64", "domain": [0, 999999], "tile": 100000}],
                                    "attributes": [{"name": "v", "type": "float64"}]})
    put(client, cmd(array=name, subarray={"i": [[0, 999999]]}), pa.table({"v": np.arange(1e6)}))
    for _ in range(3):
        c = flightd.client()
        r = c.do_get(ticket(array=name, batch_rows=1000))
        r.read_chunk()
        c.close()  # hang up with most of the stream unsent
    assert flightd.alive()
    t = read(client, array=name, subarray={"i": [[999990, 999999]]})
    assert t.column("v").to_pylist() == [float(x) for x in range(999990, 1000000)]


# ---------------------------------------------------------------- concurrency

def test_16_readers_and_4_writers(client, arrays, flightd):
    action(client, "create_array", {"array": "w/conc", "type": "sparse",
                                    "dimensions": [{"name": "k", "type": "int64", "domain": [0, 1 << 30], "tile": 1000}],
                                    "attributes": [{"name": "w", "type": "int32"}, {"name": "s", "type": "string_utf8", "cell_val_num": "var"}]})
    a_ref = dense_values()[0].ravel().tolist()
    per_write, writes = 500, 5

    def writer(wid):
        c = flightd.client()
        for j in range(writes):
            base = (wid * writes + j) * per_write
            ks = np.arange(base, base + per_write, dtype=np.int64)
            put(c, "w/conc", pa.table({"k": ks, "w": pa.array(np.full(per_write, wid, np.int32)),
                                       "s": [f"{wid}:{k}" for k in ks]}))
        c.close()
        return wid

    def reader(rid):
        c = flightd.client()
        for _ in range(4):
            t = read(c, array=arrays["dense"], columns=["a"])
            assert t.column("a").to_pylist() == a_ref
            n = read(c, array="w/conc", columns=["k"]).num_rows
            assert n % per_write == 0, n  # a write is all or nothing
        c.close()
        return rid

    with cf.ThreadPoolExecutor(20) as ex:
        futs = [ex.submit(writer, w) for w in range(4)] + [ex.submit(reader, r) for r in range(16)]
        for f in futs:
            f.result()
    t = sort_table(read(client, array="w/conc"), ["k"])
    assert t.column("k").to_pylist() == list(range(4 * writes * per_write))
    assert t.column("s").to_pylist() == [f"{k // (writes * per_write)}:{k}" for k in range(4 * writes * per_write)]
    with tiledb.open(os.path.join(flightd.data, "w", "conc")) as A:
        assert len(A[:]["k"]) == 4 * writes * per_write


# ---------------------------------------------------------------- access log

def test_access_log_has_array_rows_bytes(client, arrays, flightd):
    read(client, array=arrays["dense"], columns=["a"])
    time.sleep(0.2)
    recs = [r for r in flightd.records() if r.get("message") == "call" and r.get("method", "").endswith("/DoGet")
            and r.get("array") == arrays["dense"] and r.get("status") == "OK"]
    assert recs, flightd.log_lines[-5:]
    assert recs[-1]["rows"] == ROWS * COLS and recs[-1]["bytes"] >= ROWS * COLS * 4


# ---------------------------------------------------------------- auth and limits

def test_bearer_tokens_read_only_and_basic_handshake(flightd_bin, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("# test tokens\nsecret-rw rw\nsecret-ro ro\n")
    data = tmp_path / "data"
    d = Daemon(flightd_bin, data, args=["-tokens-file", str(tokens)], env={"TILEFLIGHT_TOKENS": "env-tok:rw"})
    try:
        c = d.client()
        expect_code("UNAUTHENTICATED", lambda: list(c.list_flights()))
        bad = fl.FlightCallOptions(headers=[(b"authorization", b"Bearer wrong")])
        expect_code("UNAUTHENTICATED", lambda: action(c, "list_arrays", options=bad))
        rw = fl.FlightCallOptions(headers=[(b"authorization", b"Bearer secret-rw")])
        ro = fl.FlightCallOptions(headers=[(b"authorization", b"Bearer secret-ro")])
        env = fl.FlightCallOptions(headers=[(b"authorization", b"Bearer env-tok")])
        body = {"array": "a", "type": "sparse",
                "dimensions": [{"name": "k", "type": "int32", "domain": [0, 9], "tile": 10}],
                "attributes": [{"name": "v", "type": "int32"}]}
        expect_code("PERMISSION_DENIED", action, c, "create_array", body, options=ro)
        action(c, "create_array", body, options=rw)
        tbl = pa.table({"k": pa.array([1], pa.int32()), "v": pa.array([7], pa.int32())})
        expect_code("PERMISSION_DENIED", put, c, "a", tbl, options=ro)
        expect_code("PERMISSION_DENIED", action, c, "put_metadata", {"array": "a", "metadata": {"k": 1}}, options=ro)
        expect_code("PERMISSION_DENIED", action, c, "drop_array", {"array": "a"}, options=ro)
        put(c, "a", tbl, options=env)
        assert read(c, options=ro, array="a").column("v").to_pylist() == [7]
        assert action(c, "list_arrays", options=ro) == ["a"]
        # pyarrow's basic-auth handshake: the token as password -> bearer header.
        c2 = d.client()
        hdr = c2.authenticate_basic_token("anyone", "secret-ro")
        opts = fl.FlightCallOptions(headers=[hdr])
        assert read(c2, options=opts, array="a").num_rows == 1
        expect_code("UNAUTHENTICATED", lambda: d.client().authenticate_basic_token("anyone", "nope"))
        c.close()
        c2.close()
    finally:
        d.stop()


def test_limits_put_bytes_and_message_size(flightd_bin, tmp_path):
    d = Daemon(flightd_bin, tmp_path / "data", args=["-max-put-bytes", "100000", "-max-message-bytes", str(1 << 20)])
    try:
        c = d.client()
        action(c, "create_array", {"array": "l", "type": "sparse",
                                   "dimensions": [{"name": "k", "type": "int64", "domain": [0, 1 << 40], "tile": 1000}],
                                   "attributes": [{"name": "v", "type": "float64"}]})
        n = 20000  # 320 kB in batches of 16 kB: over the put limit
        tbl = pa.table({"k": np.arange(n, dtype=np.int64), "v": np.ones(n)})
        expect_code("RESOURCE_EXHAUSTED", put, c, "l", tbl, chunk=1000)
        # One 1.6 MB message: over the message limit.
        big = pa.table({"k": np.arange(100000, dtype=np.int64), "v": np.ones(100000)})
        expect_code("RESOURCE_EXHAUSTED", put, c, "l", big)
        assert d.alive()
        small = pa.table({"k": np.arange(10, dtype=np.int64), "v": np.ones(10)})
        assert put(c, "l", small)["rows"] == 10
        c.close()
    finally:
        d.stop()


# ---------------------------------------------------------------- README quick start

def readme_snippet():
    text = open(os.path.join(REPO, "README.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README.md has no python quick start block"
    return blocks[0]


def test_readme_quick_start_runs_as_written(flightd_bin, tmp_path):
    d = Daemon(flightd_bin, tmp_path / "data", args=["-demo"])
    try:
        code = readme_snippet().replace("grpc://127.0.0.1:8815", d.url)
        assert d.url in code, "the README snippet must connect to grpc://127.0.0.1:8815"
        ns = {}
        exec(compile(code, "README.md", "exec"), ns)
        with tiledb.open(os.path.join(d.data, "demo", "points")) as A:
            assert len(A[:]["x"]) == 5000 + ns["new"].num_rows
    finally:
        d.stop()


# ---------------------------------------------------------------- streamed DoPut: several fragments, one commit

FRAG_BYTES = 200_000  # -max-fragment-bytes of the daemon below: 12,500 rows of (int64, float64)


@pytest.fixture(scope="module")
def small_frags(flightd_bin, tmp_path_factory):
    d = Daemon(flightd_bin, tmp_path_factory.mktemp("small-frags"), args=["-max-fragment-bytes", str(FRAG_BYTES)])
    try:
        yield d
    finally:
        d.stop()


def frag_dir_entries(data, name):
    """What is on disk under the array's __fragments, committed or not."""
    p = os.path.join(data, name, "__fragments")
    return sorted(os.listdir(p)) if os.path.isdir(p) else []


def wait_for(pred, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def create_kv(client, name):
    action(client, "create_array", {"array": name, "type": "sparse", "capacity": 1000,
                                    "dimensions": [{"name": "k", "type": "int64", "domain": [0, 1 << 40], "tile": 1000}],
                                    "attributes": [{"name": "v", "type": "float64"}]})


def test_doput_larger_than_a_fragment_becomes_visible_at_once(small_frags):
    d = small_frags
    c = d.client()
    name = "big/sparse"
    create_kv(c, name)
    n, chunk = 100_000, 5_000  # 1.6 MB
    ks = np.random.default_rng(7).permutation(n).astype(np.int64)
    tbl = pa.table({"k": ks, "v": ks * 0.5})
    uri = os.path.join(d.data, name)
    seen = []
    stop = threading.Event()

    def reader():  # a concurrent Flight reader counts what it sees
        rc = d.client()
        while not stop.is_set():
            seen.append(read(rc, array=name, columns=["k"]).num_rows)
        rc.close()

    t = threading.Thread(target=reader, daemon=True)  # a failed assertion must not leave it reading
    t.start()
    w, r = c.do_put(fl.FlightDescriptor.for_path(name), tbl.schema)
    batches = tbl.to_batches(max_chunksize=chunk)
    half = len(batches) // 2
    for b in batches[:half]:
        w.write_batch(b)
    # Fragments are on disk before the stream ends, but nobody sees them.
    assert wait_for(lambda: len(frag_dir_entries(d.data, name)) >= 2), frag_dir_entries(d.data, name)
    with tiledb.open(uri) as A:
        assert len(A[:]["k"]) == 0
    assert read(c, array=name).num_rows == 0
    for b in batches[half:]:
        w.write_batch(b)
    w.done_writing()
    res = json.loads(r.read().to_pybytes())
    w.close()
    stop.set()
    t.join()
    assert res["rows"] == n
    # A fragment is cut once the buffered batches reach FRAG_BYTES: three
    # batches of 80 kB each, so seven fragments.
    per_frag = -(-FRAG_BYTES // (chunk * 16)) * chunk
    assert len(res["fragments"]) == -(-n // per_frag), res
    assert set(seen) <= {0, n}, sorted(set(seen))
    assert 0 in seen
    # TileDB reads every cell, from as many fragments as the reply names.
    info = tiledb.array_fragments(uri)
    assert sorted(os.path.basename(u) for u in info.uri) == sorted(res["fragments"])
    assert frag_dir_entries(d.data, name) == sorted(res["fragments"])
    with tiledb.open(uri) as A:
        got = A[:]
    order = np.argsort(got["k"])
    assert got["k"][order].tolist() == list(range(n))
    assert np.array_equal(got["v"][order], np.arange(n) * 0.5)
    flight_rows = sort_table(read(c, array=name), ["k"])
    assert flight_rows.column("v").to_numpy().tolist() == (np.arange(n) * 0.5).tolist()
    c.close()


def test_dense_doput_larger_than_a_fragment(small_frags):
    d = small_frags
    c = d.client()
    name = "big/dense"
    action(c, "create_array", {"array": name, "type": "dense",
                               "dimensions": [{"name": "r", "type": "int32", "domain": [0, 399], "tile": 20},
                                              {"name": "c", "type": "int32", "domain": [0, 99], "tile": 50}],
                               "attributes": [{"name": "v", "type": "float64"}]})
    vals = np.arange(400 * 100, dtype=np.float64).reshape(400, 100)  # 320 kB
    res = put(c, cmd(array=name, subarray={"r": [[0, 399]], "c": [[0, 99]]}), pa.table({"v": vals.ravel()}), chunk=3000)
    assert res["rows"] == vals.size and len(res["fragments"]) >= 2, res
    with tiledb.open(os.path.join(d.data, name)) as A:
        assert np.array_equal(A[:]["v"], vals)
    assert len(tiledb.array_fragments(os.path.join(d.data, name))) == len(res["fragments"])
    c.close()


def test_doput_failure_in_a_late_batch_leaves_nothing(small_frags):
    d = small_frags
    c = d.client()
    name = "big/late_failure"
    create_kv(c, name)
    n = 60_000  # several fragments are written before the bad batch arrives
    ks = np.arange(n, dtype=np.int64)
    ks[-1] = 1 << 41  # outside the domain, in the last batch
    tbl = pa.table({"k": ks, "v": np.ones(n)})
    msg = expect_code("INVALID_ARGUMENT", put, c, name, tbl, chunk=5000)
    assert name in msg and "domain" in msg, msg
    # Nothing visible, and the fragments written before the failure are gone.
    assert fragment_count(d, name) == 0
    assert wait_for(lambda: frag_dir_entries(d.data, name) == [])
    commits = os.path.join(d.data, name, "__commits")
    assert not os.path.isdir(commits) or os.listdir(commits) == []
    # A value that does not cast exactly, late in a dense stream, likewise.
    dn = "big/late_failure_dense"
    action(c, "create_array", {"array": dn, "type": "dense",
                               "dimensions": [{"name": "i", "type": "int64", "domain": [0, 99999], "tile": 1000}],
                               "attributes": [{"name": "v", "type": "int32"}]})
    v = np.arange(100_000, dtype=np.int64)
    v[-1] = 1 << 40
    expect_code("INVALID_ARGUMENT", put, c, cmd(array=dn, subarray={"i": [[0, 99999]]}), pa.table({"v": v}), chunk=4000)
    assert fragment_count(d, dn) == 0
    assert wait_for(lambda: frag_dir_entries(d.data, dn) == [])
    assert d.alive()
    c.close()


def test_client_hangs_up_after_several_fragments(small_frags):
    d = small_frags
    c = d.client()
    name = "big/hangup"
    create_kv(c, name)
    script = f"""
import os, time, numpy as np, pyarrow as pa, pyarrow.flight as fl
c = fl.connect({d.url!r})
tbl = pa.table({{"k": pa.array(np.arange(100000, dtype=np.int64)), "v": pa.array(np.ones(100000))}})
w, r = c.do_put(fl.FlightDescriptor.for_path({name!r}), tbl.schema)
for b in tbl.to_batches(max_chunksize=5000)[:12]:
    w.write_batch(b)
while len(os.listdir(os.path.join({d.data!r}, {name!r}, "__fragments"))) < 3:
    time.sleep(0.02)
os._exit(3)
"""
    import subprocess
    import sys
    assert subprocess.run([sys.executable, "-c", script], timeout=60).returncode == 3
    assert wait_for(lambda: frag_dir_entries(d.data, name) == []), frag_dir_entries(d.data, name)
    assert fragment_count(d, name) == 0
    assert d.alive()
    small = pa.table({"k": np.arange(5, dtype=np.int64), "v": np.ones(5)})
    assert put(c, name, small)["rows"] == 5
    c.close()


# ---------------------------------------------------------------- error kinds end to end

KEY = "0123456789abcdeF0123456789abcdeF"


def make_error_kind_arrays(data):
    """TileDB-written arrays that each fail in one way: an md5-checksummed
    attribute with a flipped byte on disk, an encrypted array; plus a
    healthy one."""
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, 99), tile=50, dtype=np.int32))
    for name in ("md5", "healthy"):
        uri = os.path.join(data, name)
        tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
            tiledb.Attr("a", dtype=np.int32, filters=[tiledb.ChecksumMD5Filter()])]))
        with tiledb.open(uri, "w") as A:
            A[:] = np.arange(100, dtype=np.int32)
    frag = tiledb.array_fragments(os.path.join(data, "md5")).uri[0]
    path = os.path.join(frag.replace("file://", ""), "a0.tdb")
    b = bytearray(open(path, "rb").read())
    b[-3] ^= 0xFF  # in the values of the second (last) tile
    open(path, "wb").write(bytes(b))
    with pytest.raises(tiledb.TileDBError, match="(?i)checksum"):
        with tiledb.open(os.path.join(data, "md5")) as A:
            A[:]
    ctx = tiledb.Ctx(tiledb.Config({"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": KEY}))
    uri = os.path.join(data, "enc")
    edom = tiledb.Domain(tiledb.Dim("i", domain=(0, 9), tile=5, dtype=np.int32, ctx=ctx), ctx=ctx)
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=edom, sparse=False, ctx=ctx,
                                                attrs=[tiledb.Attr("a", dtype=np.int32, ctx=ctx)]), ctx=ctx)
    with tiledb.open(uri, "w", ctx=ctx) as A:
        A[:] = np.arange(10, dtype=np.int32)


def test_error_kinds_end_to_end(flightd_bin, tmp_path):
    data = tmp_path / "data"
    os.makedirs(data)
    make_error_kind_arrays(str(data))
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY + "\n")
    enc_put = lambda c: put(c, cmd(array="enc", subarray={"i": [[0, 9]]}),  # noqa: E731
                            pa.table({"a": pa.array(np.arange(10, dtype=np.int32))}))
    # (daemon args, what DoGet of "enc" gives, what DoPut into "enc" gives)
    for args, enc_read, enc_write in [
        (["-encryption-key-file", str(keyfile)], None, None),
        (["-encryption-key", "X" + KEY[1:]], "FAILED_PRECONDITION", "FAILED_PRECONDITION"),
        ([], "FAILED_PRECONDITION", "FAILED_PRECONDITION"),
    ]:
        d = Daemon(flightd_bin, data, args=args)
        try:
            c = d.client()
            # A flipped byte under an md5 checksum: DataLoss naming the
            # fragment, the attribute and the tile.
            msg = expect_code("DATA_LOSS", read, c, array="md5")
            frag = os.path.basename(tiledb.array_fragments(os.path.join(data, "md5")).uri[0])
            assert frag in msg and '"a"' in msg and "tile 1" in msg and "checksum" in msg, msg
            # The daemon's key, wrong or missing, is the operator's matter.
            if enc_read is None:
                assert read(c, array="enc").column("a").to_pylist() == list(range(10))
            else:
                msg = expect_code(enc_read, read, c, array="enc")
                assert "enc" in msg and ("key" in msg or "decrypt" in msg), msg
            if enc_write is None:
                assert enc_put(c)["rows"] == 10
            else:
                msg = expect_code(enc_write, enc_put, c)
                assert "enc" in msg and "encrypt" in msg, msg
            # A key set for the encrypted array does not disturb the others,
            # and the daemon keeps serving after each failure.
            assert read(c, array="healthy").column("a").to_pylist() == list(range(100))
            assert d.alive()
            c.close()
        finally:
            d.stop()
    ctx = tiledb.Ctx(tiledb.Config({"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": KEY}))
    # TileDB's fragment and the one the keyed daemon wrote; none from the others.
    assert len(tiledb.array_fragments(os.path.join(data, "enc"), ctx=ctx)) == 2


# ---------------------------------------------------------------- encrypted arrays written through Flight

def enc_ctx(key=KEY):
    return tiledb.Ctx(tiledb.Config({"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": key}))


def tree(path):
    """Every file under path with its size: what a refused write must not change."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, path)] = os.path.getsize(p)
    return out


def test_encrypted_arrays_written_through_flight(flightd_bin, tmp_path):
    data = tmp_path / "data"
    os.makedirs(data)
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY + "\n")
    ctx = enc_ctx()
    # TileDB creates and writes an encrypted dense and sparse array (with a
    # compressed attribute and a var-sized one, so that data, offsets and
    # generic tiles are all sealed), plus metadata, and a plain array.
    words = np.array([f"w{i}" * (i % 4) for i in range(100)], dtype=object)
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, 99), tile=10, dtype=np.int32, ctx=ctx), ctx=ctx)
    tiledb.Array.create(str(data / "encd"), tiledb.ArraySchema(domain=dom, sparse=False, ctx=ctx, attrs=[
        tiledb.Attr("a", dtype=np.int32, filters=tiledb.FilterList([tiledb.ZstdFilter()], ctx=ctx), ctx=ctx),
        tiledb.Attr("s", dtype=str, var=True, ctx=ctx)]), ctx=ctx)
    with tiledb.open(str(data / "encd"), "w", ctx=ctx) as A:
        A[0:50] = {"a": np.arange(50, dtype=np.int32), "s": words[:50]}
        A.meta["from_tiledb"] = 7
    sdom = tiledb.Domain(tiledb.Dim("k", domain=(0, 9999), tile=100, dtype=np.int64, ctx=ctx), ctx=ctx)
    tiledb.Array.create(str(data / "encs"), tiledb.ArraySchema(domain=sdom, sparse=True, capacity=16, ctx=ctx, attrs=[
        tiledb.Attr("v", dtype=np.float64, ctx=ctx), tiledb.Attr("s", dtype=str, var=True, ctx=ctx)]), ctx=ctx)
    ks = np.arange(0, 300, 3, dtype=np.int64)
    with tiledb.open(str(data / "encs"), "w", ctx=ctx) as A:
        A[ks] = {"v": ks * 0.5, "s": np.array([f"k{k}" for k in ks], dtype=object)}
    tiledb.Array.create(str(data / "plain"), tiledb.ArraySchema(domain=tiledb.Domain(
        tiledb.Dim("i", domain=(0, 99), tile=10, dtype=np.int32)), sparse=False, attrs=[tiledb.Attr("a", dtype=np.int32)]))
    with tiledb.open(str(data / "plain"), "w") as A:
        A[0:50] = np.arange(50, dtype=np.int32)

    dense_half = pa.table({"a": pa.array(np.arange(50, 100, dtype=np.int32)), "s": pa.array(list(words[50:]), pa.large_utf8())})
    ks2 = np.arange(1, 300, 3, dtype=np.int64)
    sparse_more = pa.table({"k": pa.array(ks2), "v": pa.array(ks2 * 0.5),
                            "s": pa.array([f"k{k}" for k in ks2], pa.large_utf8())})
    put_dense = lambda c: put(c, cmd(array="encd", subarray={"i": [[50, 99]]}), dense_half, chunk=7)  # noqa: E731
    put_sparse = lambda c: put(c, "encs", sparse_more, chunk=9)  # noqa: E731
    put_meta = lambda c, name: action(c, "put_metadata", {"array": name, "metadata": {"from_flight": "yes", "n": [1, 2]}})  # noqa: E731

    # A daemon without the key, or with another one, is refused every
    # write into the encrypted arrays, and writes nothing.
    before = {n: tree(data / n) for n in ("encd", "encs")}
    for args in ([], ["-encryption-key", "X" + KEY[1:]]):
        d = Daemon(flightd_bin, data, args=args)
        try:
            c = d.client()
            for what, fn in [("dense DoPut", lambda: put_dense(c)), ("sparse DoPut", lambda: put_sparse(c)),
                             ("put_metadata", lambda: put_meta(c, "encd")),
                             ("drop_array", lambda: action(c, "drop_array", {"array": "encs"}))]:
                msg = expect_code("FAILED_PRECONDITION", fn)
                assert "enc" in msg and "encrypt" in msg, (args, what, msg)
            # Plain arrays are not the key's business.
            assert read(c, array="plain").column("a").to_pylist()[:50] == list(range(50))
            c.close()
        finally:
            d.stop()
        assert {n: tree(data / n) for n in ("encd", "encs")} == before, args

    # The daemon with the key: streamed DoPuts cut into several fragments,
    # metadata both ways, plain arrays as usual.
    d = Daemon(flightd_bin, data, args=["-encryption-key-file", str(keyfile), "-max-fragment-bytes", "200"])
    try:
        c = d.client()
        assert action(c, "get_metadata", {"array": "encd"}) == {"from_tiledb": 7}
        rd = put_dense(c)
        assert rd["rows"] == 50 and len(rd["fragments"]) > 1, rd
        rs = put_sparse(c)
        assert rs["rows"] == len(ks2) and len(rs["fragments"]) > 1, rs
        assert put_meta(c, "encd") == {"keys": 2}
        got = read(c, array="encd")
        assert got.column("a").to_pylist() == list(range(100))
        assert got.column("s").to_pylist() == list(words)
        got = sort_table(read(c, array="encs"), ["k"])
        assert got.column("k").to_pylist() == sorted(list(ks) + list(ks2))
        assert action(c, "describe", {"array": "encd"})["encrypted"] is True
        assert "encrypted" not in action(c, "describe", {"array": "plain"})
        assert put(c, cmd(array="plain", subarray={"i": [[50, 99]]}),
                   pa.table({"a": pa.array(np.arange(50, 100, dtype=np.int32))}))["rows"] == 50
        assert put_meta(c, "plain") == {"keys": 2}
        # create_array makes an encrypted array only when asked to.
        body = {"array": "encnew", "type": "sparse", "encrypted": True,
                "dimensions": [{"name": "k", "type": "int32", "domain": [0, 99], "tile": 10}],
                "attributes": [{"name": "v", "type": "int16"}]}
        assert action(c, "create_array", body)["encrypted"] is True
        assert "encrypted" not in action(c, "create_array", dict(body, array="plainnew", encrypted=False))
        for name in ("encnew", "plainnew"):
            assert put(c, name, pa.table({"k": pa.array([3, 1], pa.int32()), "v": pa.array([30, 10], pa.int16())}))["rows"] == 2
        c.close()
    finally:
        d.stop()

    # TileDB reads, with the key, its fragments and ours together.
    with tiledb.open(str(data / "encd"), ctx=ctx) as A:
        r = A[:]
        np.testing.assert_array_equal(r["a"], np.arange(100, dtype=np.int32))
        assert list(r["s"]) == list(words)
        assert A.meta["from_tiledb"] == 7 and A.meta["from_flight"] == "yes" and A.meta["n"] == (1, 2)
    assert len(tiledb.array_fragments(str(data / "encd"), ctx=ctx)) == 1 + len(rd["fragments"])
    with tiledb.open(str(data / "encs"), ctx=ctx) as A:
        r = A.query(order="G")[:]
        want = np.sort(np.concatenate([ks, ks2]))
        np.testing.assert_array_equal(r["k"], want)
        np.testing.assert_array_equal(r["v"], want * 0.5)
        assert list(r["s"]) == [f"k{k}" for k in want]
    with tiledb.open(str(data / "plain")) as A:
        np.testing.assert_array_equal(A[:]["a"], np.arange(100, dtype=np.int32))
        assert A.meta["from_flight"] == "yes"
    with tiledb.open(str(data / "encnew"), ctx=ctx) as A:
        r = A[:]
        assert list(r["k"]) == [1, 3] and list(r["v"]) == [10, 30]
    with pytest.raises(tiledb.TileDBError):
        tiledb.open(str(data / "encnew")).close()
    with tiledb.open(str(data / "plainnew")) as A:
        assert list(A[:]["k"]) == [1, 3]
    # Dropping takes the key too.
    d = Daemon(flightd_bin, data, args=["-encryption-key-file", str(keyfile)])
    try:
        c = d.client()
        assert action(c, "drop_array", {"array": "encs"}) == {"dropped": "encs"}
        c.close()
    finally:
        d.stop()
    assert not os.path.exists(data / "encs")
