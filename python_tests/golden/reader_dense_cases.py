"""Extra dense read cases for reader/ (golden files in reader/testdata/dense).

Usage: reader_dense_cases.py OUTDIR

Writes small dense arrays with TileDB (the `tiledb` package) and, next to
each, `<case>.expect.json` in the fixture matrix's layout (see
python_tests/README.md), reusing gen_fixtures.py's machinery. The cases
cover what the matrix lacks: col-major tile and cell orders with unsorted
multi-range subarrays, 3-D with mixed orders and partial edge tiles on
every dimension, var-sized and nullable attributes with fills across
overlapping fragments, schema evolution, and uint64 extremes.

TileDB 2.30 crashes reading unsorted multi-range subarrays of dense
arrays with var attributes, and tiledb-py misplaces writes at negative
coordinates, so the ranges here are sorted and the domains non-negative.
"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gen_fixtures as g  # noqa: E402
import tiledb  # noqa: E402

T1, T2, T3 = g.T1, g.T2, g.T3

_plain_do_read = g.do_read


def do_read_with_nulls(b, A, layout, subarray):
    """gen_fixtures.do_read, but nullable attributes keep their nulls in
    multi-range reads too: tiledb-py's multi_index result drops the
    validity, so the nulls are taken from a whole-domain read (A[:], which
    keeps them) of the same open array, cell by cell by coordinates."""
    r = _plain_do_read(b, A, layout, subarray)
    if subarray is None:
        return r
    s = A.schema
    dims = [s.domain.dim(i).name for i in range(s.domain.ndim)]
    full = _plain_do_read(b, A, "row-major", None)
    keys = list(zip(*[full["data"][d] for d in dims]))
    for i in range(s.nattr):
        a = s.attr(i)
        if not a.isnullable:
            continue
        isnull = {k: v is None for k, v in zip(keys, full["data"][a.name])}
        mine = zip(*[r["data"][d] for d in dims])
        r["data"][a.name] = [None if isnull[k] else v for k, v in zip(mine, r["data"][a.name])]
    return r


g.do_read = do_read_with_nulls


def col_multirange(b):
    dom = tiledb.Domain(
        tiledb.Dim("r", domain=(1, 9), tile=4, dtype=np.int32),
        tiledb.Dim("c", domain=(2, 11), tile=3, dtype=np.int32),
    )
    s = tiledb.ArraySchema(
        domain=dom, sparse=False, cell_order="col-major", tile_order="col-major",
        attrs=[
            tiledb.Attr("a", dtype=np.int32),
            tiledb.Attr("s", dtype=str, var=True),
            tiledb.Attr("n", dtype=np.float64, nullable=True, fill=2.5),
        ],
    )
    b.create(s)

    def w1(A):
        a = np.arange(1, 41, dtype=np.int32).reshape(5, 8)
        sv = np.array([["x" * ((i + j) % 4) for j in range(8)] for i in range(5)], dtype=object)
        n = np.arange(40, dtype=np.float64).reshape(5, 8) / 4
        # Validity maps are explicit (row-major over the written subarray):
        # tiledb-py infers them per row for 2-D arrays.
        A._setitem_impl((slice(2, 7), slice(3, 11)), {"a": a, "s": sv, "n": n},
                        {"n": (a.reshape(-1) % 3 != 0).astype(np.uint8)})

    def w2(A):
        a = np.full((3, 4), -7, dtype=np.int32)
        sv = np.array([["new%d" % (i * 4 + j) for j in range(4)] for i in range(3)], dtype=object)
        n = np.full((3, 4), 9.75)
        A._setitem_impl((slice(5, 8), slice(6, 10)), {"a": a, "s": sv, "n": n},
                        {"n": np.ones(12, dtype=np.uint8)})

    b.write(T1, w1)
    b.write(T2, w2)
    sub = {"r": [[1, 2], [4, 4], [6, 9]], "c": [[2, 4], [9, 11]]}
    b.read("multi_row", layout="row-major", subarray=sub)
    b.read("multi_col", layout="col-major", subarray=sub)
    b.read("col_major", layout="col-major")
    b.read("global", layout="global")
    b.read("global_sub", layout="global", subarray={"r": [[3, 8]], "c": [[5, 10]]})
    b.read("at_t1", timestamp=T1, layout="row-major", subarray={"r": [[1, 9]], "c": [[2, 11]]})


def mixed_3d(b):
    dom = tiledb.Domain(
        tiledb.Dim("x", domain=(5, 14), tile=4, dtype=np.int64),
        tiledb.Dim("y", domain=(0, 6), tile=3, dtype=np.int64),
        tiledb.Dim("z", domain=(10, 14), tile=2, dtype=np.int64),
    )
    s = tiledb.ArraySchema(
        domain=dom, sparse=False, cell_order="col-major", tile_order="row-major",
        attrs=[
            tiledb.Attr("a", dtype=np.uint16),
            tiledb.Attr("v", dtype=np.int32, var=True),
            tiledb.Attr("t", dtype="datetime64[ms]"),
        ],
    )
    b.create(s)

    def w1(A):
        shape = (9, 6, 4)
        a = np.arange(np.prod(shape), dtype=np.uint16).reshape(shape)
        v = np.empty(shape, dtype=object)
        for idx in np.ndindex(shape):
            k = int(a[idx]) % 3
            v[idx] = np.arange(k, dtype=np.int32) + int(a[idx])
        t = (a.astype(np.int64) * 1000).astype("datetime64[ms]")
        A[6:15, 1:7, 10:14] = {"a": a, "v": v, "t": t}

    def w2(A):
        shape = (3, 2, 2)
        a = np.full(shape, 60000, dtype=np.uint16)
        v = np.empty(shape, dtype=object)
        for idx in np.ndindex(shape):
            v[idx] = np.array([7, 7, 7, 7], dtype=np.int32)
        t = np.full(shape, np.datetime64(5, "ms"))
        A[10:13, 4:6, 12:14] = {"a": a, "v": v, "t": t}

    b.write(T1, w1)
    b.write(T2, w2)
    b.read("sub_row", layout="row-major", subarray={"x": [[5, 6], [11, 13]], "y": [[0, 1], [5, 6]], "z": [[10, 11], [13, 14]]})
    b.read("sub_col", layout="col-major", subarray={"x": [[8, 12]], "y": [[2, 5]], "z": [[11, 13]]})
    b.read("global", layout="global")
    b.read("full_col", layout="col-major", subarray={"x": [[5, 14]], "y": [[0, 6]], "z": [[10, 14]]})


def fill_evolved(b):
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, 19), tile=8, dtype=np.uint32))
    s = tiledb.ArraySchema(
        domain=dom, sparse=False,
        attrs=[
            tiledb.Attr("s", dtype=str, var=True),
            tiledb.Attr("ns", dtype=str, var=True, nullable=True),
            tiledb.Attr("f", dtype=np.float32, fill=-1.5),
            tiledb.Attr("nb", dtype=np.int8, nullable=True),
            tiledb.Attr("gone", dtype=np.int64),
        ],
    )
    b.create(s)

    def w1(A):
        n = 6
        vals = {"s": np.array(["a", "", "bcd", "e", "ff", "g"], dtype=object),
                "ns": np.array(["p", "q", "r", "s", "t", "u"], dtype=object),
                "f": np.arange(n, dtype=np.float32),
                "nb": np.arange(n, dtype=np.int8),
                "gone": np.arange(n, dtype=np.int64)}
        A._setitem_impl(slice(3, 9), vals, {"ns": np.array([0, 1, 1, 0, 1, 1], dtype=np.uint8),
                                            "nb": np.array([1, 0] * 3, dtype=np.uint8)})

    b.write(T1, w1)
    se = tiledb.ArraySchemaEvolution(b.ctx)
    se.add_attribute(tiledb.Attr("added", dtype=np.int16, fill=77))
    se.drop_attribute("gone")
    se.array_evolve(b.uri)
    b.snapshot("after evolution")

    def w2(A):
        vals = {"s": np.array(["X", "YY", "", "Z", "W"], dtype=object),
                "ns": np.array(["k", "l", "m", "n", "o"], dtype=object),
                "f": np.full(5, 8.5, dtype=np.float32),
                "nb": np.full(5, 3, dtype=np.int8),
                "added": np.arange(5, dtype=np.int16) - 2}
        A._setitem_impl(slice(7, 12), vals, {"ns": np.array([1, 1, 0, 1, 1], dtype=np.uint8),
                                             "nb": np.ones(5, dtype=np.uint8)})

    with tiledb.open(b.uri, "w", timestamp=T3, ctx=b.ctx) as A:
        w2(A)
    b.snapshot("after write at 3000", T3)
    b.read("full", layout="row-major", subarray={"i": [[0, 19]]})
    b.read("global", layout="global", subarray={"i": [[0, 19]]})
    b.read("multi", layout="row-major", subarray={"i": [[10, 13], [2, 4], [19, 19]]})


def int_extremes(b):
    big = int(np.iinfo(np.uint64).max)
    dom = tiledb.Domain(
        tiledb.Dim("u", domain=(big - 119, big - 30), tile=30, dtype=np.uint64),
        tiledb.Dim("w", domain=(0, 9), tile=5, dtype=np.uint64),
    )
    s = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr("a", dtype=np.int32)])
    b.create(s)

    def w1(A):
        A[big - 33:big - 30, 2:8] = {"a": np.arange(18, dtype=np.int32).reshape(3, 6)}

    b.write(T1, w1)
    b.read("edge", layout="row-major", subarray={"u": [[big - 35, big - 30]], "w": [[0, 9]]})
    b.read("edge_col", layout="col-major", subarray={"u": [[big - 119, big - 117], [big - 32, big - 31]], "w": [[7, 9]]})


SPECS = [
    g.Spec("rd_col_multirange", "2-D dense, col-major tile and cell orders, partial edge tiles, "
           "two overlapping fragments, var and nullable attributes, unsorted multi-range reads",
           ["dense", "dim_2d", "order_col", "multi_tile", "partial_tile", "var_string", "nullable",
            "multi_fragment", "dense_overwrite", "fill_values", "custom_fill"], col_multirange),
    g.Spec("rd_mixed_3d", "3-D dense, row-major tiles with col-major cells, partial tiles on every "
           "dimension, var numeric and datetime attributes, multi-range on every dimension",
           ["dense", "dim_3d", "order_col", "multi_tile", "partial_tile", "var_numeric",
            "multi_fragment", "dense_overwrite", "fill_values"], mixed_3d),
    g.Spec("rd_fill_evolved", "1-D dense with var, nullable and custom fills; attribute added "
           "and another dropped between two writes",
           ["dense", "dim_1d", "var_string", "nullable", "nullable_fill", "fill_values",
            "custom_fill", "schema_evolution", "multi_fragment"], fill_evolved),
    g.Spec("rd_int_extremes", "2-D dense with a uint64 domain ending at 2^64-31 and a small "
           "second dimension", ["dense", "dim_2d", "dim_int", "fill_values"], int_extremes),
]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for spec in SPECS:
        uri = os.path.join(out, spec.name)
        if os.path.exists(uri):
            shutil.rmtree(uri)
        g.run_case(spec, out)
        print("wrote", uri)


if __name__ == "__main__":
    main()
