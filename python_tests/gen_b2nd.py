"""Write the Blosc2 NDArray (.b2nd) fixture matrix with python-blosc2.

Usage: gen_b2nd.py OUTDIR [--golden]

For every case it writes OUTDIR/arrays/<case>.b2nd (a file for a contiguous
frame, a directory for a sparse one) and OUTDIR/expect/<case>.raw: the
bytes of `blosc2.open(path)[...]` in C order (the dtype's own byte order),
which is what tileflight must read. OUTDIR/index.json lists the cases with
their dtype, shape, chunks, blocks, codec, filters, frame kind and the
special chunks they hold. --golden writes the small subset committed under
testdata/b2nd (Go tests run on it without Python).

The matrix: every dtype of docs/protocol.md, "Blosc2 NDArrays" (i1..u8, f2, f4, f8, bool, c8,
c16, datetime64/timedelta64 units, S, U, V, structured, big-endian) x the
codecs (blosclz, lz4, lz4hc, zlib, zstd, zstd with a dictionary) x the
filters (none, shuffle, bitshuffle, delta, trunc_prec, bytedelta, and
chains) x both frame kinds x shapes of 1 to 4 dimensions whose chunks and
blocks do not divide them x special chunks (zeros, NaN, uninitialized, a
repeated value) x split modes and clevel 0 (memcpyed chunks). Rather than
the full cross product, every value of each axis appears with rotating
values of the others.
"""

import json
import os
import shutil
import sys

import blosc2
import numpy as np

C = blosc2.Codec
F = blosc2.Filter

SHAPES = [
    ((37,), (10,), (4,)),
    ((13, 11), (5, 4), (2, 3)),
    ((7, 9, 5), (3, 4, 5), (2, 2, 3)),
    ((5, 4, 6, 3), (2, 3, 4, 2), (1, 2, 3, 2)),
    ((64, 48), (32, 16), (8, 16)),
]

DTYPES = ["i1", "i2", "<i4", "<i8", "u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8", "?",
          "<c8", "<c16", "<M8[s]", "<M8[ms]", "<M8[us]", "<M8[ns]", "<M8[D]", "<M8[h]",
          "<m8[s]", "<m8[ms]", "<m8[us]", "<m8[ns]", "<m8[D]", "S5", "<U3", "V4",
          ">i4", ">f8", ">u2", ">c16", ">M8[ms]", ">U2",
          [("a", "<i4"), ("b", "<f8"), ("c", "S3")],
          [("x", ">i2"), ("y", "<f4"), ("flag", "?"), ("when", "<M8[us]")]]

CODECS = [C.BLOSCLZ, C.LZ4, C.LZ4HC, C.ZLIB, C.ZSTD]

FILTER_SETS = [
    [],
    [F.SHUFFLE],
    [F.BITSHUFFLE],
    [F.DELTA],
    [F.DELTA, F.SHUFFLE],
    [F.SHUFFLE, F.BYTEDELTA],
    [F.TRUNC_PREC, F.SHUFFLE],
    [F.BITSHUFFLE, F.DELTA],
]


def values(dt, shape, seed):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dt)
    n = int(np.prod(shape))
    if dt.names:
        out = np.zeros(n, dtype=dt)
        for name in dt.names:
            out[name] = values(dt.fields[name][0], (n,), seed + 1)
        return out.reshape(shape)
    k = dt.kind
    if k == "b":
        v = rng.integers(0, 2, n).astype(bool)
    elif k in "iu":
        info = np.iinfo(dt)
        # smooth-ish data so codecs find matches, plus some noise
        base = np.arange(n) % 50
        v = (base + rng.integers(0, 3, n)).astype(dt)
        v[::17] = info.max
        v[::19] = info.min
    elif k == "f":
        v = (np.sin(np.arange(n) / 7.0) * 100 + rng.normal(0, 0.01, n)).astype(dt)
        if n > 3:
            v[1] = np.nan
            v[2] = np.inf
    elif k == "c":
        v = (np.arange(n) + 1j * rng.normal(0, 1, n)).astype(dt)
    elif k == "M":
        v = (np.arange(n, dtype=np.int64) * 3600 + 1_700_000_000).astype(dt.newbyteorder("=")).astype(dt)
        if n > 2:
            v[1] = np.datetime64("NaT")
    elif k == "m":
        v = (np.arange(n, dtype=np.int64) - 5).astype(dt.newbyteorder("=")).astype(dt)
    elif k == "S":
        words = [b"", b"a", b"bb", b"ccc", b"dddd", b"eeeee", b"\x00x"]
        v = np.array([words[i % len(words)][:dt.itemsize] for i in range(n)], dtype=dt)
    elif k == "U":
        words = ["", "a", "é", "日本", "xyz", "\U0001F600"]
        v = np.array([words[i % len(words)][:dt.itemsize // 4] for i in range(n)], dtype=dt)
    elif k == "V":
        v = np.frombuffer(rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).tobytes(), dtype=dt)
    else:
        raise ValueError(dt)
    return v.reshape(shape)


def filters_for(fs, dt):
    dt = np.dtype(dt)
    fl = list(fs)
    meta = [0] * len(fl)
    if F.TRUNC_PREC in fl:
        if dt.kind != "f" or dt.itemsize not in (4, 8):
            fl = [f for f in fl if f != F.TRUNC_PREC]
            meta = [0] * len(fl)
        else:
            meta[fl.index(F.TRUNC_PREC)] = 10
    return fl, meta


class Matrix:
    def __init__(self, out):
        self.out = out
        self.cases = []
        os.makedirs(os.path.join(out, "arrays"), exist_ok=True)
        os.makedirs(os.path.join(out, "expect"), exist_ok=True)

    def path(self, name):
        return os.path.join(self.out, "arrays", name + ".b2nd")

    def add(self, name, data, desc, special=None, **kw):
        """The array written at path(name); data is what was written (None:
        take blosc2's read)."""
        a = blosc2.open(self.path(name))
        got = a[...]
        # The reference is python-blosc2's whole-chunk decompression on one
        # thread. Its slice reads (a[...]) decode with a block mask, and with
        # the delta filter a block other than 0 may then XOR with a block 0
        # that was not decoded (or, with threads, not finished): those reads
        # are wrong where they differ, and the index records it.
        ref = chunkwise(a)
        kw["blosc2_slice_agrees"] = got.tobytes() == ref.tobytes()
        if data is not None and not kw.get("lossy"):
            assert ref.tobytes() == np.asarray(data).tobytes(), f"{name}: blosc2 does not read back what was written"
        if not kw.get("skip_unwritten"):
            got = ref
        with open(os.path.join(self.out, "expect", name + ".raw"), "wb") as f:
            f.write(np.ascontiguousarray(got).tobytes())
        cp = a.schunk.cparams
        self.cases.append({
            "case": name, "description": desc,
            "dtype": a.dtype.str if a.dtype.names is None else str(a.dtype.descr),
            "shape": list(a.shape), "chunks": list(a.chunks), "blocks": list(a.blocks),
            "codec": cp.codec.name.lower(), "clevel": cp.clevel,
            "filters": [f.name.lower() for f in cp.filters if f != F.NOFILTER],
            "contiguous": a.schunk.contiguous if hasattr(a.schunk, "contiguous") else os.path.isfile(self.path(name)),
            "special": special or [],
            "vlmeta": {k: v for k, v in a.schunk.vlmeta.getall().items()},
            **kw,
        })

    def write(self, name, data, chunks, blocks, codec=C.ZSTD, clevel=5, filters=(F.SHUFFLE,),
              contiguous=True, use_dict=False, splitmode=None, desc="", vlmeta=None):
        fl, meta = filters_for(filters, data.dtype)
        cparams = {"codec": codec, "clevel": clevel, "filters": fl, "filters_meta": meta, "use_dict": use_dict}
        if splitmode is not None:
            cparams["splitmode"] = splitmode
        p = self.path(name)
        a = blosc2.asarray(data, urlpath=p, mode="w", chunks=chunks, blocks=blocks,
                           contiguous=contiguous, cparams=cparams)
        if vlmeta:
            for k, v in vlmeta.items():
                a.schunk.vlmeta[k] = v
        del a
        self.add(name, data, desc, lossy=F.TRUNC_PREC in fl)

    def done(self):
        with open(os.path.join(self.out, "index.json"), "w") as f:
            json.dump({"blosc2_version": blosc2.__version__, "cases": self.cases}, f, indent=1, default=str)


def chunkwise(a):
    """The array read chunk by chunk with whole-chunk decompression, on one
    thread (with several, c-blosc2 lets a block XOR with block 0 before
    block 0's later filters are undone when delta is not the last filter
    undone)."""
    nthreads = blosc2.set_nthreads(1)
    try:
        return _chunkwise(a)
    finally:
        blosc2.set_nthreads(nthreads)


def _chunkwise(a):
    out = np.empty(a.shape, dtype=a.dtype)
    ext = [(-(-s // c)) * c for s, c in zip(a.shape, a.chunks)]
    grid = [e // c for e, c in zip(ext, a.chunks)]
    extc = [(-(-c // b)) * b for c, b in zip(a.chunks, a.blocks)]
    bper = [e // b for e, b in zip(extc, a.blocks)]
    for n in range(a.schunk.nchunks):
        cc = np.unravel_index(n, grid)
        raw = np.frombuffer(a.schunk.decompress_chunk(n), dtype=a.dtype)
        blocks = raw.reshape(*bper, *a.blocks)  # block-major, then in-block C order
        nd = len(a.shape)
        perm = [x for i in range(nd) for x in (i, nd + i)]
        full = blocks.transpose(perm).reshape(extc)
        sl = tuple(slice(c * cs, min((c + 1) * cs, s)) for c, cs, s in zip(cc, a.chunks, a.shape))
        out[sl] = full[tuple(slice(0, x.stop - x.start) for x in sl)]
    return out


def dtname(dt):
    if isinstance(dt, list):
        return "struct" + "".join(n for n, _ in dt)
    s = np.dtype(dt).str
    return s.replace("<", "le").replace(">", "be").replace("|", "").replace("[", "_").replace("]", "")


def full(m):
    k = 0
    # Every dtype, rotating shapes, codecs, filters and frame kinds.
    for i, dt in enumerate(DTYPES):
        shape, chunks, blocks = SHAPES[i % 4]
        codec = CODECS[i % len(CODECS)]
        fs = FILTER_SETS[i % len(FILTER_SETS)]
        data = values(dt, shape, i)
        m.write(f"dt_{dtname(dt)}", data, chunks, blocks, codec=codec, filters=fs,
                contiguous=(i % 2 == 0), desc=f"dtype {dt}")
    # Every codec x every filter set, on f8 and i4 and u1.
    for ci, codec in enumerate(CODECS):
        for fi, fs in enumerate(FILTER_SETS):
            k += 1
            dt = ["<f8", "<i4", "u1", "<f4"][k % 4]
            shape, chunks, blocks = SHAPES[k % len(SHAPES)]
            data = values(dt, shape, k)
            clevel = [1, 5, 9][k % 3]
            m.write(f"cf_{codec.name.lower()}_{fi}_{dtname(dt)}", data, chunks, blocks, codec=codec,
                    clevel=clevel, filters=fs, contiguous=(k % 2 == 1),
                    desc=f"{codec.name} clevel {clevel} filters {[f.name for f in fs]}")
    # Dictionaries, split modes, memcpyed (clevel 0).
    big = values("<f8", (64, 48), 99)
    for codec in (C.ZSTD, C.LZ4, C.LZ4HC):
        m.write(f"dict_{codec.name.lower()}", big, (32, 16), (8, 16), codec=codec, use_dict=True,
                desc=f"{codec.name} with a dictionary")
    for sm in (blosc2.SplitMode.ALWAYS_SPLIT, blosc2.SplitMode.NEVER_SPLIT):
        m.write(f"split_{sm.name.lower()}", big, (32, 16), (8, 16), splitmode=sm, desc=f"split mode {sm.name}")
    m.write("clevel0", values("<i8", (13, 11), 5), (5, 4), (2, 3), clevel=0, desc="clevel 0: memcpyed chunks")
    # Special chunks.
    for contiguous in (True, False):
        sfx = "c" if contiguous else "s"
        kw = dict(urlpath=None, mode="w", contiguous=contiguous)
        p = m.path(f"sp_zeros_{sfx}")
        blosc2.zeros((20, 30), dtype="<f8", chunks=(8, 16), blocks=(4, 8), urlpath=p, mode="w", contiguous=contiguous)
        m.add(f"sp_zeros_{sfx}", None, "zeros: special chunks", special=["zeros"])
        p = m.path(f"sp_nan_{sfx}")
        blosc2.full((20, 30), np.nan, dtype="<f4", chunks=(8, 16), blocks=(4, 8), urlpath=p, mode="w", contiguous=contiguous)
        m.add(f"sp_nan_{sfx}", None, "NaN fill", special=["nan"])
        p = m.path(f"sp_value_{sfx}")
        blosc2.full((20, 30), 7, dtype="<i2", chunks=(8, 16), blocks=(4, 8), urlpath=p, mode="w", contiguous=contiguous)
        m.add(f"sp_value_{sfx}", None, "repeated value", special=["value"])
        p = m.path(f"sp_uninit_{sfx}")
        a = blosc2.uninit((20, 30), dtype="<i8", chunks=(8, 16), blocks=(4, 8), urlpath=p, mode="w", contiguous=contiguous)
        a[:] = 0  # uninitialized memory reads are unspecified: give it a value
        del a
        m.add(f"sp_uninit_{sfx}", None, "uninit, then written whole")
        p = m.path(f"sp_mixed_{sfx}")
        a = blosc2.zeros((20, 30), dtype="<i4", chunks=(8, 16), blocks=(4, 8), urlpath=p, mode="w", contiguous=contiguous)
        a[3:9, 5:20] = np.arange(6 * 15, dtype="<i4").reshape(6, 15)
        del a
        m.add(f"sp_mixed_{sfx}", None, "zeros with some chunks written", special=["zeros"])
        p = m.path(f"sp_empty_{sfx}")
        a = blosc2.empty((20, 30), dtype="<f8", chunks=(8, 16), blocks=(4, 8), urlpath=p, mode="w", contiguous=contiguous)
        a[0:8, 0:16] = 1.5
        del a
        m.add(f"sp_empty_{sfx}", None, "uninitialized chunks, one written", special=["uninit"], skip_unwritten=True)
    # vlmeta.
    m.write("vlmeta", values("<i4", (10, 10), 1), (5, 5), (5, 5),
            vlmeta={"name": "tileflight", "n": 3, "x": 1.5, "list": [1, 2, 3], "d": {"a": 1}}, desc="vlmeta")
    # 0-sized / one-chunk edge cases.
    m.write("one_chunk", values("<f8", (4, 4), 3), (4, 4), (4, 4), desc="one chunk, one block")
    m.write("big_1d", values("<f8", (100000,), 4), (20000,), (4000,), desc="bigger 1-D with a partial chunk")


def golden(m):
    for i, (dt, s) in enumerate([("<f8", 1), ("<i4", 2), ([("a", "<i4"), ("b", ">f8")], 0), ("<U3", 3), (">i2", 1), ("<M8[ms]", 0)]):
        shape, chunks, blocks = SHAPES[s]
        m.write(f"g_{dtname(dt)}", values(dt, shape, i), chunks, blocks, codec=CODECS[i % 5],
                filters=FILTER_SETS[i % len(FILTER_SETS)], contiguous=(i % 2 == 0), desc=f"golden {dt}")
    p = m.path("g_zeros_s")
    a = blosc2.zeros((20, 30), dtype="<i4", chunks=(8, 16), blocks=(4, 8), urlpath=p, mode="w", contiguous=False)
    a[3:9, 5:20] = 1
    del a
    m.add("g_zeros_s", None, "zeros with some chunks written", special=["zeros"])
    m.write("g_vlmeta", values("<u2", (10, 10), 1), (5, 5), (5, 5), vlmeta={"name": "tileflight", "n": 3}, desc="vlmeta")


def main():
    out = sys.argv[1]
    if os.path.exists(out):
        shutil.rmtree(out)
    m = Matrix(out)
    if "--golden" in sys.argv:
        golden(m)
    else:
        full(m)
    m.done()
    print(f"{len(m.cases)} b2nd cases in {out}")


if __name__ == "__main__":
    main()
