"""Small dense reads over tiles of many filter chunks (flightd decodes only
the chunks holding the cells read: reader/tileio LoadRange), compared with
TileDB's own read of the same box: 512x512 tiles of float64 (2 MiB, 32
chunks of 64 KiB) and int32, zstd / lz4 / byteshuffle+zstd / no filter,
row- and col-major cell orders, two overlapping fragments, a nullable
attribute. The daemon runs with no tile cache, so every tile read in part
is decoded in part."""
import json
import os
import random

import numpy as np
import pytest
import tiledb

from flightd_fixture import Daemon, flightd_bin  # noqa: F401

FILTERS = {
    "zstd": lambda: tiledb.FilterList([tiledb.ZstdFilter(level=1)]),
    "lz4": lambda: tiledb.FilterList([tiledb.LZ4Filter()]),
    "shuffle_zstd": lambda: tiledb.FilterList([tiledb.ByteShuffleFilter(), tiledb.ZstdFilter()]),
    "none": lambda: tiledb.FilterList([]),
}
SHAPE = (1024, 512)


def make(uri, filt, order):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, SHAPE[0] - 1), tile=512, dtype=np.int64),
                        tiledb.Dim("y", domain=(0, SHAPE[1] - 1), tile=512, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, cell_order=order, attrs=[
        tiledb.Attr("v", dtype=np.float64, nullable=True, filters=FILTERS[filt]()),
        tiledb.Attr("w", dtype=np.int32, filters=FILTERS[filt]())]))
    rng = np.random.default_rng(14)
    with tiledb.open(uri, "w", timestamp=10) as A:
        v = rng.standard_normal(SHAPE)
        A[:, :] = {"v": np.ma.masked_array(v, mask=rng.random(SHAPE) < 0.1),
                   "w": rng.integers(-1 << 30, 1 << 30, SHAPE, dtype=np.int32)}
    with tiledb.open(uri, "w", timestamp=20) as A:
        n = (601, 351)
        A[100:701, 50:401] = {"v": rng.standard_normal(n), "w": rng.integers(0, 100, n, dtype=np.int32)}


@pytest.fixture(scope="module")
def served(flightd_bin, tmp_path_factory):  # noqa: F811
    root = tmp_path_factory.mktemp("partial")
    names = []
    for filt in FILTERS:
        for order in ("row-major", "col-major"):
            name = f"{filt}_{order}"
            make(os.path.join(root, name), filt, order)
            names.append(name)
    d = Daemon(flightd_bin, root, args=["-tile-cache-bytes", "0"])
    try:
        yield root, names, d
    finally:
        d.stop(check=False)


def test_partial_tiles_match_tiledb(served):
    import pyarrow.flight as fl
    root, names, d = served
    client = d.client()
    rng = random.Random(14)
    try:
        for name in names:
            for _ in range(10):
                h, w = 1 + rng.randrange(4), 1 + rng.randrange(40)
                if rng.random() < 0.5:
                    h, w = w, h
                x0, y0 = rng.randrange(SHAPE[0] - h + 1), rng.randrange(SHAPE[1] - w + 1)
                x1, y1 = x0 + h - 1, y0 + w - 1
                q = {"array": name, "subarray": {"x": [[x0, x1]], "y": [[y0, y1]]}, "layout": "row-major"}
                got = client.do_get(fl.Ticket(json.dumps(q).encode())).read_all()
                with tiledb.open(os.path.join(root, name)) as A:
                    ref = A.query(order="C")[x0:x1 + 1, y0:y1 + 1]
                # tiledb-py gives a nullable attribute as a masked array.
                rv = ref["v"]
                rvalid = ~np.ma.getmaskarray(rv).ravel()
                gvalid = got.column("v").is_valid().to_numpy(zero_copy_only=False)
                gv = got.column("v").to_numpy(zero_copy_only=False)
                assert got.num_rows == rvalid.size, f"{q}: {got.num_rows} rows, TileDB {rvalid.size}"
                assert np.array_equal(gvalid, rvalid), f"{q}: validity differs"
                assert np.array_equal(gv[gvalid], np.ma.getdata(rv).ravel()[rvalid]), f"{q}: v differs"
                assert np.array_equal(got.column("w").to_numpy(), ref["w"].ravel()), f"{q}: w differs"
    finally:
        client.close()
