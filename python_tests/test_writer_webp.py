"""WebP tiles written by DoPut, read by TileDB 2.30: for each pixel format
(RGB, BGR, RGBA, BGRA) an array TileDB creates with its WebP filter takes
an image through Flight; TileDB reads exactly our pixels when the filter
is lossless, and, when it is lossy, pixels as close to ours (PSNR) as
TileDB's own write of the same image at the same quality, less half a dB.
The PSNR figures are printed (pytest -s) and kept as user properties."""

import math
import os

import numpy as np
import pyarrow as pa
import pytest
import tiledb

from flightd_fixture import cmd, flightd, flightd_bin, put, read  # noqa: F401 (fixtures)

FORMATS = {"rgb": (1, 3), "bgr": (2, 3), "rgba": (3, 4), "bgra": (4, 4)}
H, W = 40, 56  # pixels; tiles of 20 x 28 pixels: 2 x 2 tiles
TH, TW = 20, 28


def image(depth, seed):
    """A smooth picture with noise and an alpha ramp, some of it fully
    transparent (libwebp may drop colour under alpha 0 unless told not to)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W]
    chans = [128 + 100 * np.sin(x / 7 + c) * np.cos(y / 9 - c) for c in range(3)]
    if depth == 4:
        alpha = np.clip((x - 10) * 8, 0, 255)
        chans.append(alpha)
    img = np.stack(chans, axis=-1) + rng.normal(0, 6, (H, W, depth))
    if depth == 4:
        img[..., 3] = chans[3]
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def psnr(a, b):
    se = np.sum((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    if se == 0:
        return math.inf
    return 10 * math.log10(255 * 255 / (se / a.size))


def create(uri, fmt, depth, lossless, quality):
    dom = tiledb.Domain(tiledb.Dim("y", domain=(0, H - 1), tile=TH, dtype=np.uint32),
                        tiledb.Dim("x", domain=(0, W * depth - 1), tile=TW * depth, dtype=np.uint32))
    f = tiledb.WebpFilter(input_format=fmt, quality=quality, lossless=lossless)
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("px", dtype=np.uint8, filters=tiledb.FilterList([f]))]))


def tiledb_read(uri):
    with tiledb.open(uri) as A:
        return A[:]["px"]


CASES = [(name, lossless, q) for name in FORMATS for lossless, q in ((True, 100.0), (False, 80.0), (False, 30.0))]


@pytest.mark.parametrize("name,lossless,quality", CASES,
                         ids=[f"{n}-{'lossless' if ll else f'q{int(q)}'}" for n, ll, q in CASES])
def test_doput_webp_read_by_tiledb(flightd, name, lossless, quality, record_property):
    fmt, depth = FORMATS[name]
    tag = f"webp_{name}_{'lossless' if lossless else int(quality)}"
    ours, theirs = os.path.join(flightd.data, tag), os.path.join(flightd.data, tag + "_tiledb")
    create(ours, fmt, depth, lossless, quality)
    create(theirs, fmt, depth, lossless, quality)
    img = image(depth, seed=len(tag)).reshape(H, W * depth)

    c = flightd.client()
    try:
        res = put(c, cmd(array=tag, subarray={"y": [[0, H - 1]], "x": [[0, W * depth - 1]]}),
                  pa.table({"px": pa.array(img.ravel())}))
        assert res["rows"] == img.size, res
        # Our own read of what we wrote goes through the same decoder as
        # TileDB-written WebP tiles.
        got_flight = read(c, array=tag).column("px").to_numpy().reshape(H, W * depth)
    finally:
        c.close()
    with tiledb.open(theirs, "w") as A:
        A[:] = img
    got, ref = tiledb_read(ours), tiledb_read(theirs)
    assert got.shape == img.shape
    assert np.array_equal(got_flight, got), "TileDB and tileflight decode our tiles differently"
    if lossless:
        # Exact, alpha under transparent pixels included (TileDB's own
        # lossless write does not keep those: libwebp's "exact" is off).
        assert np.array_equal(got, img)
        return
    p_ours, p_theirs = psnr(got, img), psnr(ref, img)
    record_property("psnr_db", round(p_ours, 2))
    record_property("psnr_tiledb_db", round(p_theirs, 2))
    print(f"{tag}: PSNR {p_ours:.2f} dB (TileDB's own write {p_theirs:.2f} dB)")
    assert not np.array_equal(got, img), "a lossy filter that changes nothing is not lossy"
    assert p_ours >= p_theirs - 0.5, (p_ours, p_theirs)


def test_doput_webp_partial_tiles_and_json_schema(flightd):
    """An array created through create_array (JSON) and written in two
    DoPuts that each cover part of a tile: TileDB reads both writes, the
    rest of each tile at the fill value."""
    from flightd_fixture import action
    depth = 3
    body = {"array": "webp_json", "type": "dense",
            "dimensions": [{"name": "y", "type": "uint32", "domain": [0, H - 1], "tile": TH},
                           {"name": "x", "type": "uint32", "domain": [0, W * depth - 1], "tile": TW * depth}],
            "attributes": [{"name": "px", "type": "uint8",
                            "filters": [{"name": "webp", "format": "rgb", "lossless": True}]}]}
    c = flightd.client()
    try:
        action(c, "create_array", body)
        img = image(depth, seed=7).reshape(H, W * depth)
        a = img[3:15, 6:45]
        b = img[22:40, 90:168]
        put(c, cmd(array="webp_json", subarray={"y": [[3, 14]], "x": [[6, 44]]}, timestamp=1),
            pa.table({"px": pa.array(a.ravel())}))
        put(c, cmd(array="webp_json", subarray={"y": [[22, 39]], "x": [[90, 167]]}, timestamp=2),
            pa.table({"px": pa.array(b.ravel())}))
    finally:
        c.close()
    got = tiledb_read(os.path.join(flightd.data, "webp_json"))
    with tiledb.open(os.path.join(flightd.data, "webp_json")) as A:
        fill = A.schema.attr("px").fill[0]
    want = np.full((H, W * depth), fill, dtype=np.uint8)
    want[3:15, 6:45] = a
    want[22:40, 90:168] = b
    assert np.array_equal(got, want)
