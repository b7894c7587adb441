"""The global order of sparse arrays with string dimensions, judged by
TileDB 2.30: for string-only, mixed string + integer (both cell orders)
and Hilbert schemas, the fragment tileflight's writer writes from cells in
random order has exactly the fragment metadata TileDB writes for the same
cells (tile MBRs, R-tree, tile statistics, non-empty domain: so the cells
were cut into the same tiles), and TileDB reads both in the same global
order."""

import json

import numpy as np
import pyarrow as pa
import pytest
import tiledb

from test_writer import dump, run, tfwrite, write_ipc  # noqa: F401 (fixture)

# Shared prefixes longer than 8 bytes (Hilbert looks at a string's first
# bytes only), empty strings, prefixes of one another, high bytes.
WORDS = ["", "a", "aa", "ab", "b", "ba", "prefix_long_abcdefgh", "prefix_long_abcdefgz", "prefix_long_abcdefg",
         "prefix_long_", "zz", "zz\x7f", "m", "mid", "Q", "0", "09"]


def str_dim(name):
    return tiledb.Dim(name, domain=(None, None), tile=None, dtype="ascii")


SCHEMAS = {
    "str": lambda: ([str_dim("s")], "row-major", "row-major"),
    "str_int_row": lambda: ([str_dim("s"), tiledb.Dim("i", domain=(-50, 50), tile=8, dtype=np.int64)], "row-major", "row-major"),
    "int_str_col": lambda: ([tiledb.Dim("i", domain=(-50, 50), tile=8, dtype=np.int64), str_dim("s")], "col-major", "col-major"),
    "str_str_row": lambda: ([str_dim("s"), str_dim("t")], "row-major", "row-major"),
    "hilbert_str_int": lambda: ([str_dim("s"), tiledb.Dim("i", domain=(-50, 50), tile=8, dtype=np.int64)], "hilbert", "row-major"),
    "hilbert_str": lambda: ([str_dim("s")], "hilbert", "row-major"),
}


def make_cells(rng, dims, n):
    cols = {}
    for d in dims:
        if d.dtype == np.int64:
            cols[d.name] = rng.integers(-50, 51, n).astype(np.int64)
        else:
            w = [WORDS[i] for i in rng.integers(0, len(WORDS), n)]
            # Some random strings too, so ties are not the only case.
            cols[d.name] = np.array([x if rng.random() < 0.6 else
                                     "".join(chr(c) for c in rng.integers(48, 123, rng.integers(0, 12)))
                                     for x in w], dtype=object)
    keys = list(zip(*[cols[d.name] for d in dims]))
    seen, keep = set(), []
    for i, k in enumerate(keys):
        if k not in seen:
            seen.add(k)
            keep.append(i)
    keep = np.array(keep)
    return {k: v[keep] for k, v in cols.items()}, len(keep)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_string_dims_order(tfwrite, tmp_path, name):
    rng = np.random.default_rng(sum(map(ord, name)))
    dims, cell_order, tile_order = SCHEMAS[name]()
    sch = tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=True, capacity=7, cell_order=cell_order,
                             tile_order=tile_order,
                             attrs=[tiledb.Attr("v", dtype=np.int32), tiledb.Attr("w", dtype=str, var=True)])
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    tiledb.Array.create(theirs, sch)
    tiledb.Array.create(ours, sch)
    cols, n = make_cells(rng, dims, 150)
    v = np.arange(n, dtype=np.int32)
    w = np.array([f"w{i}" for i in range(n)], dtype=object)
    with tiledb.open(theirs, "w", timestamp=3) as A:
        A[tuple(cols[d.name] for d in dims)] = {"v": v, "w": w}
    table = {d.name: (pa.array(list(cols[d.name]), pa.large_utf8()) if d.dtype != np.int64 else pa.array(cols[d.name]))
             for d in dims}
    table["v"], table["w"] = pa.array(v), pa.array(list(w), pa.large_utf8())
    write_ipc(tmp_path / "in.arrow", pa.table(table))
    run(tfwrite, "write", ours, tmp_path / "in.arrow", "-timestamp", 3)
    mo, mt = dump(tfwrite, ours), dump(tfwrite, theirs)
    assert len(mo) == len(mt) == 1
    assert mt[0][0]["Footer"]["SparseTileNum"] > 5  # several tiles to order
    for k in mt[0][0]:
        assert mo[0][0][k] == mt[0][0][k], k
    assert mo[0][1] == mt[0][1]
    with tiledb.open(theirs) as T, tiledb.open(ours) as O:
        rt, ro = T.query(order="G")[:], O.query(order="G")[:]
        assert O.nonempty_domain() == T.nonempty_domain()
        for d in dims:
            assert list(ro[d.name]) == list(rt[d.name]), d.name
        # Cells are unique, so the attribute follows the coordinates.
        assert list(ro["v"]) == list(rt["v"])
