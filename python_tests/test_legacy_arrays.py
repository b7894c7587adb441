"""Fragments written by TileDB 1.x (format versions 1-4: coordinates zipped
in one __coords.tdb, legacy fragment metadata) read through the daemon and
compared with what TileDB 2.30 reads from the same files.

The arrays are TileDB's own backward-compatibility inputs (TileDB's
repository, test/inputs/arrays; MIT-licensed). They are not redistributed
here: point TILEFLIGHT_LEGACY_ARRAYS at a checkout's test/inputs/arrays to
run these tests; without it they are skipped. Synthetic v1-4 fragments
(built in Go from the format spec) are covered by reader/tileio's tests.

What is checked on `non_split_coords_v1_4_0` (format v1, sparse, two int32
dimensions, zipped coordinates, one int32 attribute):
- reads in every layout, subarrays, a filter, aggregates: equal to TileDB;
- the array after TileDB 2.30 wrote a v22 fragment over it: our merge of
  the v1 and v22 fragments equals TileDB's;
- our consolidation of the two into one fragment: TileDB reads it as before.
And `dense_array_v1_3_0`, whose schema TileDB 2.30 refuses (its generic
tile header is cut short): we refuse it too, as DataLoss naming the file."""

import os
import shutil

import numpy as np
import pyarrow as pa
import pytest
import tiledb

from flightd_fixture import Daemon, action, expect_code, flightd_bin, read  # noqa: F401 (fixture)

LEGACY = os.environ.get("TILEFLIGHT_LEGACY_ARRAYS", "")
pytestmark = pytest.mark.skipif(
    not (LEGACY and os.path.isdir(os.path.join(LEGACY, "non_split_coords_v1_4_0"))),
    reason="TILEFLIGHT_LEGACY_ARRAYS (TileDB's test/inputs/arrays) not set")

V1 = "non_split_coords_v1_4_0"


@pytest.fixture(scope="module")
def legacy(flightd_bin, tmp_path_factory):
    data = tmp_path_factory.mktemp("legacy")
    for name in (V1, "dense_array_v1_3_0"):
        shutil.copytree(os.path.join(LEGACY, name), data / name)
    # The same v1 array after TileDB 2.30 wrote a fragment over it: cell
    # (2, 10) overwritten, (5, 11) added.
    shutil.copytree(os.path.join(LEGACY, V1), data / "merged")
    with tiledb.open(str(data / "merged"), "w") as A:
        A[np.array([2, 5], dtype=np.int32), np.array([10, 11], dtype=np.int32)] = {
            "a": np.array([20, 50], dtype=np.int32)}
    d = Daemon(flightd_bin, data)
    try:
        yield d
    finally:
        d.stop()


def tiledb_cells(uri, order="U", cond=None, **sub):
    """TileDB's cells as a dict of lists, in its order for `order`."""
    with tiledb.open(uri) as A:
        q = A.query(order=order, cond=cond)
        if sub:
            r = q.multi_index[sub.get("d1", slice(None)), sub.get("d2", slice(None))]
        else:
            r = q[:]
    return {k: np.asarray(v).tolist() for k, v in r.items()}


def ours(client, **q):
    t = read(client, **q)
    return {k: t.column(k).to_pylist() for k in t.column_names}


def as_set(cells):
    return sorted(zip(cells["d1"], cells["d2"], cells["a"]))


@pytest.mark.parametrize("array", [V1, "merged"])
def test_reads_equal_tiledb(legacy, array):
    uri = os.path.join(legacy.data, array)
    c = legacy.client()
    try:
        # Unordered: the same cells.
        assert as_set(ours(c, array=array)) == as_set(tiledb_cells(uri))
        # Ordered layouts: the same cells in the same order.
        for layout, order in (("row-major", "C"), ("col-major", "F"), ("global", "G")):
            got = ours(c, array=array, layout=layout)
            want = tiledb_cells(uri, order=order)
            assert [got[k] for k in ("d1", "d2", "a")] == [want[k] for k in ("d1", "d2", "a")], layout
        # Subarrays (TileDB's multi_index ranges are inclusive, as ours).
        got = ours(c, array=array, subarray={"d1": [[2, 3]]}, layout="row-major")
        want = tiledb_cells(uri, order="C", d1=slice(2, 3))
        assert [got[k] for k in ("d1", "d2", "a")] == [want[k] for k in ("d1", "d2", "a")]
        got = ours(c, array=array, subarray={"d1": [[1, 5]], "d2": [[10, 10]]}, layout="row-major")
        want = tiledb_cells(uri, order="C", d1=slice(1, 5), d2=slice(10, 10))
        assert [got[k] for k in ("d1", "d2", "a")] == [want[k] for k in ("d1", "d2", "a")]
        # A condition on the attribute and one on a dimension.
        assert as_set(ours(c, array=array, filter="a > 2")) == as_set(tiledb_cells(uri, cond="a > 2"))
        # On a dimension, TileDB 2.30 answers no cell of a v1-4 fragment
        # (it evaluates the condition on per-dimension tiles that such a
        # fragment does not have); the cells that satisfy it are those of
        # TileDB's unconditioned read whose d1 is in [2, 4].
        full = tiledb_cells(uri)
        want = [x for x in as_set(full) if 2 <= x[0] <= 4]
        assert as_set(ours(c, array=array, filter="d1 >= 2 and d1 <= 4")) == want
        if array == V1:
            assert tiledb_cells(uri, cond="d1 >= 2 and d1 <= 4")["d1"] == [], "TileDB fixed dimension conditions on v1 fragments"
        # Aggregates, against numpy over TileDB's cells.
        want = tiledb_cells(uri)
        t = read(c, array=array, aggregates={"a": ["sum", "min", "max", "count"], "d1": ["max"]})
        got = {k: t.column(k).to_pylist()[0] for k in t.column_names}
        a = np.array(want["a"])
        assert got == {"sum(a)": int(a.sum()), "min(a)": int(a.min()), "max(a)": int(a.max()),
                       "count(a)": len(a), "max(d1)": max(want["d1"])}, got
    finally:
        c.close()


def test_consolidation_of_v1_and_v22_read_by_tiledb(legacy, tmp_path):
    """Our consolidation of the v1 fragment with TileDB's v22 one writes a
    fragment that TileDB reads as it read the two."""
    src = os.path.join(legacy.data, "merged")
    want = tiledb_cells(src, order="C")
    dst = os.path.join(legacy.data, "merged_cons")
    shutil.copytree(src, dst)
    c = legacy.client()
    try:
        res = action(c, "consolidate", {"array": "merged_cons"})
        assert len(res["consolidated"]) == 2, res
        assert res["written"], res
    finally:
        c.close()
    frags = tiledb.FragmentInfoList(dst)
    visible = [f for f in frags]
    assert len(visible) == 1 and visible[0].version == 22, [(f.uri, f.version) for f in visible]
    assert tiledb_cells(dst, order="C") == want


def test_dense_v1_3_0_refused_like_tiledb(legacy):
    uri = os.path.join(legacy.data, "dense_array_v1_3_0")
    with pytest.raises(tiledb.TileDBError, match="past end"):
        with tiledb.open(uri) as A:
            A[:]
    c = legacy.client()
    try:
        msg = expect_code("DATA_LOSS", read, c, array="dense_array_v1_3_0")
        assert "__array_schema.tdb" in msg, msg
    finally:
        c.close()


@pytest.mark.parametrize("file,size", [("__coords.tdb", 40), ("__fragment_metadata.tdb", 100), ("a.tdb", 30),
                                       ("__coords.tdb", 0)])
def test_truncated_v1_fragment_is_data_loss_naming_the_file(flightd_bin, tmp_path, file, size):
    """A v1 fragment with one file cut short: DataLoss naming that file,
    and the daemon keeps serving."""
    data = tmp_path / "data"
    shutil.copytree(os.path.join(LEGACY, V1), data / "cut")
    shutil.copytree(os.path.join(LEGACY, V1), data / "whole")
    frag = [e for e in os.listdir(data / "cut") if e.startswith("__") and os.path.isdir(data / "cut" / e)][0]
    os.truncate(data / "cut" / frag / file, size)
    d = Daemon(flightd_bin, data)
    try:
        c = d.client()
        msg = expect_code("DATA_LOSS", read, c, array="cut", layout="row-major")
        assert file in msg and frag in msg, msg
        assert read(c, array="whole").num_rows == 4
        c.close()
    finally:
        d.stop()
