"""create_array without chunks/blocks makes the chunk and block shapes
python-blosc2 chooses on this machine (blosc2.empty(shape, dtype)), over
many shapes and dtypes; and the array it makes reads back in python-blosc2
with those shapes."""

import os

import blosc2
import numpy as np
import pytest

from flightd_fixture import action, flightd, flightd_bin  # noqa: F401

SHAPES = [(10,), (1000,), (10**6,), (12345,), (999983,), (4096, 8192), (1000, 1000), (7, 13), (1, 1),
          (2**20, 3), (17, 10**5), (100, 100, 100), (3, 5, 7, 11), (50, 60, 70, 80), (256, 256, 256),
          (1, 2, 3, 4, 5, 6), (0, 10)]
DTYPES = ["|u1", "<i2", "<f4", "<f8", "<c16", "|S7", "<U10", "<M8[ns]", "|b1"]


@pytest.fixture(scope="module")
def client(flightd):
    c = flightd.client()
    yield c
    c.close()


def test_defaults_match_blosc2_empty(client, flightd):
    n = 0
    for si, shape in enumerate(SHAPES):
        for dt in DTYPES:
            want = blosc2.empty(shape, dtype=np.dtype(dt))
            name = f"defaults/a{si}_{''.join(ch for ch in dt if ch.isalnum())}.b2nd"
            d = action(client, "create_array", {"array": name, "type": "b2nd", "shape": list(shape), "dtype": dt})
            assert (tuple(d["chunks"]), tuple(d["blocks"])) == (want.chunks, want.blocks), (shape, dt)
            n += 1
            if si < 8 or 0 in shape:  # python-blosc2 opens what we made with the same shapes
                a = blosc2.open(os.path.join(flightd.data, name))
                assert a.chunks == want.chunks and a.blocks == want.blocks and a.shape == shape
                assert a[...].shape == shape
            action(client, "drop_array", {"array": name})
    assert n == len(SHAPES) * len(DTYPES)


def test_given_chunks_or_blocks_as_blosc2(client, flightd):
    # Only chunks: blocks are computed inside them; only blocks: python-blosc2
    # keeps their size, not their shape, and chunks span the shape.
    for shape, chunks, blocks in [((1000, 1000), (100, 100), None), ((1000, 1000), None, (10, 10)),
                                  ((300, 70), (64, 70), None), ((5000,), None, (100,))]:
        kw = {k: v for k, v in (("chunks", chunks), ("blocks", blocks)) if v}
        want = blosc2.empty(shape, dtype="<f8", **kw)
        body = {"array": "defaults/g.b2nd", "type": "b2nd", "shape": list(shape), "dtype": "<f8"}
        body.update({k: list(v) for k, v in kw.items()})
        d = action(client, "create_array", body)
        assert (tuple(d["chunks"]), tuple(d["blocks"])) == (want.chunks, want.blocks), (shape, kw)
        action(client, "drop_array", {"array": "defaults/g.b2nd"})
