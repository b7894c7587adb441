#!/usr/bin/env python3
"""Golden tiles for package filters/codecs, written by TileDB itself.

Usage: filters_codecs_cases.py OUTDIR

Every case is a dense array with exactly one tile holding one attribute "a"
filtered by one of the non-compression filters. Because the tile is the
whole fragment, the attribute's data file (a0.tdb) is exactly one filtered
tile: u64 chunk count, then per chunk u32 original length, u32 filtered
length, u32 metadata length, metadata, data.

For each case NAME the script writes (gzip-compressed, to stay small):
  NAME.tdb.gz   the attribute data file exactly as TileDB wrote it
  NAME.out.gz   the attribute's bytes as TileDB reads them back
  NAME.in.gz    the bytes the array was written with (only when they differ
                from NAME.out, i.e. for lossy filters)
and cases.json lists every case with its datatype, filter options and the
fragment's format version.
"""

import gzip
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import tiledb

KEY = "0123456789abcdeF0123456789abcdeF"  # 32 bytes: AES-256


def _fragment_file(uri, name):
    frags = os.path.join(uri, "__fragments")
    (frag,) = os.listdir(frags)
    return os.path.join(frags, frag, name)


def _put(outdir, name, data):
    with gzip.GzipFile(os.path.join(outdir, name), "wb", mtime=0) as f:
        f.write(data)


def dense_1d(tmp, outdir, name, values, filters, chunksize=None, ctx=None,
             meta=None):
    n = len(values)
    uri = os.path.join(tmp, name)
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, n - 1), tile=n,
                                   dtype=np.uint64, ctx=ctx), ctx=ctx)
    fl = tiledb.FilterList(filters, chunksize=chunksize, ctx=ctx)
    att = tiledb.Attr("a", dtype=values.dtype, filters=fl, ctx=ctx)
    schema = tiledb.ArraySchema(domain=dom, attrs=[att], sparse=False,
                                ctx=ctx)
    tiledb.Array.create(uri, schema, ctx=ctx)
    with tiledb.open(uri, "w", ctx=ctx) as A:
        A[:] = values
    with tiledb.open(uri, "r", ctx=ctx) as A:
        back = A[:]["a"]
    version = tiledb.FragmentInfoList(uri, ctx=ctx)[0].version
    with open(_fragment_file(uri, "a0.tdb"), "rb") as f:
        _put(outdir, name + ".tdb.gz", f.read())
    _put(outdir, name + ".out.gz", back.tobytes())
    lossy = back.tobytes() != values.tobytes()
    if lossy:
        _put(outdir, name + ".in.gz", values.tobytes())
    case = {"name": name, "dtype": str(values.dtype), "n": n,
            "version": version, "lossy": lossy}
    case.update(meta or {})
    return case


def webp_case(tmp, outdir, name, fmt, lossless, quality, img):
    h, w, depth = img.shape
    uri = os.path.join(tmp, name)
    dom = tiledb.Domain(
        tiledb.Dim("y", domain=(0, h - 1), tile=h, dtype=np.uint32),
        tiledb.Dim("x", domain=(0, w * depth - 1), tile=w * depth,
                   dtype=np.uint32))
    f = tiledb.WebpFilter(input_format=fmt, quality=quality,
                          lossless=lossless)
    att = tiledb.Attr("a", dtype=np.uint8, filters=tiledb.FilterList([f]))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, attrs=[att]))
    flat = img.reshape(h, w * depth)
    with tiledb.open(uri, "w") as A:
        A[:] = flat
    with tiledb.open(uri, "r") as A:
        back = A[:]["a"]
    version = tiledb.FragmentInfoList(uri)[0].version
    with open(_fragment_file(uri, "a0.tdb"), "rb") as fh:
        _put(outdir, name + ".tdb.gz", fh.read())
    _put(outdir, name + ".out.gz", back.tobytes())
    lossy = back.tobytes() != flat.tobytes()
    if lossy:
        _put(outdir, name + ".in.gz", flat.tobytes())
    return {"name": name, "dtype": "uint8", "n": int(flat.size),
            "version": version, "lossy": lossy, "filter": "webp",
            "webp_format": int(fmt), "lossless": lossless,
            "quality": quality, "y_extent": h, "x_extent": w * depth}


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(20240611)
    tmp = tempfile.mkdtemp()
    cases = []
    ints = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
            "uint64"]
    allnum = ints + ["float32", "float64", "datetime64[ns]"]

    def sample(dt, n, small=False):
        if dt.startswith("datetime"):
            base = np.int64(1_700_000_000_000_000_000)
            v = base + np.cumsum(rng.integers(0, 10**6, n)).astype(np.int64)
            return v.astype("datetime64[ns]")
        d = np.dtype(dt)
        if d.kind == "f":
            return (rng.standard_normal(n) * 100).astype(d)
        info = np.iinfo(d)
        if small:  # narrow range: bit width reduction really reduces
            lo = max(info.min, -50)
            return rng.integers(lo, lo + 100, n).astype(d)
        return rng.integers(info.min, info.max, n, dtype=d, endpoint=True)

    def ascending(dt, n):
        d = np.dtype(dt)
        if dt.startswith("datetime"):
            return sample(dt, n)
        step = rng.integers(0, 3, n)
        start = np.iinfo(d).min if d.kind == "i" else 0
        return (start + np.cumsum(step)).astype(d)  # n <= 101: fits int8

    odd = 37  # not a multiple of 8 elements
    for dt in allnum:
        tag = dt.replace("datetime64[ns]", "datetime_ns")
        for flt, name in [(tiledb.ByteShuffleFilter(), "byteshuffle"),
                          (tiledb.BitShuffleFilter(), "bitshuffle"),
                          (tiledb.XORFilter(), "xor")]:
            for n in (odd, 64):
                cases.append(dense_1d(tmp, outdir, f"{name}_{tag}_{n}",
                                      sample(dt, n), [flt],
                                      meta={"filter": name}))
        for flt, name in [(tiledb.ChecksumMD5Filter(), "checksum_md5"),
                          (tiledb.ChecksumSHA256Filter(), "checksum_sha256")]:
            cases.append(dense_1d(tmp, outdir, f"{name}_{tag}_{odd}",
                                  sample(dt, odd), [flt],
                                  meta={"filter": name}))
        # Bit width reduction and positive delta: applied to integers and
        # (from format 20) datetimes; TileDB refuses them on floats.
        if np.dtype(dt).kind == "f":
            continue
        for win in (8, 256):
            cases.append(dense_1d(
                tmp, outdir, f"bit_width_reduction_{tag}_w{win}",
                sample(dt, 101, small=True),
                [tiledb.BitWidthReductionFilter(window=win)],
                meta={"filter": "bit_width_reduction", "window": win}))
            vals = ascending(dt, 101)
            cases.append(dense_1d(
                tmp, outdir, f"positive_delta_{tag}_w{win}", vals,
                [tiledb.PositiveDeltaFilter(window=win)],
                meta={"filter": "positive_delta", "window": win}))
    # Wide-range windows (no reduction possible) and mixed windows.
    mixed = np.concatenate([rng.integers(0, 200, 50),
                            rng.integers(-2**40, 2**40, 50),
                            rng.integers(1000, 70000, 50)]).astype(np.int64)
    cases.append(dense_1d(tmp, outdir, "bit_width_reduction_int64_mixed",
                          mixed, [tiledb.BitWidthReductionFilter(window=400)],
                          meta={"filter": "bit_width_reduction",
                                "window": 400}))
    # Multi-chunk tiles (> 64 KiB, smooth data so the files gzip well).
    big = np.arange(9000, dtype=np.int64) * 3 + 1_000_000
    cases.append(dense_1d(tmp, outdir, "bitshuffle_int64_multichunk", big,
                          [tiledb.BitShuffleFilter()],
                          meta={"filter": "bitshuffle"}))
    cases.append(dense_1d(tmp, outdir, "byteshuffle_float64_multichunk",
                          np.linspace(0, 1, 9000), [tiledb.ByteShuffleFilter()],
                          meta={"filter": "byteshuffle"}))
    cases.append(dense_1d(tmp, outdir, "bitshuffle_int16_chunk1000",
                          (np.arange(3001) % 700).astype(np.int16),
                          [tiledb.BitShuffleFilter()], chunksize=1000,
                          meta={"filter": "bitshuffle"}))
    pd_default = tiledb.PositiveDeltaFilter()  # TileDB's default window
    cases.append(dense_1d(tmp, outdir, "positive_delta_uint64_multichunk",
                          np.arange(9000, dtype=np.uint64) * 7,
                          [pd_default],
                          meta={"filter": "positive_delta",
                                "window": pd_default.window}))
    # Scale float: every byte width, both float types.
    for dt in ("float32", "float64"):
        for bw in (1, 2, 4, 8):
            vals = (rng.standard_normal(53) * 4 + 10).astype(dt)
            vals[:4] = [10.0, 10.25, 10.754, 11.0001]
            vals[4:8] = [10.125, 10.375, 9.875, 9.625]  # exact .5 ties
            f = tiledb.FloatScaleFilter(factor=0.25, offset=10.0,
                                        bytewidth=bw)
            cases.append(dense_1d(tmp, outdir, f"scale_float_{dt}_bw{bw}",
                                  vals, [f],
                                  meta={"filter": "scale_float", "scale": 0.25,
                                        "offset": 10.0, "byte_width": bw}))
    vals = rng.standard_normal(40) * 1e3
    cases.append(dense_1d(tmp, outdir, "scale_float_float64_bw4_fine", vals,
                          [tiledb.FloatScaleFilter(factor=1e-3, offset=-7.5,
                                                   bytewidth=4)],
                          meta={"filter": "scale_float", "scale": 1e-3,
                                "offset": -7.5, "byte_width": 4}))
    # Encrypted arrays: TileDB appends AES-256-GCM to every pipeline.
    ctx = tiledb.Ctx(tiledb.Config({"sm.encryption_type": "AES_256_GCM",
                                    "sm.encryption_key": KEY}))
    cases.append(dense_1d(tmp, outdir, "aes_int32", sample("int32", 300), [],
                          ctx=ctx, meta={"filter": "aes_256_gcm",
                                         "key": KEY}))
    cases.append(dense_1d(tmp, outdir, "aes_md5_float64",
                          sample("float64", 2000),
                          [tiledb.ChecksumMD5Filter(ctx=ctx)], ctx=ctx,
                          chunksize=4096,
                          meta={"filter": "checksum_md5+aes_256_gcm",
                                "key": KEY}))
    # WebP on uint8 images, if this TileDB build has libwebp.
    yy, xx = np.mgrid[0:24, 0:20]
    rgba = np.stack([(xx * 12) % 256, (yy * 10) % 256, (xx * yy) % 256,
                     255 - (xx + yy) * 3], axis=-1).astype(np.uint8)
    rgba[rgba[..., 3] < 200, 3] = 255  # keep alpha mostly opaque
    rgba[:3, :3, 3] = 0  # a few transparent pixels
    W = tiledb.filter.lt.WebpInputFormat
    try:
        for fmt, label, img in [(W.WEBP_RGB, "rgb", rgba[..., :3]),
                                (W.WEBP_RGBA, "rgba", rgba),
                                (W.WEBP_BGR, "bgr", rgba[..., :3]),
                                (W.WEBP_BGRA, "bgra", rgba)]:
            for lossless, q in [(True, 100.0), (False, 80.0)]:
                tag = "lossless" if lossless else "lossy"
                cases.append(webp_case(tmp, outdir, f"webp_{label}_{tag}",
                                       fmt, lossless, q,
                                       np.ascontiguousarray(img)))
    except tiledb.TileDBError as e:
        print("webp cases skipped:", e, file=sys.stderr)
    with open(os.path.join(outdir, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1, sort_keys=True)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
