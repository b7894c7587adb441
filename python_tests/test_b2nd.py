"""Blosc2 NDArray (.b2nd) arrays through the real daemon, python-blosc2 as
the oracle both ways: every array of gen_b2nd.py's matrix read whole and by
random multi-range subarrays (vs numpy slicing of what blosc2 decodes), the
query keys, partitions, arrays created and written through Flight read back
by blosc2, arrays blosc2 made written by us, vlmeta both ways, and corrupt
or truncated frames reported as DATA_LOSS naming the chunk."""

import json
import os
import shutil
import subprocess
import sys

import blosc2
import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest

from flightd_fixture import (action, cmd, expect_code, flightd, flightd_bin, put, read,  # noqa: F401
                             ticket)

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    env = os.environ.get("TILEFLIGHT_FIXTURES")
    if env:
        d = os.path.join(env, "b2nd")
        if not os.path.isfile(os.path.join(d, "index.json")):
            pytest.fail(f"TILEFLIGHT_FIXTURES={env} but {d}/index.json is missing (run `make fixtures`)")
    else:
        d = str(tmp_path_factory.mktemp("b2nd"))
        subprocess.run([sys.executable, os.path.join(HERE, "gen_b2nd.py"), d], check=True)
    with open(os.path.join(d, "index.json")) as f:
        return d, json.load(f)["cases"]


@pytest.fixture(scope="module")
def served(matrix, flightd):
    """The matrix copied under <data>/b2m/."""
    d, cases = matrix
    dst = os.path.join(flightd.data, "b2m")
    if not os.path.exists(dst):
        shutil.copytree(os.path.join(d, "arrays"), dst, symlinks=False)
    return cases


@pytest.fixture(scope="module")
def client(flightd):
    c = flightd.client()
    yield c
    c.close()


def expected(matrix, case):
    d, _ = matrix
    dt = np.dtype(eval(case["dtype"]) if case["dtype"].startswith("[") else case["dtype"])
    raw = open(os.path.join(d, "expect", case["case"] + ".raw"), "rb").read()
    return np.frombuffer(raw, dtype=dt).reshape(case["shape"])


def as_numpy(col, dt):
    """The Arrow column back as numpy values of dtype dt (native order)."""
    k = dt.kind
    if k == "c":
        flat = col.combine_chunks().flatten().to_numpy(zero_copy_only=False)
        return flat.astype(dt.newbyteorder("=")).view(("f" + str(dt.itemsize // 2))).view(dt.newbyteorder("=")) \
            if False else flat.reshape(-1, 2)[:, 0] + 1j * flat.reshape(-1, 2)[:, 1]
    if k in "SV":
        return [bytes(x) for x in col.to_pylist()]
    if k == "U":
        return col.to_pylist()
    if k in "Mm" and pa.types.is_int64(col.type):
        return col.to_numpy()
    return col.to_numpy(zero_copy_only=False)


def check_column(col, want):
    """want: a numpy array of one plain dtype (any byte order)."""
    dt = want.dtype
    if pa.types.is_date32(col.type):
        c = col.combine_chunks()
        valid = c.is_valid().to_numpy(zero_copy_only=False)
        vals = c.cast(pa.int32()).fill_null(0).to_numpy()
        wi = want.astype(dt.newbyteorder("=")).view("i8")
        nat = wi == np.iinfo("i8").min
        assert np.array_equal(valid, ~nat) and np.array_equal(vals[~nat], wi[~nat])
        return
    got = as_numpy(col, dt)
    if dt.kind in "SV":
        w = [want[i:i + 1].tobytes() for i in range(len(want))]
        assert got == w
    elif dt.kind == "U":
        assert got == want.tolist()
    elif dt.kind in "Mm" and pa.types.is_int64(col.type):
        assert np.array_equal(got, want.astype(dt.newbyteorder("=")).view("i8"))
    elif dt.kind == "c":
        assert np.array_equal(got, want.astype(dt.newbyteorder("=")), equal_nan=True)
    elif dt.kind in "fMm":
        assert np.array_equal(np.asarray(got).astype(dt.newbyteorder("=")), want.astype(dt.newbyteorder("=")), equal_nan=True)
    else:
        assert np.array_equal(np.asarray(got), want.astype(dt.newbyteorder("=")))


def check_table(t, sub):
    """t holds dims + fields in row-major order for the cells of sub."""
    fields = sub.dtype.names or ("value",)
    flat = sub.reshape(-1)
    for name in fields:
        want = flat[name] if sub.dtype.names else flat
        check_column(t.column(name), np.ascontiguousarray(want))


def test_matrix_whole_arrays(client, served, matrix):
    for case in served:
        if case.get("skip_unwritten"):
            continue
        want = expected(matrix, case)
        t = read(client, array="b2m/" + case["case"] + ".b2nd")
        assert t.num_rows == want.size, case["case"]
        idx = np.indices(want.shape).reshape(len(want.shape), -1)
        for d in range(len(want.shape)):
            assert t.column(f"dim{d}").to_numpy().tolist() == idx[d].tolist()
        check_table(t, want)
        # The arrow field carries the NumPy dtype.
        for f in t.schema:
            if not f.name.startswith("dim"):
                assert f.metadata[b"b2nd.dtype"]


def test_matrix_random_subarrays(client, served, matrix):
    rng = np.random.default_rng(7)
    for case in served:
        if case.get("skip_unwritten"):
            continue
        want = expected(matrix, case)
        for _ in range(2):
            sub = {}
            idxs = []
            for d, n in enumerate(want.shape):
                rs = []
                for _ in range(rng.integers(1, 3)):
                    lo = int(rng.integers(0, n))
                    hi = int(rng.integers(lo, n))
                    rs.append([lo, hi])
                sub[f"dim{d}"] = rs
                idxs.append(np.concatenate([np.arange(lo, hi + 1) for lo, hi in rs]))
            t = read(client, array="b2m/" + case["case"] + ".b2nd", subarray=sub, batch_rows=17)
            check_table(t, want[np.ix_(*idxs)])


def test_columns_layouts_limit_and_batches(client, served, matrix):
    case = next(c for c in served if c["case"] == "dt_structabc")
    want = expected(matrix, case)
    name = "b2m/dt_structabc.b2nd"
    t = read(client, array=name, columns=["b", "dim1"], layout="col-major", batch_rows=5)
    assert t.column_names == ["b", "dim1"]
    wt = np.transpose(want)
    check_column(t.column("b"), np.ascontiguousarray(wt["b"]).reshape(-1))
    t = read(client, array=name, columns=["a"], limit=7)
    assert t.column("a").to_pylist() == want["a"].reshape(-1)[:7].tolist()
    # global: chunk by chunk, block by block; same cells.
    t = read(client, array=name, layout="global")
    assert sorted(t.column("a").to_pylist()) == sorted(want["a"].reshape(-1).tolist())
    r = client.do_get(ticket(array=name, batch_rows=4))
    assert all(b.data.num_rows <= 4 for b in r)


def test_partitions_split_along_chunks(client, served, matrix):
    case = next(c for c in served if c["case"] == "big_1d")
    want = expected(matrix, case)
    info = client.get_flight_info(cmd(array="b2m/big_1d.b2nd", partitions=4))
    assert info.total_records == want.size
    assert len(info.endpoints) > 1
    parts = []
    for ep in info.endpoints:
        q = json.loads(ep.ticket.ticket)
        assert "timestamp" not in q
        lo, hi = q["subarray"]["dim0"][0]
        assert lo % case["chunks"][0] == 0  # cut at chunk boundaries
        parts.append(client.do_get(ep.ticket).read_all())
    t = pa.concat_tables(parts).sort_by("dim0")
    assert np.array_equal(t.column("value").to_numpy(), want, equal_nan=True)


def test_refusals(client, served):
    name = "b2m/dt_lef8.b2nd"
    expect_code("INVALID_ARGUMENT", read, client, array=name, timestamp=5)
    expect_code("INVALID_ARGUMENT", read, client, array=name, columns=["nope"])
    expect_code("INVALID_ARGUMENT", read, client, array=name, subarray={"dim0": [[0, 10 ** 6]]})
    expect_code("NOT_FOUND", read, client, array="b2m/none.b2nd")
    expect_code("INVALID_ARGUMENT", read, client, array=name, filter="nope > 0")
    expect_code("INVALID_ARGUMENT", read, client, array=name, filter="dim0 > 0")  # dense: as TileDB
    expect_code("INVALID_ARGUMENT", read, client, array=name, aggregates={"value": ["null_count"]})


def flight_put(client, name, table, subarray=None, layout=None):
    q = {"array": name}
    if subarray:
        q["subarray"] = subarray
    if layout:
        q["layout"] = layout
    return put(client, cmd(**q), table)


@pytest.mark.parametrize("contiguous", [True, False])
def test_create_put_read_back_by_blosc2(client, flightd, contiguous):
    name = f"w/made_{int(contiguous)}.b2nd"
    d = action(client, "create_array", {"array": name, "type": "b2nd", "shape": [30, 20], "chunks": [8, 16],
                                        "blocks": [4, 8], "dtype": "<f8", "contiguous": contiguous})
    assert d["type"] == "b2nd" and d["codec"] == "zstd" and d["filters"] == ["shuffle"] and d["contiguous"] == contiguous
    assert d["chunk_kinds"] == {"zeros": 8}
    exp = np.zeros((30, 20))
    vals = np.arange(10 * 7, dtype="f8").reshape(10, 7) / 3
    r = flight_put(client, name, pa.table({"value": vals.reshape(-1)}), {"dim0": [[5, 14]], "dim1": [[10, 16]]})
    assert r["rows"] == 70
    exp[5:15, 10:17] = vals
    vals2 = np.arange(30 * 3, dtype="f8").reshape(30, 3)
    # col-major rows
    flight_put(client, name, pa.table({"value": vals2.T.reshape(-1)}), {"dim1": [[0, 2]]}, layout="col-major")
    exp[:, 0:3] = vals2
    a = blosc2.open(os.path.join(flightd.data, name))
    assert np.array_equal(a[...], exp)
    assert a.chunks == (8, 16) and a.blocks == (4, 8) and a.dtype == np.dtype("<f8")
    t = read(client, array=name)
    assert np.array_equal(t.column("value").to_numpy(), exp.reshape(-1))
    # vlmeta both ways
    action(client, "put_metadata", {"array": name, "metadata": {"unit": "K", "n": 3, "xs": [1.5, 2]}})
    a = blosc2.open(os.path.join(flightd.data, name))
    assert a.schunk.vlmeta["unit"] == "K" and a.schunk.vlmeta["n"] == 3 and a.schunk.vlmeta["xs"] == [1.5, 2]
    a = blosc2.open(os.path.join(flightd.data, name), mode="a")
    a.schunk.vlmeta["from_blosc2"] = {"k": [1, 2]}
    del a
    assert action(client, "get_metadata", {"array": name}) == {"unit": "K", "n": 3, "xs": [1.5, 2], "from_blosc2": {"k": [1, 2]}}
    assert action(client, "drop_array", {"array": name}) == {"dropped": name}
    assert not os.path.exists(os.path.join(flightd.data, name))


@pytest.mark.parametrize("dtype,codec,filters", [
    ("<i4", "lz4", ["bitshuffle"]), (">i2", "blosclz", ["delta", "shuffle"]), ("<U3", "zlib", ["shuffle"]),
    ("<M8[ms]", "lz4hc", []), ("S4", "zstd", ["shuffle", "bytedelta"]), ("<f4", "zstd", ["trunc_prec", "shuffle"]),
    ("<c16", "zstd", ["shuffle"]), ("?", "lz4", ["shuffle"]), ("<f2", "blosclz", ["shuffle"]),
])
def test_write_types_read_back_by_blosc2(client, flightd, dtype, codec, filters):
    name = "w/t_" + "".join(ch for ch in dtype if ch.isalnum()) + ".b2nd"
    body = {"array": name, "type": "b2nd", "shape": [9, 11], "chunks": [4, 5], "blocks": [2, 3], "dtype": dtype,
            "codec": codec, "filters": filters, "contiguous": len(filters) % 2 == 0}
    if "trunc_prec" in filters:
        body["filters_meta"] = [20, 0]
    action(client, "create_array", body)
    dt = np.dtype(dtype)
    n = 9 * 11
    if dt.kind == "U":
        vals = np.array([["", "a", "日本", "xyz"][i % 4] for i in range(n)], dtype=dt)
        col = pa.array(vals.tolist())
    elif dt.kind == "S":
        vals = np.array([[b"", b"ab", b"abcd"][i % 3] for i in range(n)], dtype=dt)
        col = pa.array([bytes(v) for v in vals], pa.binary())  # shorter values are NUL-padded
    elif dt.kind == "M":
        vals = (np.arange(n) * 1000 + 1_700_000_000_000).astype(dt)
        col = pa.array(vals)
    elif dt.kind == "c":
        vals = (np.arange(n) + 1j * np.arange(n)).astype(dt)
        col = pa.FixedSizeListArray.from_arrays(pa.array(np.stack([vals.real, vals.imag], 1).reshape(-1)), 2)
    elif dt.kind == "b":
        vals = (np.arange(n) % 3 == 0)
        col = pa.array(vals)
    else:
        vals = (np.arange(n) - 40).astype(dt)
        col = pa.array(vals.astype(dt.newbyteorder("=")))
    flight_put(client, name, pa.table({"value": col}))
    a = blosc2.open(os.path.join(flightd.data, name))
    got = a.schunk.decompress_chunk(0)  # noqa: F841 (decodes with blosc2)
    full = a[...]
    want = vals.reshape(9, 11)
    if "trunc_prec" in filters:
        assert np.allclose(full, want, rtol=1e-5)
    else:
        assert full.tobytes() == want.tobytes()
    t = read(client, array=name)
    check_table(t, full)


def test_put_into_blosc2_made_array(client, flightd, tmp_path):
    for contiguous in (True, False):
        name = f"w/py_{int(contiguous)}.b2nd"
        p = os.path.join(flightd.data, name)
        base = np.arange(17 * 13, dtype="<i8").reshape(17, 13)
        blosc2.asarray(base, urlpath=p, mode="w", chunks=(5, 6), blocks=(2, 3), contiguous=contiguous,
                       cparams={"codec": blosc2.Codec.LZ4, "filters": [blosc2.Filter.SHUFFLE]})
        made = blosc2.open(p, mode="a")
        made.schunk.vlmeta["keep"] = "me"
        del made
        new = -np.arange(4 * 9, dtype="<i8").reshape(4, 9)
        flight_put(client, name, pa.table({"value": new.reshape(-1)}), {"dim0": [[12, 15]], "dim1": [[2, 10]]})
        base[12:16, 2:11] = new
        a = blosc2.open(p)
        assert np.array_equal(a[...], base)
        assert a.schunk.vlmeta["keep"] == "me"
        assert a.schunk.cparams.codec == blosc2.Codec.LZ4


def test_put_refusals_leave_array_unchanged(client, flightd):
    name = "w/refuse.b2nd"
    action(client, "create_array", {"array": name, "type": "b2nd", "shape": [10], "chunks": [4], "blocks": [2], "dtype": "<i4"})
    before = open(os.path.join(flightd.data, name), "rb").read()
    expect_code("INVALID_ARGUMENT", flight_put, client, name, pa.table({"value": pa.array([1, 2], pa.int32())}))
    expect_code("INVALID_ARGUMENT", flight_put, client, name, pa.table({"v": pa.array(range(10), pa.int32())}))
    expect_code("INVALID_ARGUMENT", flight_put, client, name, pa.table({"value": pa.array([2 ** 40] * 10)}))
    expect_code("INVALID_ARGUMENT", flight_put, client, name, pa.table({"value": pa.array(["x"] * 10)}))
    expect_code("ALREADY_EXISTS", action, client, "create_array", {"array": name, "type": "b2nd", "shape": [3]})
    expect_code("INVALID_ARGUMENT", action, client, "create_array", {"array": "w/x.b2nd", "type": "b2nd", "shape": [3], "codec": "snappy"})
    assert open(os.path.join(flightd.data, name), "rb").read() == before


def test_corrupt_and_truncated_frames_are_data_loss(client, flightd):
    base = np.arange(40 * 30, dtype="<f8").reshape(40, 30)
    p = os.path.join(flightd.data, "bad", "trunc.b2nd")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    blosc2.asarray(base, urlpath=p, mode="w", chunks=(10, 30), blocks=(5, 15))
    raw = open(p, "rb").read()
    with open(p, "wb") as f:
        f.write(raw[: len(raw) // 2])
    expect_code("DATA_LOSS", read, client, array="bad/trunc.b2nd")
    # A damaged chunk: the frame opens, reading that chunk fails naming it.
    p2 = os.path.join(flightd.data, "bad", "chunk.b2nd")
    blosc2.asarray(base + np.sin(base), urlpath=p2, mode="w", chunks=(10, 30), blocks=(5, 15))
    a = blosc2.open(p2)
    off = a.schunk.get_chunk(0)  # noqa: F841
    raw = bytearray(open(p2, "rb").read())
    hl = int.from_bytes(raw[11:15], "big")
    # chunk 0 is first after the header; smash its streams, keep its header
    for i in range(hl + 32 + 40, hl + 32 + 200):
        raw[i] ^= 0x5A
    open(p2, "wb").write(bytes(raw))
    msg = expect_code("DATA_LOSS", read, client, array="bad/chunk.b2nd")
    assert "chunk 0" in msg, msg
    # Chunks the query does not touch are not read: the rest still reads.
    t = read(client, array="bad/chunk.b2nd", subarray={"dim0": [[10, 39]]})
    assert np.array_equal(t.column("value").to_numpy(), (base + np.sin(base))[10:].reshape(-1))
    # An sframe missing a chunk object.
    p3 = os.path.join(flightd.data, "bad", "sparse.b2nd")
    blosc2.asarray(base, urlpath=p3, mode="w", chunks=(10, 30), blocks=(5, 15), contiguous=False)
    os.unlink(os.path.join(p3, "00000002.chunk"))
    msg = expect_code("DATA_LOSS", read, client, array="bad/sparse.b2nd")
    assert "chunk 2" in msg, msg
    assert flightd.alive()


def _filter_arrays(root):
    """Arrays made by python-blosc2 for the filter/aggregate tests: name ->
    (numpy data, filter, numpy predicate over the field)."""
    rng = np.random.default_rng(7)
    f8 = rng.normal(size=(23, 17))
    f8[rng.random(f8.shape) < 0.1] = np.nan
    f8[:8, :8] = np.nan  # one whole NaN chunk (special)
    i2 = (rng.integers(-300, 300, size=(19, 21))).astype(">i2")
    i2[8:16, :] = 5  # repeated-value chunks
    u4 = rng.integers(0, 2 ** 32, size=(40,), dtype="<u4")
    i8 = rng.integers(-2 ** 40, 2 ** 40, size=(6, 7, 5), dtype="<i8")
    i8[:3, :4, :] = 0  # a zeros chunk
    f4 = rng.normal(size=(31,)).astype("<f4")
    bl = rng.random((13, 9)) < 0.4
    st = np.zeros(29, dtype=[("a", "<i4"), ("b", ">f8")])
    st["a"] = rng.integers(-50, 50, 29)
    st["b"] = rng.normal(size=29)
    arrays = {
        "f8": (f8, (8, 8), (4, 4)), "i2": (i2, (8, 7), (4, 7)), "u4": (u4, (16,), (8,)),
        "i8": (i8, (3, 4, 5), (2, 2, 5)), "f4": (f4, (8,), (4,)), "bool": (bl, (5, 4), (5, 2)),
        "st": (st, (10,), (5,)),
    }
    for name, (data, chunks, blocks) in arrays.items():
        p = os.path.join(root, name + ".b2nd")
        if name in ("f8", "i2"):
            # Made by blosc2.full, then partly overwritten: the chunks left
            # whole stay special (NaN, a repeated value).
            a = blosc2.full(data.shape, data[0, 0] if name == "f8" else data[8, 0], dtype=data.dtype, urlpath=p,
                            mode="w", chunks=chunks, blocks=blocks)
            if name == "f8":
                a[8:, :] = data[8:, :]
                a[:8, 8:] = np.ascontiguousarray(data[:8, 8:])
            else:
                a[:8, :] = data[:8, :]
                a[16:, :] = data[16:, :]
            continue
        blosc2.asarray(data, urlpath=p, mode="w", chunks=chunks, blocks=blocks)
    return {k: v[0] for k, v in arrays.items()}


FILTER_CASES = [
    # array, field, filter, numpy predicate, subarray
    ("f8", "value", "value > 0.25", lambda v: v > 0.25, {"dim0": [[2, 20]], "dim1": [[0, 16]]}),
    ("f8", "value", "value != 0.5", lambda v: (v != 0.5), None),  # NaN passes only !=
    ("f8", "value", "value < 0 or value >= 1", lambda v: (v < 0) | (v >= 1), {"dim0": [[0, 9], [15, 22]]}),
    ("i2", "value", "value >= -20 and value < 150", lambda v: (v >= -20) & (v < 150), {"dim1": [[3, 18]]}),
    ("i2", "value", "value in [5, 7, -3]", lambda v: np.isin(v, [5, 7, -3]), None),
    ("u4", "value", "value > 2000000000", lambda v: v > 2000000000, {"dim0": [[5, 33]]}),
    ("i8", "value", "not value == 0", lambda v: v != 0, {"dim0": [[1, 5]], "dim2": [[1, 3]]}),
    ("f4", "value", "value <= 0.1", lambda v: v <= np.float32(0.1), None),
    ("bool", "value", "value == 1", lambda v: v, {"dim0": [[2, 11]]}),
    ("st", "b", "b > 0 and a < 20", None, {"dim0": [[3, 27]]}),
]


@pytest.mark.parametrize("case", range(len(FILTER_CASES)))
def test_filter_and_aggregates_vs_numpy(client, flightd, case):
    root = os.path.join(flightd.data, "b2f")
    if not os.path.isdir(root):
        os.makedirs(root)
        _filter_arrays(root)
    arr, field, flt, pred, sub = FILTER_CASES[case]
    name = f"b2f/{arr}.b2nd"
    data = blosc2.open(os.path.join(flightd.data, name))[...]  # the oracle: what blosc2 decodes
    idx = tuple(np.concatenate([np.arange(lo, hi + 1) for lo, hi in sub.get(f"dim{d}", [[0, n - 1]])])
                for d, n in enumerate(data.shape)) if sub else tuple(np.arange(n) for n in data.shape)
    cube = data[np.ix_(*idx)]
    if arr == "st":
        ok = (cube["b"] > 0) & (cube["a"] < 20)
    else:
        ok = pred(cube)
    q = {"array": name, "filter": flt}
    if sub:
        q["subarray"] = sub
    # Every cell of the subarray comes back; failing cells are 0 (the fill value).
    t = read(client, columns=[field] if arr != "st" else ["a", "b"], **q)
    fields = ["a", "b"] if arr == "st" else [field]
    for f in fields:
        col = cube[f] if arr == "st" else cube
        want = np.where(ok, col, np.zeros((), col.dtype)).reshape(-1)
        got = t.column(f).to_numpy(zero_copy_only=False)
        assert got.shape == want.shape
        assert np.array_equal(got, want.astype(want.dtype.newbyteorder("=")), equal_nan=want.dtype.kind == "f"), f
    # A filter on a field that is not returned.
    if arr == "st":
        t = read(client, columns=["a"], **q)
        assert np.array_equal(t.column("a").to_numpy(), np.where(ok, cube["a"], 0).reshape(-1))
    # Aggregates vs numpy over the passing cells (count: every cell, as TileDB's dense count).
    vals = (cube[field] if arr == "st" else cube)[ok]
    if vals.dtype.kind == "b":
        t = read(client, aggregates={field: ["count"], "*": ["count"]}, **q)
        assert t.column(f"count({field})")[0].as_py() == cube.size
        assert t.column("count(*)")[0].as_py() == cube.size
        expect_code("INVALID_ARGUMENT", read, client, aggregates={field: ["sum"]}, **q)
        return
    t = read(client, aggregates={field: ["sum", "min", "max", "mean", "count"], "*": ["count"]}, **q)
    assert t.num_rows == 1
    kind = vals.dtype.kind
    acc = {"i": np.int64, "u": np.uint64, "f": np.float64}[kind]
    nan = ~np.isnan(vals) if kind == "f" else np.ones(vals.shape, bool)
    s = t.column(f"sum({field})")
    assert s.type == {"i": pa.int64(), "u": pa.uint64(), "f": pa.float64()}[kind]
    want_sum = vals.astype(acc).sum(dtype=acc)
    if kind == "f":
        # NaN cells that pass (only with !=) make the sum NaN, as in numpy.
        assert np.isclose(s[0].as_py(), want_sum, rtol=1e-12, equal_nan=True)
        assert np.isclose(t.column(f"mean({field})")[0].as_py(), want_sum / len(vals) if len(vals) else np.nan,
                          rtol=1e-12, equal_nan=True)
    else:
        assert s[0].as_py() == int(want_sum)
        assert t.column(f"mean({field})")[0].as_py() == pytest.approx(float(want_sum) / len(vals), rel=1e-12)
    # min/max skip NaN (TileDB); numpy's nanmin/nanmax.
    assert t.column(f"min({field})")[0].as_py() == (vals[nan].min() if nan.any() else 0).item()
    assert t.column(f"max({field})")[0].as_py() == (vals[nan].max() if nan.any() else 0).item()
    assert t.column(f"count({field})")[0].as_py() == cube.size
    assert t.column("count(*)")[0].as_py() == cube.size
    # Without a filter: over the whole subarray.
    del q["filter"]
    # (zeros, NaN and repeated-value chunks are aggregated whole)
    t = read(client, aggregates={field: ["sum", "min", "max", "mean", "count"]}, **q)
    whole = (cube[field] if arr == "st" else cube)
    wsum = whole.astype(acc).sum(dtype=acc)
    assert np.isclose(float(t.column(f"sum({field})")[0].as_py()), float(wsum), rtol=1e-12, equal_nan=True)
    assert np.isclose(t.column(f"mean({field})")[0].as_py(), float(wsum) / whole.size, rtol=1e-12, equal_nan=True)
    assert t.column(f"min({field})")[0].as_py() == (np.nanmin(whole) if kind == "f" else whole.min()).item()
    assert t.column(f"max({field})")[0].as_py() == (np.nanmax(whole) if kind == "f" else whole.max()).item()
    assert t.column(f"count({field})")[0].as_py() == whole.size
