"""Known bugs of the reference, TileDB 2.30.0, each pinned by a test that
passes while TileDB still has the bug. When an upgrade fixes one, its test
fails and says so: then the matching workaround in the test suite can go.

These tests are collected through test_diff_reader.py (which imports them),
since pytest only looks at test_*.py files; `pytest
python_tests/tiledb_known_issues.py` runs them alone.

1. A sparse subarray read drops (or adds) cells on a string dimension.

   Minimal repro (tiledb only):

       import numpy as np, tiledb
       uri = "/tmp/strpart"
       dims = [tiledb.Dim("s", dtype="ascii"),
               tiledb.Dim("i", domain=(0, 99), tile=1, dtype=np.int64)]
       tiledb.Array.create(uri, tiledb.ArraySchema(
           domain=tiledb.Domain(*dims), sparse=True, capacity=13,
           attrs=[tiledb.Attr("a", dtype=np.int32)], cell_order="row-major"))
       cells = [("z", k) for k in range(11)] + [("a", 11), ("z", 12)]
       with tiledb.open(uri, "w") as A:
           A[np.array([c[0] for c in cells], dtype=object),
             np.array([c[1] for c in cells], np.int64)] = {"a": np.arange(13, dtype=np.int32)}
       ctx = tiledb.Ctx({"sm.compute_concurrency_level": "1"})
       with tiledb.open(uri, ctx=ctx) as A:
           A.query(order="G")[:]["s"]                       # has b"a" (cell ("a", 11))
           A.query().multi_index[slice("a", "a"), :]["s"]   # empty: ("a", 11) is lost

   The conditions: a sparse array whose string dimension leads the cell
   order (first dimension with a row-major cell order, last with col-major;
   the tile order does not matter), another dimension whose space tiles
   make the global order not sorted by the string (above: tile extent 1 on
   i, so the order is i first), and a data tile of at least 13 cells scanned
   as a whole. TileDB assumes that dimension is sorted inside a data tile;
   it splits the tile's cells into 6 parts and, when a part's first and
   last strings are equal, gives every cell of the part the answer of its
   first cell. Above, cells 10..12 are ("z", 10), ("a", 11), ("z", 12): "z"
   is out of the range, so "a" is dropped. The mirror image (first and last
   inside the range, a middle one outside) returns a cell outside the
   subarray. A single-dimension string array is always sorted by the string
   and never shows it. "Scanned as a whole": when a read has fewer result
   tiles than compute threads, TileDB splits each tile's cells between
   threads, the parts get smaller than 3 cells and the shortcut never
   fires; hence the concurrency of 1 here (the random arrays of the
   differential test have several tiles, so the default context shows it).
   Every read layout (unordered, global, row- and col-major) goes through
   it. An unrestricted read sets no range and is right.

   Workaround in test_diff_reader.py: the reference for a sparse query is
   TileDB's unrestricted read filtered by the query's ranges in Python;
   TileDB's own subarray answer is still compared and its disagreements
   are counted and printed, not failed.

2. A query condition on a dimension answers no cell of a fragment of
   format version 1-4 (TileDB 1.x, coordinates zipped in __coords.tdb):
   TileDB evaluates it on per-dimension coordinate tiles, which such a
   fragment does not have. Pinned in test_legacy_synthetic.py
   (test_tiledb_known_issue_dimension_condition_on_v1_4_fragments, on the
   synthetic v2 array of internal/legacygen) and in test_legacy_arrays.py
   (on TileDB's own v1 input array). Workaround there: the reference is
   TileDB's unconditioned read filtered in Python.
"""

import numpy as np
import pytest
import tiledb

STRPART_CELLS = [("z", k) for k in range(11)] + [("a", 11), ("z", 12)]
# The mirror image: first and last of the last part are inside ["a", "a"],
# the middle cell is not, and TileDB returns it.
STRPART_CELLS_EXTRA = [("a", k) for k in range(11)] + [("z", 11), ("a", 12)]


def strpart_read(uri, cells, tile_order, cell_order, capacity, string_first=True):
    """Write cells ((string, int) pairs) into a new sparse array and return
    (the cells of an unrestricted read inside s in ["a", "a"], the cells of
    TileDB's subarray read s in ["a", "a"]), both sorted."""
    s = tiledb.Dim("s", dtype="ascii")
    i = tiledb.Dim("i", domain=(0, 99), tile=1, dtype=np.int64)
    tiledb.Array.create(uri, tiledb.ArraySchema(
        domain=tiledb.Domain(*([s, i] if string_first else [i, s])), sparse=True,
        attrs=[tiledb.Attr("a", dtype=np.int32)], cell_order=cell_order, tile_order=tile_order,
        capacity=capacity))
    S = np.array([c[0] for c in cells], dtype=object)
    ints = np.array([c[1] for c in cells], np.int64)
    with tiledb.open(uri, "w") as A:
        A[(S, ints) if string_first else (ints, S)] = {"a": np.arange(len(cells), dtype=np.int32)}
    # One compute thread: the bug needs a tile scanned by one thread (see
    # the module docstring), which a one-tile read on a many-core machine
    # would not do.
    ctx = tiledb.Ctx({"sm.compute_concurrency_level": "1"})
    with tiledb.open(uri, ctx=ctx) as A:
        full = A.query(order="U")[:]
        rng = slice("a", "a")
        part = A.query(order="U").multi_index[(rng, slice(None)) if string_first else (slice(None), rng)]

    def pairs(r):
        return sorted(zip([x.decode() for x in r["s"]], r["i"].tolist()))
    return [c for c in pairs(full) if c[0].encode() == b"a"], pairs(part)


# (tile order, cell order, string dimension first): the string leads the
# cell order in each.
LEADING = [("row-major", "row-major", True), ("col-major", "row-major", True),
           ("row-major", "col-major", False), ("col-major", "col-major", False)]


@pytest.mark.parametrize("tile_order,cell_order,string_first", LEADING)
def test_tiledb_known_issue_string_partition_drops_cells(tmp_path, tile_order, cell_order, string_first):
    want, got = strpart_read(str(tmp_path / "a"), STRPART_CELLS, tile_order, cell_order, 13, string_first)
    assert want == [("a", 11)]
    assert got == [], ("TileDB's subarray read now finds ('a', 11): the string-partition bug is fixed "
                       "(see tiledb_known_issues.py); the workaround in test_diff_reader.py can go")


@pytest.mark.parametrize("tile_order,cell_order,string_first", LEADING)
def test_tiledb_known_issue_string_partition_adds_cells(tmp_path, tile_order, cell_order, string_first):
    want, got = strpart_read(str(tmp_path / "a"), STRPART_CELLS_EXTRA, tile_order, cell_order, 13, string_first)
    assert ("z", 11) not in want and len(want) == 12
    assert got == sorted(want + [("z", 11)]), (
        "TileDB's subarray read no longer returns ('z', 11) outside the range: the string-partition "
        "bug is fixed (see tiledb_known_issues.py); the workaround in test_diff_reader.py can go")


@pytest.mark.parametrize("tile_order,cell_order,string_first,capacity", [
    # A string that does not lead the cell order is checked cell by cell.
    ("row-major", "col-major", True, 13), ("row-major", "row-major", False, 13),
    # Data tiles of 12 cells: parts of 2 cells have no middle.
    ("row-major", "row-major", True, 12), ("col-major", "col-major", False, 12),
])
def test_tiledb_known_issue_string_partition_bounds(tmp_path, tile_order, cell_order, string_first, capacity):
    """The conditions in the docstring are the real ones: outside them,
    TileDB's subarray read is right on the same cells."""
    want, got = strpart_read(str(tmp_path / "a"), STRPART_CELLS, tile_order, cell_order, capacity, string_first)
    assert want == [("a", 11)] and got == want
