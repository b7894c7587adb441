"""Write TileDB arrays that exercise commits, consolidation, vacuuming,
ignore files and deletes, for format/commits.

usage: commits_cases.py OUTDIR     (the Go tests read format/commits/testdata/cases)

For every case an array is built with the tiledb package (TileDB 2.30) in a
temporary directory, then OUTDIR/<case>/ receives only what the Go tests
need, never fragment data:

  files/<dir>/<name>   every small commit-type file as written: the contents
                       of __commits/ and the root's .ok/.vac files
  case.json            the listings of the root, __commits, __fragments and
                       __fragment_meta (names and sizes), whether the array
                       is dense, the writes (id, timestamp), TileDB's own
                       fragment list (tiledb.array_fragments: URIs relative
                       to the array, versions, timestamp ranges, to_vacuum,
                       in TileDB's order), and what a read at several
                       timestamp ranges returns (the ids of the cells read;
                       every write puts its id in its own cell), and for
                       delete commits the condition that was submitted.

The Go tests in format/commits decode every commit file, require that
re-encoding reproduces TileDB's bytes, and check that the visibility
function selects fragments consistent with all of the above.
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np
import tiledb

OUT = None
TMP = None
FAR = 10**6  # a timestamp later than every write below


def sparse_schema(extra_attrs=()):
    dom = tiledb.Domain(tiledb.Dim(name="d", domain=(0, 999), tile=100, dtype=np.int64))
    attrs = [tiledb.Attr(name="a", dtype=np.int32)] + list(extra_attrs)
    return tiledb.ArraySchema(domain=dom, sparse=True, attrs=attrs, capacity=64)


def dense_schema():
    dom = tiledb.Domain(tiledb.Dim(name="d", domain=(0, 99), tile=10, dtype=np.int64))
    return tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr(name="a", dtype=np.int32)])


class Case:
    def __init__(self, name, dense=False, schema=None):
        self.name = name
        self.dense = dense
        self.uri = os.path.join(TMP, name)
        self.writes = []
        self.deletes = []
        tiledb.Array.create(self.uri, schema or (dense_schema() if dense else sparse_schema()))

    def write(self, wid, ts):
        """Write cell d=wid with a=wid at timestamp ts."""
        with tiledb.open(self.uri, "w", timestamp=ts) as A:
            if self.dense:
                A[wid : wid + 1] = np.array([wid], dtype=np.int32)
            else:
                A[np.array([wid], dtype=np.int64)] = {"a": np.array([wid], dtype=np.int32)}
        self.writes.append({"id": wid, "ts": ts})

    def delete(self, cond, ts):
        with tiledb.open(self.uri, "d", timestamp=ts) as A:
            A.query(cond=cond).submit()
        self.deletes.append({"cond": cond, "ts": ts})

    def consolidate(self, mode="fragments", ts=None):
        cfg = tiledb.Config({"sm.consolidation.mode": mode})
        if ts is not None:
            cfg["sm.consolidation.timestamp_start"] = str(ts[0])
            cfg["sm.consolidation.timestamp_end"] = str(ts[1])
        tiledb.consolidate(self.uri, config=cfg)

    def vacuum(self, mode="fragments"):
        tiledb.vacuum(self.uri, config=tiledb.Config({"sm.vacuum.mode": mode}))

    def read_ids(self, ts):
        with tiledb.open(self.uri, "r", timestamp=ts) as A:
            if self.dense:
                # unwritten cells hold the fill value, INT32_MIN
                a = A[:]["a"]
                return sorted(int(v) for v in a[a > 0])
            return sorted(int(v) for v in A[:]["a"])

    def finish(self, reads=()):
        out = os.path.join(OUT, self.name)
        shutil.rmtree(out, ignore_errors=True)
        listing = {}
        for sub in ("", "__commits", "__fragments", "__fragment_meta"):
            p = os.path.join(self.uri, sub)
            ents = []
            if os.path.isdir(p):
                for n in sorted(os.listdir(p)):
                    fp = os.path.join(p, n)
                    isdir = os.path.isdir(fp)
                    ents.append({"name": n, "dir": isdir, "size": 0 if isdir else os.path.getsize(fp)})
                    small = sub == "__commits" or (sub == "" and n.endswith((".ok", ".vac")))
                    if small and not isdir:
                        dst = os.path.join(out, "files", sub or "root", n)
                        os.makedirs(os.path.dirname(dst), exist_ok=True)
                        shutil.copyfile(fp, dst)
            listing[sub or "root"] = ents
        fi = tiledb.array_fragments(self.uri)
        base = self.uri.rstrip("/") + "/"

        def rel(u):
            u = u[len("file://"):] if u.startswith("file://") else u
            assert u.startswith(base), (u, base)
            return u[len(base):]

        frags = [
            {"uri": rel(f.uri), "version": int(f.version),
             "timestamp_range": [int(f.timestamp_range[0]), int(f.timestamp_range[1])]}
            for f in fi
        ]
        doc = {
            "case": self.name,
            "dense": self.dense,
            "listing": listing,
            "writes": self.writes,
            "deletes": self.deletes,
            "fragments": frags,
            "to_vacuum": [rel(u) for u in fi.to_vacuum],
            "reads": [{"timestamp": list(t), "ids": self.read_ids(t)} for t in reads],
        }
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "case.json"), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)


READS = [(0, FAR), (0, 10), (0, 20), (10, 20), (20, 30), (15, 35), (20, 20), (30, FAR), (0, 5), (25, 40)]


def writes_only(dense):
    c = Case("writes_" + ("dense" if dense else "sparse"), dense)
    for i, ts in enumerate([10, 20, 30, 40, 50], start=1):
        c.write(i, ts)
    # two fragments with the same timestamp
    c.write(6, 30)
    c.finish(READS)


def consolidated(dense, vac):
    c = Case("consol_%s_%s" % ("dense" if dense else "sparse", "vac" if vac else "novac"), dense)
    for i, ts in enumerate([10, 20, 30, 40], start=1):
        c.write(i, ts)
    c.consolidate(ts=(20, 30))
    if vac:
        c.vacuum()
    c.write(5, 50)
    c.finish(READS)


def consolidated_all(dense):
    c = Case("consol_all_%s" % ("dense" if dense else "sparse"), dense)
    for i, ts in enumerate([10, 20, 30], start=1):
        c.write(i, ts)
    c.consolidate()
    c.write(4, 40)
    c.finish(READS)


def commits():
    # commits consolidation only
    c = Case("commits_con")
    for i, ts in enumerate([10, 20, 30, 40], start=1):
        c.write(i, ts)
    c.consolidate(mode="commits")
    c.write(5, 50)
    c.finish(READS)

    # ... then vacuum commits: the .wrt files now in a .con go away
    c = Case("commits_con_vac")
    for i, ts in enumerate([10, 20, 30, 40], start=1):
        c.write(i, ts)
    c.consolidate(mode="commits")
    c.vacuum(mode="commits")
    c.write(5, 50)
    c.finish(READS)

    # ... then consolidate and vacuum fragments whose commits are in the .con:
    # TileDB writes an ignore file for them.
    c = Case("commits_ign")
    for i, ts in enumerate([10, 20, 30, 40], start=1):
        c.write(i, ts)
    c.consolidate(mode="commits")
    c.vacuum(mode="commits")
    c.consolidate(ts=(10, 20))
    c.vacuum()
    c.write(5, 50)
    c.finish(READS)

    # ... then consolidate the commits again (a second .con without the
    # ignored entries), without vacuuming the first.
    c = Case("commits_recon")
    for i, ts in enumerate([10, 20, 30, 40], start=1):
        c.write(i, ts)
    c.consolidate(mode="commits")
    c.vacuum(mode="commits")
    c.consolidate(ts=(10, 20))
    c.vacuum()
    c.write(5, 50)
    c.consolidate(mode="commits")
    c.finish(READS)

    # ... and vacuum the commits once more: old .con and .ign go away.
    c = Case("commits_recon_vac")
    for i, ts in enumerate([10, 20, 30, 40], start=1):
        c.write(i, ts)
    c.consolidate(mode="commits")
    c.vacuum(mode="commits")
    c.consolidate(ts=(10, 20))
    c.vacuum()
    c.write(5, 50)
    c.consolidate(mode="commits")
    c.vacuum(mode="commits")
    c.finish(READS)

    # delete_fragments over fragments whose commits are consolidated
    c = Case("commits_delfrag")
    for i, ts in enumerate([10, 20, 30, 40], start=1):
        c.write(i, ts)
    c.consolidate(mode="commits")
    c.vacuum(mode="commits")
    tiledb.Array.delete_fragments(c.uri, 15, 30)
    c.writes = [w for w in c.writes if not (15 <= w["ts"] <= 30)]
    c.finish(READS)


def fragment_meta():
    c = Case("fragmeta")
    for i, ts in enumerate([10, 20, 30], start=1):
        c.write(i, ts)
    c.consolidate(mode="fragment_meta")
    c.write(4, 40)
    c.consolidate(mode="fragment_meta")
    c.finish(READS)


DELETE_CONDS = [
    "a < 5",
    "a >= 7",
    "s == 'abc'",
    "a in [1, 3, 5]",
    "s not in ['x', 'yz']",
    "a > 2 and a < 8",
    "a == 1 or f == 1.5",
    "not (a == 3)",
    "(a < 2 or a > 8) and (s != 'q' or f <= 0.5)",
    "n == None",
    "n != None",
]


def deletes():
    extra = [
        tiledb.Attr(name="s", dtype=str, var=True),
        tiledb.Attr(name="f", dtype=np.float64),
        tiledb.Attr(name="n", dtype=np.int32, nullable=True),
    ]

    def build(name):
        c = Case(name, schema=sparse_schema(extra))
        with tiledb.open(c.uri, "w", timestamp=10) as A:
            d = np.arange(10, dtype=np.int64)
            A[d] = {
                "a": np.arange(10, dtype=np.int32),
                "s": np.array(["abc", "x", "yz", "q", "", "abc", "x", "q", "z", "w"], dtype=object),
                "f": np.linspace(0, 2, 10),
                "n": np.ma.masked_array(np.arange(10, dtype=np.int32), mask=[i % 3 == 0 for i in range(10)]),
            }
        c.writes.append({"id": -1, "ts": 10})
        for i, cond in enumerate(DELETE_CONDS):
            try:
                c.delete(cond, 100 + i)
            except tiledb.TileDBError as e:
                print("delete %r not supported: %s" % (cond, e), file=sys.stderr)
        return c

    build("deletes").finish()
    c = build("deletes_con")
    with tiledb.open(c.uri, "w", timestamp=200) as A:
        A[np.array([20], dtype=np.int64)] = {
            "a": np.array([20], dtype=np.int32), "s": np.array(["new"], dtype=object),
            "f": np.array([9.0]), "n": np.array([20], dtype=np.int32)}
    c.writes.append({"id": 20, "ts": 200})
    c.consolidate(mode="commits")
    c.finish()


def main():
    global OUT, TMP
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    OUT = os.path.abspath(sys.argv[1])
    os.makedirs(OUT, exist_ok=True)
    TMP = tempfile.mkdtemp(prefix="tf_commits_")
    try:
        for dense in (False, True):
            writes_only(dense)
            consolidated_all(dense)
            for vac in (False, True):
                consolidated(dense, vac)
        commits()
        fragment_meta()
        deletes()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
