"""Compressed pass-through (the ticket key "compression": "zstd"): arrays
TileDB writes, whose attributes mix zstd-only pipelines (sent as Arrow IPC
ZSTD-compressed buffers, never decompressed by the daemon: float64, int32
with a small filter chunk size, uint8, datetime64[ns]) with attributes
that cannot pass (nullable, bool, var-sized strings, lz4, datetime64[D]),
in row- and col-major cell orders with a second fragment over part of the
tiles. pyarrow decompresses the bodies; every read equals TileDB's own
read of the same cells and the uncompressed read, and the daemon's
metrics show the bytes it sent compressed."""
import json
import os
import re
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest
import tiledb

from flightd_fixture import Daemon, flightd_bin  # noqa: F401
from soak.lib import free_port

SHAPE = (1024, 512)
TILE = (256, 512)  # 131072 cells: row-major reads go tile by tile


def make(uri, order):
    zstd = tiledb.FilterList([tiledb.ZstdFilter(level=1)])
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, SHAPE[0] - 1), tile=TILE[0], dtype=np.int64),
                        tiledb.Dim("y", domain=(0, SHAPE[1] - 1), tile=TILE[1], dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, cell_order=order, tile_order=order, attrs=[
        tiledb.Attr("v", dtype=np.float64, filters=zstd),
        tiledb.Attr("w", dtype=np.int32, filters=tiledb.FilterList([tiledb.ZstdFilter(level=3)], chunksize=6000)),
        tiledb.Attr("u", dtype=np.uint8, filters=zstd),
        tiledb.Attr("t", dtype="datetime64[ns]", filters=zstd),
        tiledb.Attr("n", dtype=np.int32, nullable=True, filters=zstd),
        tiledb.Attr("b", dtype=np.bool_, filters=zstd),
        tiledb.Attr("s", dtype=str, var=True, filters=zstd),
        tiledb.Attr("l", dtype=np.float32, filters=tiledb.FilterList([tiledb.LZ4Filter()])),
        tiledb.Attr("d", dtype="datetime64[D]", filters=zstd)]))
    rng = np.random.default_rng(9)
    n = SHAPE[0] * SHAPE[1]
    i = np.arange(n).reshape(SHAPE)
    with tiledb.open(uri, "w", timestamp=10) as A:
        A[:, :] = {"v": i * 0.5, "w": (i % 977).astype(np.int32), "u": (i % 251).astype(np.uint8),
                   "t": (i * 1000).astype("datetime64[ns]"),
                   "n": np.ma.masked_array((i % 1000).astype(np.int32), mask=(i % 7) == 0),
                   "b": (i % 3) == 0, "s": np.array([f"s{k % 13}" for k in i.ravel()], dtype=object).reshape(SHAPE),
                   "l": rng.standard_normal(SHAPE).astype(np.float32), "d": (i % 20000).astype("datetime64[D]")}
    # A second fragment over part of tiles 1 and 2 (x 300..600).
    with tiledb.open(uri, "w", timestamp=20) as A:
        h = 301
        j = np.arange(h * SHAPE[1]).reshape(h, SHAPE[1])
        A[300:601, :] = {"v": -j * 1.0, "w": j.astype(np.int32), "u": (j % 7).astype(np.uint8),
                         "t": j.astype("datetime64[ns]"), "n": np.ma.masked_array(j.astype(np.int32), mask=(j % 5) == 0),
                         "b": (j % 2) == 0, "s": np.array([f"r{k % 5}" for k in j.ravel()], dtype=object).reshape(h, SHAPE[1]),
                         "l": rng.standard_normal((h, SHAPE[1])).astype(np.float32),
                         "d": (j % 300).astype("datetime64[D]")}


@pytest.fixture(scope="module")
def served(flightd_bin, tmp_path_factory):  # noqa: F811
    root = tmp_path_factory.mktemp("zstdpass")
    for order in ("row-major", "col-major"):
        make(os.path.join(root, order), order)
    mport = free_port()
    # No tile cache: a tile the cache holds decoded is sent decoded, and the
    # plain reads here would fill it.
    d = Daemon(flightd_bin, root, args=["-metrics-listen", f"127.0.0.1:{mport}", "-tile-cache-bytes", "0"])
    try:
        yield root, d, mport
    finally:
        d.stop(check=False)


def passed(mport):
    text = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
    get = lambda name: float(re.search(rf"^tileflight_{name} (\S+)$", text, re.M).group(1))  # noqa: E731
    return get("zstd_passthrough_bytes_total"), get("zstd_passthrough_raw_bytes_total")


def tiledb_column(ref, name):
    v = ref[name]
    if np.ma.isMaskedArray(v):
        return pa.array(np.ma.getdata(v).ravel(), mask=np.ma.getmaskarray(v).ravel())
    v = v.ravel()
    if v.dtype == object:
        return pa.array(list(v), type=pa.large_string())
    return pa.array(v)


# (query, TileDB's order to compare with (None: compare with the plain read
# only, which the other suites compare with TileDB), the array cell orders
# for which some tile must go out compressed).
QUERIES = [
    ({}, "C", {"row-major"}),  # w's 1500-cell chunks fit no batch end: w alone is decoded
    ({"columns": ["v", "w", "u", "t"]}, "C", {"row-major"}),
    ({"columns": ["v", "w"], "batch_rows": 2999}, "C", set()),  # no batch end fits: decoded
    ({"columns": ["w"], "batch_rows": 20000}, "C", {"row-major"}),
    ({"columns": ["x", "y", "v", "n", "b", "s", "l", "d"], "batch_rows": 100000}, "C", {"row-major"}),
    ({"subarray": {"x": [[0, 255], [768, 1023]]}, "columns": ["v", "t", "y"]}, "C", {"row-major"}),
    ({"subarray": {"x": [[5, 900]]}, "columns": ["v", "u"]}, "C", set()),  # no whole tile
    # col-major reads go tile by tile when x stays in one tile
    ({"layout": "col-major", "subarray": {"x": [[0, 255]]}, "columns": ["v", "w"]}, None, {"col-major"}),
    ({"layout": "global", "columns": ["v", "w", "u"]}, None, {"row-major", "col-major"}),
]


@pytest.mark.parametrize("order", ["row-major", "col-major"])
@pytest.mark.parametrize("q,tdb_order,passes", QUERIES, ids=[json.dumps(q) for q, _, _ in QUERIES])
def test_zstd_reads_match_tiledb(served, order, q, tdb_order, passes):
    root, d, mport = served
    client = d.client()
    try:
        base = {"array": order, **q}
        plain = client.do_get(fl.Ticket(json.dumps(base).encode())).read_all()
        before = passed(mport)
        got = client.do_get(fl.Ticket(json.dumps({**base, "compression": "zstd"}).encode())).read_all()
        after = passed(mport)
    finally:
        client.close()
    assert got.num_rows > 0
    assert got.equals(plain), f"{base}: the zstd read differs from the plain one"
    if tdb_order is not None:
        xs = q.get("subarray", {}).get("x", [[0, SHAPE[0] - 1]])
        with tiledb.open(os.path.join(root, order)) as A:
            ref = A.query(order=tdb_order, attrs=[c for c in got.column_names if c not in ("x", "y")], coords=True)
            parts = [ref[x0:x1 + 1, :] for x0, x1 in xs]
        for name in got.column_names:
            want = pa.chunked_array([tiledb_column(p, name) for p in parts])
            assert got.column(name).to_pylist() == want.to_pylist(), f"{base}: column {name} differs from TileDB"
    sent, raw = after[0] - before[0], after[1] - before[1]
    if order in passes:
        assert sent > 0 and raw > 2 * sent, f"{base}: {sent} compressed bytes sent for {raw}"
    else:
        assert sent == 0, f"{base}: {sent} bytes sent compressed"


def test_client_asks_for_zstd_by_default(served):
    import tileflight
    root, d, mport = served
    with tiledb.open(os.path.join(root, "row-major")) as A:
        ref = A.query(attrs=["v", "w"])[:, :]
    with tileflight.connect(d.url) as c:
        before = passed(mport)
        t = c.read("row-major", columns=["v", "w"])
        mid = passed(mport)
        assert mid[0] > before[0], "the client's read sent nothing compressed"
        assert np.array_equal(t.column("v").to_numpy(), ref["v"].ravel())
        assert np.array_equal(t.column("w").to_numpy(), ref["w"].ravel())
        # DuckDB over the client's streaming reader sees the same values.
        import duckdb
        rdr = c.reader("row-major", columns=["v"])
        total = duckdb.sql("select sum(v) as s from rdr").fetchall()[0][0]
        assert total == pytest.approx(float(ref["v"].sum()))
    with tileflight.connect(d.url, compression="none") as c:
        before = passed(mport)
        t = c.read("row-major", columns=["v"])
        assert passed(mport) == before, "compression none still sent compressed tiles"
        assert np.array_equal(t.column("v").to_numpy(), ref["v"].ravel())


def test_bad_compression_is_invalid_argument(served):
    _, d, _ = served
    client = d.client()
    try:
        with pytest.raises(pa.ArrowInvalid, match="compression"):
            client.do_get(fl.Ticket(json.dumps({"array": "row-major", "compression": "gzip"}).encode())).read_all()
    finally:
        client.close()
