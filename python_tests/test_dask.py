"""tileflight.dask against the real daemon: one dask partition per Flight
endpoint, results equal to TileDB's (the tiledb package)."""

import os

import numpy as np
import pandas as pd
import pytest
import tiledb

import tileflight
import tileflight.dask
from flightd_fixture import flightd, flightd_bin  # noqa: F401


@pytest.fixture(scope="module")
def arrays(flightd):
    root = os.path.join(flightd.data, "dsk")
    os.makedirs(root, exist_ok=True)
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, 999), tile=100, dtype=np.int64),
                        tiledb.Dim("c", domain=(0, 19), tile=20, dtype=np.int64))
    tiledb.Array.create(os.path.join(root, "dense"), tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("a", dtype=np.int64), tiledb.Attr("b", dtype=np.float32)]))
    r = np.arange(1000)[:, None]
    c = np.arange(20)[None, :]
    with tiledb.open(os.path.join(root, "dense"), "w") as A:
        A[:] = {"a": r * 20 + c, "b": (r - c).astype(np.float32)}
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 10**6), tile=10**4, dtype=np.int64))
    tiledb.Array.create(os.path.join(root, "sparse"), tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("s", dtype=str), tiledb.Attr("v", dtype=np.float64)]))
    x = np.arange(0, 10**6, 97, dtype=np.int64)
    with tiledb.open(os.path.join(root, "sparse"), "w") as A:
        A[x] = {"s": np.array([f"g{i % 5}" for i in range(len(x))], dtype=object), "v": x / 7.0}
    return root


def test_partitions_are_endpoints_and_equal_tiledb(flightd, arrays):
    client = tileflight.connect(flightd.url)
    info = client.flight_info("dsk/dense", partitions=5)
    ddf = tileflight.dask.read(client, "dsk/dense", partitions=5)
    assert ddf.npartitions == len(info.endpoints) > 1
    assert list(ddf.columns) == ["r", "c", "a", "b"]
    assert str(ddf.dtypes["b"]) == "float32"
    df = ddf.compute()
    with tiledb.open(os.path.join(arrays, "dense")) as A:
        ref = A[:]
    np.testing.assert_array_equal(df["a"].to_numpy(), ref["a"].ravel())  # endpoint order = row-major
    np.testing.assert_array_equal(df["b"].to_numpy(), ref["b"].ravel())
    assert int(ddf.a.sum().compute()) == int(ref["a"].sum())
    part_rows = ddf.map_partitions(len).compute().tolist()
    assert part_rows == [sum(b.num_rows for b in client.endpoint_batches(ep)) for ep in info.endpoints]
    assert sum(part_rows) == 1000 * 20


def test_query_keys_and_uri(flightd, arrays):
    ddf = tileflight.dask.read(flightd.url, "dsk/sparse", columns=["x", "s", "v"],
                               subarray={"x": (100000, 599999)}, partitions=3)
    with tiledb.open(os.path.join(arrays, "sparse")) as A:
        ref = A[100000:600000]
    got = ddf.compute().sort_values("x").reset_index(drop=True)
    np.testing.assert_array_equal(got["x"].to_numpy(), np.sort(ref["x"]))
    order = np.argsort(ref["x"])
    assert got["s"].tolist() == list(ref["s"][order])
    g = ddf.groupby("s").v.sum().compute().sort_index()
    ref_g = pd.Series(ref["v"]).groupby(pd.Series(ref["s"])).sum().sort_index()
    np.testing.assert_allclose(g.to_numpy(), ref_g.to_numpy())


def test_errors(flightd, arrays):
    with pytest.raises(tileflight.NotFound):
        tileflight.dask.read(flightd.url, "dsk/nope")
    with pytest.raises(tileflight.InvalidArgument):
        tileflight.dask.read(flightd.url, "dsk/dense", columns=["zz"])
