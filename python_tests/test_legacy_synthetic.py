"""Format v1 to v4 (TileDB 1.x) arrays built by internal/legacygen from
the format specification, read through the daemon and compared with what
TileDB 2.30 reads from the same files: coordinates zipped in
__coords.tdb (v2 to v4: stored dimension by dimension, under zstd, gzip
for v3; v1: unfiltered, cell by cell), an int32 attribute under zstd and
a var-size string attribute under gzip, tiles of three cells. v1 and v2
keep their fragment metadata in one tile; v3 and v4 in generic-tile
sections behind a footer, with an R-tree of the version's own layout, in
fragments named __t1_t2_uuid. Unlike TileDB's own v1-4 inputs
(test_legacy_arrays.py), these run everywhere.

And v2_dense, v4_dense: the same attributes over a 4 x 6 domain in 2 x 3
space tiles (no coordinates file).

Checked: reads in every layout, subarrays, conditions on an attribute and
on a dimension, aggregates; the array after TileDB 2.30 wrote a v22
fragment over it (our merge equals TileDB's); our consolidation of both
into one fragment, which TileDB reads as before."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import tiledb

from flightd_fixture import REPO, Daemon, action, expect_code, flightd_bin, read  # noqa: F401 (fixture)

FIELDS = ("d1", "d2", "a", "s")


@pytest.fixture(scope="module")
def synth(flightd_bin, tmp_path_factory):
    data = tmp_path_factory.mktemp("synth")
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-mod=mod")
    subprocess.run(["go", "run", "./cmd/legacygen", str(data)], cwd=REPO, env=env, check=True)
    for src, dst in (("v2_dense", "dense_merged"), ("v4_dense", "dense_merged_v4")):
        shutil.copytree(data / src, data / dst)
        with tiledb.open(str(data / dst), "w") as A:
            A[2:4, 3:6] = {"a": np.array([[-1, -2, -3], [-4, -5, -6]], dtype=np.int32),
                           "s": np.array([["p", "", "qq"], ["r", "sss", "t"]], dtype=object)}
    for src, dst in (("v2_sparse", "merged"), ("v4_sparse", "merged_v4")):
        shutil.copytree(data / src, data / dst)
        with tiledb.open(str(data / dst), "w") as A:
            A[np.array([2, 500], dtype=np.int64), np.array([3, 500], dtype=np.int64)] = {
                "a": np.array([-1, 500], dtype=np.int32), "s": np.array(["over", "new"], dtype=object)}
    d = Daemon(flightd_bin, data)
    try:
        yield d
    finally:
        d.stop()


def norm(v):
    return v.decode() if isinstance(v, bytes) else v


def tiledb_cells(uri, order="U", cond=None, d1=None, d2=None):
    with tiledb.open(uri) as A:
        q = A.query(order=order, cond=cond)
        r = q.multi_index[d1 or slice(None), d2 or slice(None)] if (d1 or d2) else q[:]
    return {k: [norm(x) for x in np.asarray(v).tolist()] for k, v in r.items()}


def ours(c, **q):
    t = read(c, **q)
    return {k: [norm(x) for x in t.column(k).to_pylist()] for k in t.column_names}


def rows(cells):
    return [tuple(cells[k][i] for k in FIELDS) for i in range(len(cells["d1"]))]


@pytest.mark.parametrize("array", ["v2_sparse", "v1_sparse", "merged", "v3_sparse", "v4_sparse", "merged_v4"])
def test_synthetic_v2_reads_equal_tiledb(synth, array):
    uri = os.path.join(synth.data, array)
    full = tiledb_cells(uri)
    if not array.startswith("merged"):
        # TileDB reads back exactly the cells the generator wrote.
        with open(os.path.join(synth.data, array + ".json")) as f:
            written = json.load(f)
        assert sorted(rows(full)) == sorted((c["D1"], c["D2"], c["A"], c["S"]) for c in written)
    c = synth.client()
    try:
        assert sorted(rows(ours(c, array=array))) == sorted(rows(full))
        for layout, order in (("row-major", "C"), ("col-major", "F"), ("global", "G")):
            assert rows(ours(c, array=array, layout=layout)) == rows(tiledb_cells(uri, order=order)), layout
        got = ours(c, array=array, subarray={"d1": [[1, 4]], "d2": [[2, 900]]}, layout="row-major")
        assert rows(got) == rows(tiledb_cells(uri, order="C", d1=slice(1, 4), d2=slice(2, 900)))
        assert sorted(rows(ours(c, array=array, filter="a > 11"))) == sorted(rows(tiledb_cells(uri, cond="a > 11")))
        assert sorted(rows(ours(c, array=array, filter="s == 'zz'"))) == sorted(rows(tiledb_cells(uri, cond="s == 'zz'")))
        # A condition on a dimension: TileDB 2.30 answers no cell of a
        # v1-4 fragment (see docs/conformance.md); the cells that satisfy
        # it are those of its unconditioned read with d2 >= 3.
        assert sorted(rows(ours(c, array=array, filter="d2 >= 3"))) == sorted(x for x in rows(full) if x[1] >= 3)
        t = read(c, array=array, aggregates={"a": ["sum", "min", "max", "count"], "d2": ["min", "max"]})
        got = {k: t.column(k).to_pylist()[0] for k in t.column_names}
        a = np.array(full["a"], dtype=np.int64)
        assert got == {"sum(a)": int(a.sum()), "min(a)": int(a.min()), "max(a)": int(a.max()), "count(a)": len(a),
                       "min(d2)": min(full["d2"]), "max(d2)": max(full["d2"])}, got
    finally:
        c.close()


@pytest.mark.parametrize("array", ["merged", "merged_v4"])
def test_synthetic_v2_consolidated_read_by_tiledb(synth, array):
    src = os.path.join(synth.data, array)
    want = tiledb_cells(src, order="C")
    dst = os.path.join(synth.data, array + "_cons")
    shutil.copytree(src, dst)
    c = synth.client()
    try:
        res = action(c, "consolidate", {"array": array + "_cons"})
        assert len(res["consolidated"]) == 2 and res["written"], res
    finally:
        c.close()
    frags = list(tiledb.FragmentInfoList(dst))
    assert [f.version for f in frags] == [22], [(f.uri, f.version) for f in frags]
    assert tiledb_cells(dst, order="C") == want


DENSE = ("r", "c", "a", "s")


def dense_tiledb(uri, r=(1, 4), c=(1, 6), order="C"):
    """TileDB's dense read of a box as rows (r, c, a, s) in `order`."""
    with tiledb.open(uri) as A:
        res = A.query(order=order, dims=True).multi_index[r[0]:r[1], c[0]:c[1]]
    return [tuple(norm(x) for x in t) for t in zip(*(np.asarray(res[k]).ravel(order="C").tolist() for k in DENSE))]


@pytest.mark.parametrize("array", ["v2_dense", "dense_merged", "v4_dense", "dense_merged_v4"])
def test_synthetic_v2_dense_reads_equal_tiledb(synth, array):
    uri = os.path.join(synth.data, array)
    if not array.startswith("dense_merged"):
        with open(os.path.join(synth.data, array + ".json")) as f:
            written = json.load(f)
        assert sorted(dense_tiledb(uri)) == sorted((c["D1"], c["D2"], c["A"], c["S"]) for c in written)
    c = synth.client()
    try:
        def box(r, cc, layout):
            t = read(c, array=array, subarray={"r": [list(r)], "c": [list(cc)]}, layout=layout)
            return [tuple(norm(x) for x in row) for row in zip(*(t.column(k).to_pylist() for k in DENSE))]
        for r, cc in (((1, 4), (1, 6)), ((2, 3), (2, 5)), ((4, 4), (6, 6))):
            assert box(r, cc, "row-major") == dense_tiledb(uri, r, cc), (r, cc)
            assert box(r, cc, "col-major") == sorted(dense_tiledb(uri, r, cc), key=lambda x: (x[1], x[0])), (r, cc)
        full = dense_tiledb(uri)
        # A filter on a dense array reads the cells that fail it as the
        # fill value (docs/protocol.md), as TileDB does.
        with tiledb.open(uri) as A:
            cond = A.query(cond="a > 30", dims=True).multi_index[1:4, 1:6]
        want = [tuple(norm(x) for x in t) for t in zip(*(np.asarray(cond[k]).ravel().tolist() for k in DENSE))]
        assert sorted(ours_dense_filter(c, array, "a > 30")) == sorted(want)
        assert sum(1 for x in want if x[2] > 30) == sum(1 for x in full if x[2] > 30)
        t = read(c, array=array, aggregates={"a": ["sum", "min", "max", "count"]})
        got = {k: t.column(k).to_pylist()[0] for k in t.column_names}
        a = np.array([x[2] for x in full], dtype=np.int64)
        assert got == {"sum(a)": int(a.sum()), "min(a)": int(a.min()), "max(a)": int(a.max()), "count(a)": len(a)}, got
    finally:
        c.close()


def ours_dense_filter(c, array, cond):
    """Our read with a filter. The string fill value is one NUL byte, which
    tiledb-py's numpy conversion of ASCII strings shows as '' (numpy drops
    trailing NULs): compare it as such."""
    t = read(c, array=array, filter=cond)
    return [tuple("" if x == "\x00" else norm(x) for x in row) for row in zip(*(t.column(k).to_pylist() for k in DENSE))]


@pytest.mark.parametrize("array", ["dense_merged", "dense_merged_v4"])
def test_synthetic_v2_dense_consolidated_read_by_tiledb(synth, array):
    src = os.path.join(synth.data, array)
    want = dense_tiledb(src)
    dst = os.path.join(synth.data, array + "_cons")
    shutil.copytree(src, dst)
    c = synth.client()
    try:
        res = action(c, "consolidate", {"array": array + "_cons"})
        assert len(res["consolidated"]) == 2 and res["written"], res
    finally:
        c.close()
    frags = list(tiledb.FragmentInfoList(dst))
    assert [f.version for f in frags] == [22], [(f.uri, f.version) for f in frags]
    assert dense_tiledb(dst) == want


@pytest.mark.parametrize("src", ["v2_sparse", "v4_sparse"])
def test_doput_into_v2_array_read_by_tiledb(synth, src):
    """Our writer's v22 fragment in a v2 (v4) array (dimension tiles
    unfiltered, as TileDB writes them there): TileDB reads it merged with
    the legacy one."""
    import pyarrow as pa
    from flightd_fixture import cmd, put
    name = "put_" + src
    dst = os.path.join(synth.data, name)
    shutil.copytree(os.path.join(synth.data, src), dst)
    before = {(r[0], r[1]): r for r in rows(tiledb_cells(dst))}
    c = synth.client()
    try:
        res = put(c, cmd(array=name), pa.table({
            "d1": pa.array([2, 600], pa.int64()), "d2": pa.array([3, 601], pa.int64()),
            "a": pa.array([-7, 600], pa.int32()), "s": pa.array(["put", "new one"])}))
        assert res["rows"] == 2, res
        got_ours = sorted(rows(ours(c, array=name)))
    finally:
        c.close()
    before[(2, 3)] = (2, 3, -7, "put")
    before[(600, 601)] = (600, 601, 600, "new one")
    assert sorted(rows(tiledb_cells(dst))) == sorted(before.values())
    assert got_ours == sorted(before.values())


def test_tiledb_known_issue_dimension_condition_on_v1_4_fragments(synth):
    """tiledb_known_issues.py, issue 2: TileDB 2.30 answers no cell of a
    v1-4 fragment to a condition on a dimension. When this fails, TileDB
    fixed it: compare our answer with TileDB's own in the tests above."""
    uri = os.path.join(synth.data, "v2_sparse")
    assert tiledb_cells(uri, cond="d2 >= 3")["d2"] == []
    assert [x for x in tiledb_cells(uri)["d2"] if x >= 3] != []


@pytest.mark.parametrize("array,file,size", [
    ("v1_sparse", "__coords.tdb", 40), ("v1_sparse", "__fragment_metadata.tdb", 60),
    ("v2_sparse", "s_var.tdb", 10), ("v2_sparse", "a.tdb", 0),
    ("v3_sparse", "__coords.tdb", 30), ("v3_sparse", "__fragment_metadata.tdb", 100),
    ("v4_sparse", "__fragment_metadata.tdb", 20), ("v4_sparse", "s.tdb", 12),
    ("v4_dense", "a.tdb", 25), ("v4_dense", "__fragment_metadata.tdb", 150),
])
def test_truncated_legacy_fragment_is_data_loss_naming_the_file(synth, array, file, size):
    """A v1-4 fragment with one file cut short: DataLoss naming the
    fragment and that file (the metadata's footer, a section, or a data
    tile), and the daemon keeps serving the whole array beside it."""
    name = f"cut_{array}_{file.replace('.', '_')}"
    dst = os.path.join(synth.data, name)
    shutil.copytree(os.path.join(synth.data, array), dst)
    frag = [e for e in os.listdir(dst) if e.startswith("__") and os.path.isdir(os.path.join(dst, e))][0]
    os.truncate(os.path.join(dst, frag, file), size)
    c = synth.client()
    try:
        msg = expect_code("DATA_LOSS", read, c, array=name, layout="row-major")
        assert file in msg and frag in msg, msg
        assert synth.data not in msg, msg  # array-relative names only
        assert read(c, array=array).num_rows > 0
    finally:
        c.close()
