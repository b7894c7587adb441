"""Benchmark data and TileDB reference timings for reader/sparse.

  sparse_tiledb.py gen DIR          write the 10 M-cell sparse array into DIR/sparse10m (if missing)
  sparse_tiledb.py time DIR LAYOUT  time TileDB reading it whole and through the 1 % subarray;
                                    prints JSON {"whole_s": .., "sub_s": .., "whole_cells": .., "sub_cells": ..}

The array: int64 dimensions x in [0, 9999] (tile 1000) and y in [0, 999] (tile 100), every
cell written once (10 M cells), float64 attribute v, zstd on everything, capacity 100 000,
one fragment. The 1 % subarray is x in [2000, 2999], y in [100, 199].
"""
import json
import os
import sys
import time

import numpy as np
import tiledb

SUB = ((2000, 2999), (100, 199))


def gen(root):
    uri = os.path.join(root, "sparse10m")
    if os.path.exists(os.path.join(uri, "__schema")):
        return
    zstd = tiledb.FilterList([tiledb.ZstdFilter(level=3)])
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 9999), tile=1000, dtype=np.int64, filters=zstd),
                        tiledb.Dim("y", domain=(0, 999), tile=100, dtype=np.int64, filters=zstd))
    s = tiledb.ArraySchema(domain=dom, sparse=True, capacity=100_000,
                           attrs=[tiledb.Attr("v", dtype=np.float64, filters=zstd)])
    tiledb.Array.create(uri, s)
    xs, ys = np.meshgrid(np.arange(10000, dtype=np.int64), np.arange(1000, dtype=np.int64), indexing="ij")
    xs, ys = xs.ravel(), ys.ravel()
    rng = np.random.default_rng(1)
    with tiledb.open(uri, "w", timestamp=1000) as A:
        A[xs, ys] = {"v": rng.standard_normal(len(xs))}


def best(f, n=3):
    out = None
    for _ in range(n):
        t = time.perf_counter()
        cells = f()
        d = time.perf_counter() - t
        if out is None or d < out[0]:
            out = (d, cells)
    return out


def timing(root, layout):
    uri = os.path.join(root, "sparse10m")
    order = {"unordered": "U", "row-major": "C", "global": "G"}[layout]
    with tiledb.open(uri) as A:
        whole = best(lambda: len(A.query(order=order, return_incomplete=False).multi_index[:, :]["v"]))
        sub = best(lambda: len(A.query(order=order).multi_index[slice(*SUB[0]), slice(*SUB[1])]["v"]))
    print(json.dumps({"whole_s": whole[0], "whole_cells": whole[1], "sub_s": sub[0], "sub_cells": sub[1]}))


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        timing(sys.argv[2], sys.argv[3])
