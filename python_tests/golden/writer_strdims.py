"""Writes the writer package's string-dimension goldens: small sparse
arrays with string dimensions (mixed with an int64 one, row-major and
Hilbert) written by TileDB in one fragment, so the Go tests can write the
same cells and compare the global order and fragment metadata.

usage: writer_strdims.py OUTDIR   (e.g. writer/testdata)
"""

import os
import shutil
import sys

import numpy as np
import tiledb

WORDS = ["", "a", "aa", "ab", "b", "prefix_long_abcdefgh", "prefix_long_abcdefgz", "prefix_long_abcdefg",
         "prefix_long_", "zz", "zz\x7f", "mid", "Q", "09"]


def main(out):
    rng = np.random.default_rng(11)
    for name, order in (("strdims_row", "row-major"), ("strdims_hilbert", "hilbert")):
        uri = os.path.join(out, name)
        shutil.rmtree(uri, ignore_errors=True)
        dom = tiledb.Domain(tiledb.Dim("s", domain=(None, None), tile=None, dtype="ascii"),
                            tiledb.Dim("i", domain=(-50, 50), tile=8, dtype=np.int64))
        sch = tiledb.ArraySchema(domain=dom, sparse=True, capacity=5, cell_order=order, tile_order="row-major",
                                 attrs=[tiledb.Attr("v", dtype=np.int32)])
        tiledb.Array.create(uri, sch)
        n = 60
        ss = np.array([WORDS[k] if rng.random() < 0.7 else
                       "".join(chr(c) for c in rng.integers(48, 123, rng.integers(0, 12)))
                       for k in rng.integers(0, len(WORDS), n)], dtype=object)
        ii = rng.integers(-50, 51, n).astype(np.int64)
        seen, keep = set(), []
        for k, c in enumerate(zip(ss, ii)):
            if c not in seen:
                seen.add(c)
                keep.append(k)
        ss, ii = ss[keep], ii[keep]
        with tiledb.open(uri, "w", timestamp=1) as A:
            A[ss, ii] = {"v": np.arange(len(ss), dtype=np.int32)}


if __name__ == "__main__":
    main(sys.argv[1])
