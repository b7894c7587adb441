"""tileflight.Client.array against TileDB-Py, the oracle, call by call.

Every read of the fixture matrix (dense and sparse, every dtype family,
nullable, var-size, datetime and string dimensions, several fragments, time
travel) is made twice, with ``tiledb.open(path)`` on the files and with
``client.array(name)`` through the daemon, and the results must be the same:
the same keys in the same order, the same types (masked arrays for nullable
attributes), dtypes, shapes and values. ``.b2nd`` arrays are checked against
python-blosc2's own slicing; writes (``A[...] = ...``) are read back by
TileDB-Py."""

import math
import os
import shutil
import sys
import time

import blosc2
import numpy as np
import pytest
import tiledb

import tileflight
from tileflight import errors
from flightd_fixture import Daemon, flightd_bin  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The encrypted case needs the daemon's key; test_fixtures/test_diff_reader cover it.
SKIP = {"encrypted"}


@pytest.fixture(scope="module")
def served(flightd_bin, fixtures_dir, tmp_path_factory):
    """A daemon over a copy of the fixture matrix (writes must not touch the shared one)."""
    data = tmp_path_factory.mktemp("array-data")
    src = os.path.join(fixtures_dir, "arrays")
    for n in os.listdir(src):
        p = os.path.join(src, n)
        if os.path.isdir(p) and n not in SKIP:
            shutil.copytree(p, os.path.join(data, n))
    d = Daemon(flightd_bin, data, args=["-memory-budget", str(256 << 20)])
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="module")
def client(served):
    c = tileflight.connect(served.url)
    yield c
    c.close()


def cases(served):
    return sorted(n for n in os.listdir(served.data) if os.path.isdir(os.path.join(served.data, n)))


def _eq(x, y):
    if isinstance(x, memoryview):
        x = bytes(x)
    if isinstance(y, memoryview):
        y = bytes(y)
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        x, y = np.asarray(x), np.asarray(y)
        return x.dtype == y.dtype and x.shape == y.shape and all(_eq(a, b) for a, b in zip(x.ravel(), y.ravel()))
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    if isinstance(x, (np.floating, np.complexfloating)) and np.isnan(x) and np.isnan(y):
        return True
    if isinstance(x, np.datetime64) and np.isnat(x):
        return np.isnat(y)
    if isinstance(x, np.void):
        return x.tolist() == y.tolist()
    return type(x) is type(y) and x == y if not isinstance(x, np.generic) else bool(x == y)


NARROW = (np.dtype("M8[D]"), np.dtype("m8[s]"), np.dtype("m8[ms]"))


def assert_same_array(want, got, what):
    assert type(got) is type(want), f"{what}: {type(got).__name__} != TileDB-Py's {type(want).__name__}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if isinstance(want, np.ma.MaskedArray):
        wm, gm = np.ma.getmaskarray(want), np.ma.getmaskarray(got)
        assert (wm == gm).all(), f"{what}: null mask {gm} != {wm}"
        wv, gv = want.data[~wm], got.data[~gm]
    else:
        wv, gv = want.ravel(), got.ravel()
    if want.dtype in NARROW and np.isnat(wv).any():
        # datetime_day, time_sec and time_ms travel as 32-bit Arrow types
        # (date32, time32), which cannot hold TileDB's fill (INT64_MIN,
        # NaT): unwritten dense cells read as 0 (documented difference).
        nat = np.isnat(wv)
        assert (gv[nat].view(np.int64) == 0).all(), what
        wv, gv = wv[~nat], gv[~nat]
    if want.dtype == object or want.dtype.kind == "V":
        bad = [i for i, (a, b) in enumerate(zip(wv, gv)) if not _eq(a, b)]
        assert not bad, f"{what}: cells {bad[:5]} differ: {[gv[i] for i in bad[:5]]} != {[wv[i] for i in bad[:5]]}"
    else:
        np.testing.assert_array_equal(gv, wv, err_msg=what)


def assert_same(want, got, what, sort_by=None):
    """Two TileDB-Py-style results (dict of arrays) are the same; sparse
    results are compared sorted by ``sort_by`` (TileDB-Py's unordered reads
    have no defined order)."""
    assert list(got.keys()) == list(want.keys()), f"{what}: keys {list(got)} != {list(want)}"
    if sort_by:
        want, got = _sorted(want, sort_by), _sorted(got, sort_by)
    for k in want:
        assert_same_array(want[k], got[k], f"{what}[{k!r}]")


def _sorted(res, keys):
    cols = [np.asarray([repr(v) if isinstance(v, (bytes, str, np.ndarray, memoryview)) else v
                        for v in np.asarray(res[k]).ravel().tolist()], dtype=object) for k in keys]
    n = len(cols[0])
    order = sorted(range(n), key=lambda i: tuple((c[i] is None, str(type(c[i])), c[i]) for c in reversed(cols))[::-1])
    return {k: v[order] for k, v in res.items()}


def _all_keys(T):
    return [T.schema.domain.dim(i).name for i in range(T.schema.ndim)] + \
        [T.schema.attr(i).name for i in range(T.schema.nattr)]


def fragment_times(path):
    fi = tiledb.FragmentInfoList(path)
    return sorted({int(f.timestamp_range[1]) for f in fi})


def test_matrix_whole_arrays(served, client):
    """A[:] of every case, at every fragment's timestamp and now."""
    checked = 0
    for name in cases(served):
        path = os.path.join(served.data, name)
        for ts in [None] + fragment_times(path)[:-1]:
            kw = {} if ts is None else {"timestamp": ts}
            with tiledb.open(path, **kw) as T:
                A = client.array(name, **kw)
                want = T[:]
                got = A[:]
                assert_same(want, got, f"{name}@{ts} A[:]",
                            sort_by=_all_keys(T) if T.schema.sparse else None)
                checked += 1
    assert checked >= 30


def test_matrix_schema_and_nonempty_domain(served, client):
    for name in cases(served):
        path = os.path.join(served.data, name)
        with tiledb.open(path) as T:
            A = client.array(name)
            s, t = A.schema, T.schema
            assert s.sparse == t.sparse and s.ndim == t.ndim and s.nattr == t.nattr, name
            assert s.cell_order == t.cell_order and s.tile_order == t.tile_order, name
            if t.sparse:
                assert s.allows_duplicates == t.allows_duplicates, name
            for i in range(t.ndim):
                d, e = s.domain.dim(i), t.domain.dim(i)
                assert d.name == e.name and d.dtype == e.dtype, (name, d, e)
                if d.dtype.kind != "S":
                    assert d.domain == e.domain, (name, d.domain, e.domain)
                    assert d.tile == e.tile, (name, d.tile, e.tile)
                assert A.dim(d.name).name == d.name and A.dim(i).name == d.name
            for i in range(t.nattr):
                a, b = s.attr(i), t.attr(i)
                assert (a.name, a.isnullable, a.isvar) == (b.name, b.isnullable, b.isvar), name
                if b.enum_label is None:
                    assert a.dtype == b.dtype, (name, a.name, a.dtype, b.dtype)
                    assert A.attr(a.name).dtype == b.dtype
                    if not b.isvar and not b.isnullable and b.dtype.kind not in "SUO":
                        wf, gf = b.fill, a.fill
                        if isinstance(wf, np.ndarray) and wf.shape == (1,):
                            wf = wf[0]
                        assert _eq(np.asarray(gf)[()], np.asarray(wf)[()]) or \
                            np.asarray(gf).tolist() == np.asarray(wf).tolist(), (name, a.name, gf, wf)
            if not t.sparse:
                assert s.shape == t.shape
            want = T.nonempty_domain()
            got = A.nonempty_domain()
            flat = lambda ned: [v for r in (ned or ()) for v in r]  # noqa: E731
            assert (got is None) == (want is None), (name, got, want)
            assert all(_eq(g, w) for g, w in zip(flat(got), flat(want))) and len(flat(got)) == len(flat(want)), \
                (name, got, want)
            assert [type(v) for v in flat(got)] == [type(v) for v in flat(want)], (name, got, want)


def test_metadata(served, client):
    for name in ("metadata", "delete_consolidated"):
        with tiledb.open(os.path.join(served.data, name)) as T:
            # Copies: TileDB-Py's metadata arrays point into the open array.
            want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in T.meta.items()}
        got = dict(client.array(name).meta.items())
        assert got.keys() == want.keys(), name
        for k in want:
            w, g = want[k], got[k]
            if isinstance(w, np.ndarray):
                # The protocol's JSON carries numbers, not their NumPy type:
                # typed metadata comes back as a tuple of the same values.
                assert isinstance(g, tuple) and list(g) == w.tolist(), (name, k, g, w)
            elif isinstance(w, bytes):
                # Raw bytes travel as base64 text (docs/protocol.md, get_metadata).
                import base64
                assert base64.b64decode(g) == w, (name, k, g, w)
            else:
                assert g == w and type(g) is type(w), (name, k, g, w)


DENSE_SELECTIONS = [
    ("dense_1d", lambda A: A[2:7]),
    ("dense_1d", lambda A: A[1:8:2]),
    ("dense_1d", lambda A: A[3]),
    ("dense_1d", lambda A: A[-3:]),
    ("dense_1d", lambda A: A[4:100]),                       # a stop past the domain is clamped
    ("dense_1d", lambda A: A[...]),
    ("dense_2d_col", lambda A: A[2:5, 1:3]),
    ("dense_2d_col", lambda A: A[3, :]),
    ("dense_3d", lambda A: A[1:3, 2, :]),
    ("dense_nullable_fill", lambda A: A[1:3, 1:4]),
    ("dense_nullable_fill", lambda A: A[2, 3]),
    ("dense_datetime_dim", lambda A: A[np.datetime64("2024-01-03"):np.datetime64("2024-01-06")]),
    ("dense_all_types", lambda A: A[2:5]),
    ("dense_1d", lambda A: A.query(attrs=["f"])[2:6]),
    ("dense_1d", lambda A: A.query(attrs=["a"], dims=["x"])[2:6]),
    ("dense_1d", lambda A: A.query(coords=True)[2:6]),
    ("dense_1d", lambda A: A.query(cond="a > 50")[:]),
    ("dense_2d_col", lambda A: A.multi_index[2:4, 1:2]),
    ("dense_2d_col", lambda A: A.multi_index[[2, (4, 5)], 1]),
]


@pytest.mark.parametrize("i", range(len(DENSE_SELECTIONS)))
def test_dense_selections(served, client, i):
    name, f = DENSE_SELECTIONS[i]
    with tiledb.open(os.path.join(served.data, name)) as T:
        want = f(T)
    got = f(client.array(name))
    assert_same(want, got, f"{name} selection {i}")


SPARSE_SELECTIONS = [
    ("sparse_1d", lambda A: A[10:40]),
    ("sparse_1d", lambda A: A.multi_index[10:40]),
    ("sparse_1d", lambda A: A.multi_index[[5, (20, 30), 70]]),
    ("sparse_float_hilbert", lambda A: A[0.0:5.5, :]),
    ("sparse_float_hilbert", lambda A: A.multi_index[1.0:4.0, 0.5:6.0]),
    ("sparse_string_dim", lambda A: A["a":"c", :]),
    ("sparse_string_dim", lambda A: A.multi_index["banana":"kiwi", 5:60]),
    ("sparse_string_dim", lambda A: A.multi_index[["apple", "kiwi"], :]),
    ("sparse_datetime_mixed", lambda A: A[:]),
    ("sparse_all_types", lambda A: A.query(attrs=["a_int8", "a_string_utf8"])[:]),
    ("sparse_all_types", lambda A: A.query(dims=[], attrs=["a_float64"], cond="a_float64 > 0")[:]),
    ("sparse_all_types", lambda A: A.query(cond="a_int32 < 0", coords=True)[:]),
    ("var_nullable", lambda A: A.query(attrs=["f32x2", "f64x2", "i16x3", "char3", "s", "vi32", "vf64"]).multi_index[:]),
    ("sparse_duplicates", lambda A: A[:]),
    ("sparse_overwrite", lambda A: A.query(order="C")[:]),
]


@pytest.mark.parametrize("i", range(len(SPARSE_SELECTIONS)))
def test_sparse_selections(served, client, i):
    name, f = SPARSE_SELECTIONS[i]
    with tiledb.open(os.path.join(served.data, name)) as T:
        want = f(T)
    got = f(client.array(name))
    assert_same(want, got, f"{name} selection {i}", sort_by=list(want))


@pytest.mark.parametrize("name", ["dense_1d", "dense_2d_col", "dense_3d", "dense_all_types",
                                  "dense_nullable_fill", "consolidated", "dense_datetime_dim"])
def test_dense_random_boxes(served, client, name):
    """Random boxes (and single cells, which drop their axis) of every
    dense case, at each fragment's timestamp and now."""
    path = os.path.join(served.data, name)
    rng = np.random.default_rng(sum(map(ord, name)))
    for ts in [None] + fragment_times(path)[:-1]:
        kw = {} if ts is None else {"timestamp": ts}
        A = client.array(name, **kw)
        with tiledb.open(path, **kw) as T:
            for _ in range(12):
                sel = []
                for i in range(T.schema.ndim):
                    d = T.schema.domain.dim(i)
                    lo, hi = d.domain
                    n = int((hi - lo) / (np.timedelta64(1, np.datetime_data(d.dtype)[0]) if d.dtype.kind == "M" else 1)) + 1
                    a = int(rng.integers(0, n))
                    b = int(rng.integers(a, n)) + 1
                    if d.dtype.kind == "M":
                        unit = np.timedelta64(1, np.datetime_data(d.dtype)[0])
                        sel.append(slice(lo + a * unit, lo + (b - 1) * unit))
                    elif rng.random() < 0.25:
                        sel.append(int(lo) + a)
                    else:
                        sel.append(slice(int(lo) + a, int(lo) + b))
                sel = tuple(sel)
                assert_same(T[sel], A[sel], f"{name}@{ts} A[{sel}]")
                if all(isinstance(x, slice) for x in sel) and T.schema.domain.dim(0).dtype.kind != "M":
                    msel = tuple(slice(x.start, x.stop - 1) for x in sel)
                    want = T.query(attrs=[T.schema.attr(0).name]).multi_index[msel]
                    got = A.query(attrs=[T.schema.attr(0).name]).multi_index[msel]
                    if not T.schema.attr(0).isnullable:
                        assert_same(want, got, f"{name}@{ts} multi_index[{msel}]")


def test_negative_indices_wrap_from_the_upper_bound(served, client):
    with tiledb.open(os.path.join(served.data, "dense_1d")) as T:
        lo, hi = T.schema.domain.dim(0).domain
        want_last = T[hi:hi + 1]
        want_tail = T[-3:]
    A = client.array("dense_1d")
    got = A[-1]
    assert {k: v.shape for k, v in got.items()} == {"a": (), "f": ()}
    assert got["a"] == want_last["a"][0] and got["f"].dtype == want_last["f"].dtype
    assert_same(want_tail, A[-3:], "A[-3:]")
    with pytest.raises(IndexError):
        A[-(int(hi) + 5)]


def test_col_major_order_gives_the_same_cells_fortran_ordered(served, client):
    """order="F": TileDB-Py 0.36 lays the col-major buffer out in C order
    (cell [0, 1] holds cell (1, 0)); ours holds the same cells as the
    row-major read, in a Fortran-ordered array (documented difference)."""
    with tiledb.open(os.path.join(served.data, "dense_2d_col")) as T:
        want = T[:]
    got = client.array("dense_2d_col").query(order="F")[:]
    assert got["v"].flags.f_contiguous
    assert_same(want, got, "order F")


def test_df_matches_tiledb_reads(served, client):
    """A.df[] is the multi_index read as a DataFrame, dimensions first
    (TileDB-Py 0.36's own .df needs pandas < 3, so the oracle is built from its multi_index)."""
    for name, sel in (("sparse_1d", (slice(10, 40),)), ("sparse_string_dim", (slice(None), slice(5, 60))),
                      ("dense_1d", (slice(2, 6),))):
        with tiledb.open(os.path.join(served.data, name)) as T:
            want = T.query(dims=_all_keys(T)[:T.schema.ndim]).multi_index[sel]
        got = client.array(name).df[sel]
        assert list(got.columns) == list(want.keys())
        w = _sorted(want, list(want)) if not name.startswith("dense") else want
        for k in want:
            assert [_norm(v) for v in got[k].tolist()] == [_norm(v) for v in np.asarray(w[k]).tolist()] or \
                sorted(map(repr, got[k].tolist())) == sorted(map(repr, np.asarray(w[k]).tolist())), (name, k)


def _norm(v):
    return v.tolist() if isinstance(v, np.ndarray) else v


ERRORS = [
    # (array, call, TileDB-Py's exception class, ours)
    ("dense_1d", lambda A: A[0:3], IndexError, IndexError),             # below the domain
    ("dense_1d", lambda A: A[1:3, 2], IndexError, IndexError),          # too many indices
    ("dense_1d", lambda A: A["a":"b"], IndexError, IndexError),         # a string for an int dimension
    ("dense_1d", lambda A: A[1.5:3], IndexError, IndexError),
    ("dense_1d", lambda A: A.query(attrs=["nope"])[:], tiledb.TileDBError, KeyError),
    ("sparse_1d", lambda A: A[1:10:2], IndexError, IndexError),         # steps on sparse arrays
    ("dense_datetime_dim", lambda A: A[1:3], IndexError, IndexError),   # ints for a datetime dimension
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_bad_input_raises_as_tiledb_py(served, client, i):
    name, f, theirs, ours = ERRORS[i]
    with tiledb.open(os.path.join(served.data, name)) as T:
        with pytest.raises(theirs):
            f(T)
    with pytest.raises(ours):
        f(client.array(name))


def test_errors_of_the_daemon_keep_the_grpc_code(served, client):
    with pytest.raises(errors.NotFound) as e:
        client.array("no_such_array")
    assert e.value.code == "NOT_FOUND"
    A = client.array("sparse_1d")
    with pytest.raises(errors.InvalidArgument) as e:
        A.query(cond="nope > 1")[:]
    assert "nope" in e.value.message
    lo, hi = A.dim(0).domain
    with pytest.raises(IndexError):               # out of the domain, before any call
        A.multi_index[int(lo) - 5:int(lo) + 3]
    with pytest.raises(IndexError):
        A.multi_index[int(hi):int(hi) + 1]


def test_multi_index_nullables_are_masked(served, client):
    """TileDB-Py 0.36's multi_index returns nullable attributes unmasked
    (the buffer's values under nulls); ours are masked arrays, whose mask
    is TileDB-Py's validity (from its A[]) and whose other values are its."""
    with tiledb.open(os.path.join(served.data, "var_nullable")) as T:
        want_raw = T.multi_index[:]
        want_masked = T[:]
    got = client.array("var_nullable").multi_index[:]
    assert list(got) == list(want_raw)
    order_w = np.argsort(want_raw["i"], kind="stable")
    order_m = np.argsort(want_masked["i"], kind="stable")
    order_g = np.argsort(got["i"], kind="stable")
    for k in ("n_u8", "n_f32_fill", "n_s", "n_ascii", "n_vi64"):
        g = got[k][order_g]
        assert isinstance(g, np.ma.MaskedArray), k
        mask = np.ma.getmaskarray(want_masked[k])[order_m]
        assert (np.ma.getmaskarray(g) == mask).all(), k
        w = np.asarray(want_raw[k])[order_w]
        assert all(_eq(a, b) for a, b, m in zip(w, g.data, mask) if not m), k


def test_timeout_expires_as_deadline_exceeded(served, client):
    """A call that cannot finish in time fails with DeadlineExceeded (a
    TimeoutError) instead of hanging; the daemon stays usable."""
    uri = os.path.join(served.data, "big_dense")
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, 2047), tile=256, dtype=np.int64),
                        tiledb.Dim("c", domain=(0, 2047), tile=256, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("v", dtype=np.float64, filters=[tiledb.ZstdFilter()])]))
    with tiledb.open(uri, "w") as T:
        T[:] = {"v": np.random.default_rng(1).standard_normal((2048, 2048))}
    A = client.array("big_dense", timeout=30)
    before = len(served.records())
    with pytest.raises(errors.DeadlineExceeded) as e:
        A.query(timeout=0.005)[:]
    assert isinstance(e.value, TimeoutError) and e.value.code == "DEADLINE_EXCEEDED"
    # The daemon saw the call end by the client's deadline, not run to completion.
    deadline = time.monotonic() + 10
    ended = []
    while time.monotonic() < deadline and not ended:
        ended = [r for r in served.records()[before:] if r.get("array") == "big_dense"
                 and r.get("status") in ("Canceled", "DeadlineExceeded")]
        time.sleep(0.05)
    assert ended, [r for r in served.records()[before:] if r.get("array") == "big_dense"]
    c = tileflight.connect(served.url, timeout=1e-6)
    with pytest.raises(errors.DeadlineExceeded):
        c.arrays()
    c.close()
    assert A[:]  # the connection still works


def test_dense_write_read_back_by_tiledb(served, client):
    uri = os.path.join(served.data, "w_dense")
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, 9), tile=5, dtype=np.int32),
                        tiledb.Dim("c", domain=(0, 7), tile=4, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("n", dtype=np.int16, nullable=True),
        tiledb.Attr("s", dtype=str, var=True), tiledb.Attr("t", dtype="M8[ms]")]))
    v = np.arange(12, dtype=np.float64).reshape(3, 4)
    n = np.ma.MaskedArray(np.arange(12, dtype=np.int16).reshape(3, 4), mask=np.eye(3, 4, dtype=bool))
    s = np.array([f"s{i}" for i in range(12)], dtype=object).reshape(3, 4)
    t = (np.datetime64("2024-01-01T00:00:00.000") + np.arange(12) * np.timedelta64(1, "s")).reshape(3, 4)
    A = client.array("w_dense", timestamp=5)
    A[2:5, 1:5] = {"v": v, "n": n, "s": s, "t": t}
    with tiledb.open(uri) as T:
        want = T[2:5, 1:5]
        assert_same(want, client.array("w_dense")[2:5, 1:5], "written dense")
        np.testing.assert_array_equal(want["v"], v)
        assert (np.ma.getmaskarray(want["n"]) == n.mask).all()
        assert want["s"].tolist() == s.tolist()
        np.testing.assert_array_equal(want["t"], t)
        assert tiledb.FragmentInfoList(uri)[0].timestamp_range == (5, 5)


def test_sparse_write_read_back_by_tiledb(served, client):
    uri = os.path.join(served.data, "w_sparse")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99), tile=10, dtype=np.int64),
                        tiledb.Dim("k", dtype="ascii"))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("v", dtype=np.float32), tiledb.Attr("l", dtype=np.int64, var=True)]))
    A = client.array("w_sparse")
    A[np.array([3, 1, 7]), ["b", "a", "c"]] = {"v": np.array([0.5, 1.5, 2.5], dtype=np.float32),
                                               "l": np.array([np.array([1, 2]), np.array([], dtype=np.int64),
                                                              np.array([3])], dtype=object)}
    with tiledb.open(uri) as T:
        want = T[:]
    assert sorted(want["x"].tolist()) == [1, 3, 7]
    assert_same(want, client.array("w_sparse")[:], "written sparse", sort_by=["x"])


def test_sql_returns_a_table(served, client):
    t = client.sql('SELECT x, a FROM main.dense_1d WHERE x > 3 ORDER BY x')
    with tiledb.open(os.path.join(served.data, "dense_1d")) as T:
        ned = T.nonempty_domain()[0]
        want = T.multi_index[4:ned[1]]
    assert t.column("x").to_pylist() == list(range(4, ned[1] + 1))
    assert t.column("a").to_pylist() == want["a"].tolist()
    p = client.sql('SELECT x FROM main.dense_1d WHERE x > ? AND x < ? ORDER BY x', [4, 7])
    assert p.column("x").to_pylist() == [5, 6]
    assert list(p.to_pandas()["x"]) == [5, 6]
    rows = client.sql('SELECT x FROM main.dense_1d WHERE x = ?', [[2], [5]])   # one run per row
    assert rows.column("x").to_pylist() == [2, 5]
    with pytest.raises(errors.InvalidArgument):
        client.sql("SELEC nothing")
    with pytest.raises(errors.NotFound):
        client.sql("SELECT * FROM main.no_such_table")


# ---- .b2nd ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def b2nd_served(flightd_bin, tmp_path_factory):
    data = tmp_path_factory.mktemp("array-b2nd")
    rng = np.random.default_rng(7)
    arrays = {
        "f8.b2nd": rng.standard_normal((40, 30)),
        "i2.b2nd": rng.integers(-1000, 1000, size=(13, 11, 5)).astype("<i2"),
        "u1.b2nd": rng.integers(0, 255, size=(100,)).astype("u1"),
        "rec.b2nd": np.array([(i, i * 0.5) for i in range(24)], dtype=[("a", "<i4"), ("b", "<f8")]).reshape(4, 6),
    }
    for n, a in arrays.items():
        chunks = tuple(max(1, s // 3) for s in a.shape)
        blocks = tuple(max(1, c // 2) for c in chunks)
        blosc2.asarray(a, urlpath=str(data / n), mode="w", chunks=chunks, blocks=blocks)
    d = Daemon(flightd_bin, data)
    try:
        yield d, arrays
    finally:
        d.stop()


def test_b2nd_through_the_same_calls(b2nd_served):
    d, arrays = b2nd_served
    with tileflight.connect(d.url) as c:
        for n, a in arrays.items():
            b = blosc2.open(os.path.join(d.data, n))
            A = c.array(n)
            assert A.schema.shape == a.shape and A.nonempty_domain() == tuple((0, s - 1) for s in a.shape)
            fields = a.dtype.names or ("value",)
            sels = [tuple(slice(None) for _ in a.shape), tuple(slice(1, max(2, s // 2)) for s in a.shape)]
            for sel in sels:
                got = A[sel]
                want = b[sel]
                assert list(got) == list(fields)
                for f in fields:
                    w = want[f] if a.dtype.names else want
                    assert got[f].dtype == w.dtype and got[f].shape == w.shape, (n, f)
                    np.testing.assert_array_equal(got[f], w)
            assert A.multi_index[tuple(slice(0, 0) for _ in a.shape)][fields[0]].shape == (1,) * a.ndim
