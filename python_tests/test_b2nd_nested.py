"""Nested structured dtypes (a field that is itself structured, or a
subarray) in arrays python-blosc2 wrote: nested structures are flattened
into one column per leaf named "outer.inner", a subarray field is one
fixed_size_list column (its elements in C order); read whole and by
subarrays and compared with numpy, aggregates over a leaf, DoPut into
such an array read back by python-blosc2 identically, and create_array
with such a dtype."""

import os

import blosc2
import numpy as np
import pyarrow as pa
import pytest

from flightd_fixture import action, cmd, expect_code, flightd, flightd_bin, put, read  # noqa: F401

DT = np.dtype([("a", "<i4"), ("p", [("x", "<f8"), ("y", ">f4")]), ("v", "<f4", (2, 3)),
               ("q", [("r", [("s", "?")]), ("t", ">i2", (4,))])])
LEAVES = ["a", "p.x", "p.y", "v", "q.r.s", "q.t"]


def leaf(x, name):
    for part in name.split("."):
        x = x[part]
    return x


def make(shape, seed):
    rng = np.random.default_rng(seed)
    x = np.zeros(shape, dtype=DT)
    n = x.size
    x["a"] = rng.integers(-1000, 1000, shape)
    x["p"]["x"] = rng.normal(size=shape)
    x["p"]["y"] = rng.normal(size=shape).astype(">f4")
    x["v"] = rng.normal(size=shape + (2, 3)).astype("<f4")
    x["q"]["r"]["s"] = rng.integers(0, 2, shape).astype(bool)
    x["q"]["t"] = rng.integers(-300, 300, shape + (4,)).astype(">i2")
    assert n == x.size
    return x


@pytest.fixture(scope="module")
def client(flightd):
    c = flightd.client()
    yield c
    c.close()


@pytest.fixture(scope="module")
def nested(flightd):
    out = {}
    os.makedirs(os.path.join(flightd.data, "nest"), exist_ok=True)
    for contiguous in (True, False):
        name = f"nest/n{int(contiguous)}.b2nd"
        x = make((13, 7), int(contiguous))
        blosc2.asarray(x, urlpath=os.path.join(flightd.data, name), mode="w", chunks=(5, 4), blocks=(2, 3),
                       contiguous=contiguous)
        out[name] = x
    return out


def check(t, cube, columns=LEAVES):
    for name in columns:
        want = leaf(cube, name)
        col = t.column(name)
        if name in ("v", "q.t"):  # subarray: fixed_size_list of the elements
            per = int(np.prod(want.shape[cube.ndim:]))
            assert col.type == pa.list_(pa.from_numpy_dtype(want.dtype.newbyteorder("=")), per) or \
                col.type.list_size == per
            got = col.combine_chunks().flatten().to_numpy()
            assert got.tobytes() == want.astype(want.dtype.newbyteorder("=")).reshape(-1).tobytes(), name
        else:
            got = col.to_numpy(zero_copy_only=False)
            assert np.array_equal(got, want.reshape(-1).astype(want.dtype.newbyteorder("="))), name


def test_nested_whole_and_subarrays(client, nested):
    rng = np.random.default_rng(7)
    for name, x in nested.items():
        t = read(client, array=name)
        assert t.column_names == ["dim0", "dim1"] + LEAVES
        assert t.schema.field("v").metadata[b"b2nd.dtype"] == b"(<f4, [2 3])"
        check(t, x)
        for _ in range(6):
            r0 = sorted(rng.integers(0, 13, 2))
            c0 = sorted(rng.integers(0, 7, 2))
            cols = list(rng.choice(LEAVES, 3, replace=False))
            t = read(client, array=name, columns=cols, subarray={"dim0": [[int(r0[0]), int(r0[1])]],
                                                                  "dim1": [[int(c0[0]), int(c0[1])]]})
            check(t, x[r0[0]:r0[1] + 1, c0[0]:c0[1] + 1], cols)


def test_nested_aggregates_and_refusals(client, nested):
    name, x = next(iter(nested.items()))
    t = read(client, array=name, aggregates={"p.x": ["sum", "max"], "a": ["min"]})
    assert np.isclose(t.column("sum(p.x)")[0].as_py(), x["p"]["x"].sum(), rtol=1e-12)
    assert t.column("max(p.x)")[0].as_py() == x["p"]["x"].max()
    assert t.column("min(a)")[0].as_py() == x["a"].min()
    # A subarray field has no scalar to aggregate.
    expect_code("INVALID_ARGUMENT", read, client, array=name, aggregates={"v": ["sum"]})


def test_put_into_nested_read_back_by_blosc2(client, flightd, nested):
    for name, x in nested.items():
        x = x.copy()
        new = make((4, 3), 99)
        tbl = {}
        for f in LEAVES:
            v = leaf(new, f)
            v = v.astype(v.dtype.newbyteorder("="))
            if f in ("v", "q.t"):
                per = int(np.prod(v.shape[2:]))
                tbl[f] = pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), per)
            else:
                tbl[f] = pa.array(v.reshape(-1))
        put(client, cmd(array=name, subarray={"dim0": [[6, 9]], "dim1": [[2, 4]]}), pa.table(tbl))
        x[6:10, 2:5] = new
        a = blosc2.open(os.path.join(flightd.data, name))
        assert a.dtype == DT and a[...].tobytes() == x.tobytes()


def test_create_nested_array(client, flightd):
    name = "nest/made.b2nd"
    d = action(client, "create_array", {"array": name, "type": "b2nd", "shape": [6, 5], "chunks": [3, 5],
                                        "blocks": [1, 5], "dtype": str(DT.descr)})
    assert [a["name"] for a in d["attributes"]] == LEAVES
    x = make((6, 5), 3)
    tbl = {}
    for f in LEAVES:
        v = leaf(x, f)
        v = v.astype(v.dtype.newbyteorder("="))
        tbl[f] = (pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), int(np.prod(v.shape[2:])))
                  if f in ("v", "q.t") else pa.array(v.reshape(-1)))
    put(client, cmd(array=name), pa.table(tbl))
    a = blosc2.open(os.path.join(flightd.data, name))
    assert a.dtype == DT and a[...].tobytes() == x.tobytes()
