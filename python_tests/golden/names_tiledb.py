"""Write small arrays with TileDB and record every path it creates.

Usage: names_tiledb.py OUTDIR

Writes OUTDIR/names_tiledb230.txt: one line per file or directory under
each array (relative to the array), prefixed by the array's label. The
Go tests in format/names parse every timestamped name in it. The arrays
are made in a temporary directory and thrown away.
"""
import os
import sys
import tempfile

import numpy as np
import tiledb


def walk(root):
    out = []
    for d, dirs, files in os.walk(root):
        for n in sorted(dirs) + sorted(files):
            p = os.path.relpath(os.path.join(d, n), root)
            out.append(p + ("/" if n in dirs else ""))
    return sorted(out)


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    tmp = tempfile.mkdtemp()
    lines = []

    # Dense: two writes at chosen timestamps, metadata, then consolidation of
    # fragments, commits, fragment metadata and array metadata, and vacuum.
    dense = os.path.join(tmp, "dense")
    dom = tiledb.Domain(tiledb.Dim(name="d", domain=(1, 4), tile=2, dtype=np.int32))
    schema = tiledb.ArraySchema(
        domain=dom,
        attrs=[
            tiledb.Attr(name="a", dtype=np.int32),
            tiledb.Attr(name="s", dtype=str, var=True, nullable=True),
        ],
    )
    tiledb.Array.create(dense, schema)
    for ts in (10, 20):
        with tiledb.open(dense, "w", timestamp=ts) as A:
            A[1:5] = {"a": np.arange(4, dtype=np.int32), "s": np.array(["a", "bb", "", "c"], dtype=object)}
            A.meta["k%d" % ts] = ts
    lines += ["dense-before " + p for p in walk(dense)]
    tiledb.consolidate(dense, config=tiledb.Config({"sm.consolidation.mode": "fragment_meta"}))
    tiledb.consolidate(dense, config=tiledb.Config({"sm.consolidation.mode": "commits"}))
    tiledb.consolidate(dense, config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
    tiledb.consolidate(dense, config=tiledb.Config({"sm.consolidation.mode": "array_meta"}))
    lines += ["dense-consolidated " + p for p in walk(dense)]
    for mode in ("fragments", "array_meta", "commits", "fragment_meta"):
        tiledb.vacuum(dense, config=tiledb.Config({"sm.vacuum.mode": mode}))
    lines += ["dense-vacuumed " + p for p in walk(dense)]

    # Sparse: string and float dimensions, then a delete (a .del commit).
    sparse = os.path.join(tmp, "sparse")
    dom = tiledb.Domain(
        tiledb.Dim(name="x", domain=(0.0, 100.0), tile=10.0, dtype=np.float64),
        tiledb.Dim(name="name", domain=(None, None), tile=None, dtype="ascii"),
    )
    schema = tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr(name="v", dtype=np.float32)])
    tiledb.Array.create(sparse, schema)
    with tiledb.open(sparse, "w", timestamp=5) as A:
        A[np.array([1.0, 2.0]), np.array(["p", "q"], dtype=object)] = np.array([1, 2], dtype=np.float32)
    with tiledb.open(sparse, "d", timestamp=6) as A:
        A.query(cond="v > 1.5").submit()
    with tiledb.open(sparse, "w") as A:  # current time: a real clock timestamp
        A[np.array([3.0]), np.array(["r"], dtype=object)] = np.array([3], dtype=np.float32)
    lines += ["sparse " + p for p in walk(sparse)]

    with open(os.path.join(outdir, "names_tiledb230.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
