#!/usr/bin/env python3
"""Golden tiles for package filters (pipeline runner and compressors),
written by TileDB itself.

Usage: filters_cases.py OUTDIR

Every case is a 1-D dense array with exactly one tile and one attribute "a",
so each attribute data file of the fragment is exactly one filtered tile:
u64 chunk count, then per chunk u32 original length, u32 filtered length,
u32 metadata length, metadata, data. Fixed-size attributes have one file
(a0.tdb); var-sized ones have the offsets tile (a0.tdb) and the values tile
(a0_var.tdb).

For each case NAME the script writes (gzip-compressed, to stay small):
  NAME.tdb.gz    a0.tdb as TileDB wrote it
  NAME.var.gz    a0_var.tdb (var-sized cases only)
  NAME.out.gz    the attribute's values as TileDB reads them back
  NAME.offs.gz   var-sized cases: the cell offsets (u64 LE, one per cell)
and cases.json lists every case: TileDB datatype, cell_val_num, the filter
pipelines (attribute and offsets), the stored max chunk size and the
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


def _fragment_file(uri, name):
    frags = os.path.join(uri, "__fragments")
    (frag,) = os.listdir(frags)
    return os.path.join(frags, frag, name)


def _put(outdir, name, data):
    with gzip.GzipFile(os.path.join(outdir, name), "wb", mtime=0) as f:
        f.write(data)


def _mk(spec):
    """spec: (name, options) -> a tiledb filter."""
    name, opt = spec
    if name == "gzip":
        return tiledb.GzipFilter(level=opt.get("level", -1))
    if name == "zstd":
        return tiledb.ZstdFilter(level=opt.get("level", -1))
    if name == "lz4":
        return tiledb.LZ4Filter(level=opt.get("level", -1))
    if name == "bzip2":
        return tiledb.Bzip2Filter(level=opt.get("level", -1))
    if name == "rle":
        return tiledb.RleFilter()
    if name == "dictionary":
        return tiledb.DictionaryFilter()
    if name == "delta":
        return tiledb.DeltaFilter(reinterp_dtype=opt.get("reinterpret"))
    if name == "double_delta":
        return tiledb.DoubleDeltaFilter(reinterp_dtype=opt.get("reinterpret"))
    if name == "bit_width_reduction":
        return tiledb.BitWidthReductionFilter(window=opt.get("window", 256))
    if name == "positive_delta":
        return tiledb.PositiveDeltaFilter(window=opt.get("window", 256))
    if name == "byteshuffle":
        return tiledb.ByteShuffleFilter()
    if name == "bitshuffle":
        return tiledb.BitShuffleFilter()
    if name == "checksum_md5":
        return tiledb.ChecksumMD5Filter()
    if name == "checksum_sha256":
        return tiledb.ChecksumSHA256Filter()
    if name == "xor":
        return tiledb.XORFilter()
    raise ValueError(name)


def _desc(specs):
    out = []
    for name, opt in specs:
        d = {"type": name, "level": opt.get("level", -1)}
        if "reinterpret" in opt:
            d["reinterpret"] = np.dtype(opt["reinterpret"]).name
        if "window" in opt or name in ("bit_width_reduction",
                                       "positive_delta"):
            d["window"] = opt.get("window", 256)
        out.append(d)
    return out


def fixed_case(tmp, outdir, name, tdb_type, values, specs, chunksize=None):
    n = len(values)
    uri = os.path.join(tmp, name)
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, n - 1), tile=n,
                                   dtype=np.uint64))
    fl = tiledb.FilterList([_mk(s) for s in specs], chunksize=chunksize)
    att = tiledb.Attr("a", dtype=values.dtype, filters=fl)
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, attrs=[att]))
    with tiledb.open(uri, "w") as A:
        A[:] = values
    with tiledb.open(uri, "r") as A:
        back = A[:]["a"]
        stored_chunk = A.schema.attr(0).filters.chunksize
    assert back.tobytes() == values.tobytes(), name
    version = tiledb.FragmentInfoList(uri)[0].version
    with open(_fragment_file(uri, "a0.tdb"), "rb") as f:
        _put(outdir, name + ".tdb.gz", f.read())
    _put(outdir, name + ".out.gz", back.tobytes())
    return {"name": name, "type": tdb_type, "cell_val_num": 1, "n": n,
            "version": version, "filters": _desc(specs),
            "max_chunk_size": stored_chunk}


def var_case(tmp, outdir, name, tdb_type, strings, specs, off_specs,
             chunksize=None):
    n = len(strings)
    uri = os.path.join(tmp, name)
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, n - 1), tile=n,
                                   dtype=np.uint64))
    fl = tiledb.FilterList([_mk(s) for s in specs], chunksize=chunksize)
    dt = "ascii" if tdb_type == "string_ascii" else str
    att = tiledb.Attr("a", dtype=dt, var=True, filters=fl)
    schema = tiledb.ArraySchema(
        domain=dom, attrs=[att],
        offsets_filters=tiledb.FilterList([_mk(s) for s in off_specs]))
    tiledb.Array.create(uri, schema)
    vals = np.array(strings, dtype=object)
    with tiledb.open(uri, "w") as A:
        A[:] = vals
    with tiledb.open(uri, "r") as A:
        back = A[:]["a"]
        stored_chunk = A.schema.attr(0).filters.chunksize
    back = [b.decode("utf-8") if isinstance(b, bytes) else b for b in back]
    assert back == list(strings), name
    enc = [s.encode("utf-8") for s in strings]
    offs = np.cumsum([0] + [len(b) for b in enc[:-1]]).astype("<u8")
    version = tiledb.FragmentInfoList(uri)[0].version
    with open(_fragment_file(uri, "a0.tdb"), "rb") as f:
        _put(outdir, name + ".tdb.gz", f.read())
    with open(_fragment_file(uri, "a0_var.tdb"), "rb") as f:
        _put(outdir, name + ".var.gz", f.read())
    _put(outdir, name + ".out.gz", b"".join(enc))
    _put(outdir, name + ".offs.gz", offs.tobytes())
    return {"name": name, "type": tdb_type, "cell_val_num": "var", "n": n,
            "version": version, "filters": _desc(specs),
            "offsets_filters": _desc(off_specs),
            "max_chunk_size": stored_chunk}


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(20240612)
    tmp = tempfile.mkdtemp()
    cases = []

    def walk(dt, n):
        """Smooth data with runs: compresses well, exercises every codec."""
        steps = rng.integers(-3, 4, n)
        steps[rng.random(n) < 0.4] = 0  # runs for RLE
        v = np.cumsum(steps)
        d = np.dtype(dt)
        if d.kind == "M":
            return (1_700_000_000_000 + v * 1000).astype(d)
        if d.kind == "f":
            return (v * 0.25).astype(d)
        info = np.iinfo(d)
        span = min(int(info.max) - int(info.min), 1 << 40)
        return (int(info.min) + (v - v.min() + 17) % span).astype(d)

    types = [("int8", "int8"), ("uint8", "uint8"), ("int16", "int16"),
             ("uint16", "uint16"), ("int32", "int32"), ("uint32", "uint32"),
             ("int64", "int64"), ("uint64", "uint64"),
             ("float32", "float32"), ("float64", "float64"),
             ("datetime64[ms]", "datetime_ms")]
    comp = ["gzip", "zstd", "lz4", "rle", "bzip2", "double_delta", "delta"]
    for flt in comp:
        for dt, tt in types:
            if flt in ("delta", "double_delta") and dt.startswith("float"):
                continue
            cases.append(fixed_case(tmp, outdir, f"{flt}_{tt}", tt,
                                    walk(dt, 700), [(flt, {})]))
        # Multi-chunk tiles (> 64 KiB): 10000 int64 = 80000 bytes.
        cases.append(fixed_case(tmp, outdir, f"{flt}_int64_multichunk",
                                "int64", walk("int64", 10000), [(flt, {})]))
    # Edge data for double delta: wide deltas (raw fallback), 1 and 2
    # values, big unsigned values, and a value width at the threshold.
    big = np.array([0, 2**63 + 5, 2**63 + 9, 2**63 + 2, 7], dtype=np.uint64)
    cases.append(fixed_case(tmp, outdir, "double_delta_uint64_big", "uint64",
                            big[1:4], [("double_delta", {})]))
    raw = rng.integers(-2**15, 2**15, 50).astype(np.int16)
    cases.append(fixed_case(tmp, outdir, "double_delta_int16_raw", "int16",
                            raw, [("double_delta", {})]))
    for n in (1, 2, 3):
        cases.append(fixed_case(tmp, outdir, f"double_delta_int32_n{n}",
                                "int32", walk("int32", n),
                                [("double_delta", {})]))
    i8 = np.array([0, 60, -60, 60, -60, 0], dtype=np.int8)
    cases.append(fixed_case(tmp, outdir, "double_delta_int8_wide", "int8", i8,
                            [("double_delta", {})]))
    u8 = np.array([0, 255, 0, 255, 1, 2], dtype=np.uint8)
    cases.append(fixed_case(tmp, outdir, "double_delta_uint8_wrap", "uint8",
                            u8, [("double_delta", {})]))
    # Reinterpret datatypes (floats become integers, widths change).
    f64 = np.abs(walk("float64", 900)) + 1000  # same sign: int64 deltas fit
    cases.append(fixed_case(tmp, outdir, "double_delta_float64_as_int64",
                            "float64", f64,
                            [("double_delta", {"reinterpret": "int64"})]))
    cases.append(fixed_case(tmp, outdir, "delta_float32_as_int32", "float32",
                            walk("float32", 900),
                            [("delta", {"reinterpret": "int32"})]))
    # (delta wraps, so mixed signs are fine there)
    cases.append(fixed_case(tmp, outdir, "delta_uint64_as_uint8", "uint64",
                            walk("uint64", 300),
                            [("delta", {"reinterpret": "uint8"})]))
    cases.append(fixed_case(tmp, outdir, "double_delta_int64_as_int16",
                            "int64", walk("int64", 300),
                            [("double_delta", {"reinterpret": "int16"})]))
    # Levels.
    for flt, lvl in (("gzip", 0), ("gzip", 9), ("zstd", 19), ("zstd", -5),
                     ("bzip2", 9), ("zstd", -100)):
        cases.append(fixed_case(tmp, outdir, f"{flt}_int32_level{lvl}",
                                "int32", walk("int32", 5000),
                                [(flt, {"level": lvl})]))
    # The stored max chunk size: only 0 (no chunking) matters.
    for cs in (1000, 0):
        cases.append(fixed_case(tmp, outdir, f"zstd_int64_chunksize{cs}",
                                "int64", walk("int64", 10000),
                                [("zstd", {})], chunksize=cs))
    # RLE: cell size 1 with long runs (> 65535 run limit).
    cases.append(fixed_case(tmp, outdir, "rle_uint8_longruns", "uint8",
                            np.repeat(np.array([3, 4], np.uint8), 70000),
                            [("rle", {})]))

    # Var-sized strings.
    words = ["alpha", "beta", "", "gamma", "b" * 300, "δέλτα", "ε"]
    reps = rng.integers(0, len(words), 600)
    runny = [words[i] for i in np.repeat(reps, rng.integers(1, 6, 600))]
    ascii_runny = [s for s in runny if s.isascii()]
    for flt in ("rle", "dictionary"):
        cases.append(var_case(tmp, outdir, f"{flt}_utf8", "string_utf8",
                              runny, [(flt, {})], []))
        cases.append(var_case(tmp, outdir, f"{flt}_ascii", "string_ascii",
                              ascii_runny, [(flt, {})], [("zstd", {})]))
        cases.append(var_case(tmp, outdir, f"{flt}_utf8_short",
                              "string_utf8", ["x", "x", "yz"], [(flt, {})],
                              []))
    # Chunked var tiles: cell sizes that exercise the 50%/150% rule and
    # cells larger than a chunk.
    sizes = list(rng.integers(0, 3000, 120)) + [40000, 70000, 5, 100000,
                                                 33000, 20000, 64000, 1]
    var_strings = ["".join(chr(97 + (i + j) % 26) for j in range(min(s, 26)))
                   * (s // 26) + "q" * (s % 26) for i, s in enumerate(sizes)]
    for flt in ("zstd", "lz4", "gzip"):
        cases.append(var_case(tmp, outdir, f"{flt}_utf8_chunked",
                              "string_utf8", var_strings, [(flt, {})],
                              [(flt, {})]))
    cases.append(var_case(tmp, outdir, "none_ascii_chunked", "string_ascii",
                          var_strings, [], []))

    # Pipelines of several filters (the non-compression ones are package
    # filters/codecs).
    multi = [
        ("bwr_zstd_int32", "int32", walk("int32", 20000),
         [("bit_width_reduction", {}), ("zstd", {})]),
        ("posdelta_byteshuffle_lz4_uint64", "uint64",
         np.cumsum(rng.integers(0, 9, 9000)).astype(np.uint64),
         [("positive_delta", {}), ("byteshuffle", {}), ("lz4", {})]),
        ("dd_bzip2_int64", "int64", walk("int64", 9000),
         [("double_delta", {}), ("bzip2", {})]),
        ("bitshuffle_zstd_md5_float32", "float32", walk("float32", 20000),
         [("bitshuffle", {}), ("zstd", {}), ("checksum_md5", {})]),
        ("xor_zstd_float64", "float64", walk("float64", 9000),
         [("xor", {}), ("zstd", {})]),
        ("byteshuffle_rle_int16", "int16", walk("int16", 40000),
         [("byteshuffle", {}), ("rle", {})]),
        ("delta_sha256_lz4_int32", "int32", walk("int32", 3000),
         [("delta", {}), ("checksum_sha256", {}), ("lz4", {})]),
    ]
    for name, tt, vals, specs in multi:
        cases.append(fixed_case(tmp, outdir, name, tt, vals, specs))
    cases.append(var_case(tmp, outdir, "rle_zstd_ascii", "string_ascii",
                          ascii_runny, [("rle", {}), ("zstd", {})], []))
    cases.append(var_case(tmp, outdir, "dictionary_gzip_md5_utf8",
                          "string_utf8", runny,
                          [("dictionary", {}), ("gzip", {}),
                           ("checksum_md5", {})], []))
    cases.append(var_case(tmp, outdir, "zstd_utf8_offsets_dd_bwr",
                          "string_utf8", var_strings, [("zstd", {})],
                          [("double_delta", {}), ("bit_width_reduction", {}),
                           ("zstd", {})]))

    with open(os.path.join(outdir, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1, sort_keys=True)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
