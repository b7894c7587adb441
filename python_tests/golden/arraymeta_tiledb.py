"""Write arrays with metadata using TileDB and record what TileDB reports.

Usage: arraymeta_tiledb.py OUTDIR

For each array, OUTDIR/<array>/__meta/ receives TileDB's metadata files
(only those: the rest of the array is not needed by the Go tests), and
OUTDIR/expected.json what tiledb's Array.meta shows when the array is
opened at several timestamp ranges: key -> [TileDB type name, value],
with bytes as {"hex": ...} and numpy arrays as (nested) lists.
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import tiledb


def create(uri):
    dom = tiledb.Domain(tiledb.Dim(name="d", domain=(1, 4), tile=2, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr(name="a", dtype=np.int32)]))


def jsonable(v):
    if isinstance(v, bytes):
        return {"hex": v.hex()}
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, tuple):
        return [jsonable(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v != v:
        return "NaN"  # JSON has no NaN; this is also tileflight's JSON form
    return v


def snapshot(uri, ts):
    out = {}
    with tiledb.open(uri, timestamp=ts) as A:
        for k in A.meta.keys():
            v, t = A.meta.__getitem__(k, include_type=True)
            out[k] = [str(t).split(".")[-1], jsonable(v)]
    return out


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    tmp = tempfile.mkdtemp()
    expected = {}

    # Every value type tiledb-py can write, in one file.
    types = os.path.join(tmp, "types")
    create(types)
    with tiledb.open(types, "w", timestamp=1) as A:
        A.meta["int"] = -7
        A.meta["big"] = 2**62
        A.meta["float"] = 1.5
        A.meta["str"] = "héllo"
        A.meta["empty_str"] = ""
        A.meta["bytes"] = b"\x00\x01\xff"
        A.meta["ints"] = (1, -2, 3)
        A.meta["floats"] = (0.5, -2.25)
        A.meta["empty"] = ()
        A.meta["one"] = (42,)
        for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"):
            A.meta["np_" + name] = np.dtype(name).type(3)
        A.meta["np_uint64_max"] = np.uint64(2**64 - 1)
        A.meta["np_nan"] = np.float64("nan")
        A.meta["arr_int8"] = np.array([1, -2, 3], dtype=np.int8)
        A.meta["arr_f32"] = np.array([1.5, 2.5], dtype=np.float32)
        A.meta["arr_2d"] = np.arange(6, dtype=np.int32).reshape(2, 3)
        A.meta["arr_empty"] = np.array([], dtype=np.uint16)
    expected["types"] = {"latest": snapshot(types, None)}

    # A history: puts, a replacement and a deletion at three timestamps.
    hist = os.path.join(tmp, "history")
    create(hist)
    with tiledb.open(hist, "w", timestamp=10) as A:
        A.meta["a"] = 1
        A.meta["b"] = 2
    with tiledb.open(hist, "w", timestamp=20) as A:
        A.meta["a"] = 3
        del A.meta["b"]
    with tiledb.open(hist, "w", timestamp=30) as A:
        A.meta["c"] = "x"

    def history_snaps(uri):
        return {
            "latest": snapshot(uri, None),
            "0-10": snapshot(uri, (0, 10)),
            "0-15": snapshot(uri, (0, 15)),
            "0-20": snapshot(uri, (0, 20)),
            "15-30": snapshot(uri, (15, 30)),
            "20-30": snapshot(uri, (20, 30)),
        }

    expected["history"] = history_snaps(hist)

    # The same history consolidated (a consolidated file plus a .vac file
    # hiding the originals), then vacuumed.
    cons = os.path.join(tmp, "consolidated")
    shutil.copytree(hist, cons)
    tiledb.consolidate(cons, config=tiledb.Config({"sm.consolidation.mode": "array_meta"}))
    expected["consolidated"] = history_snaps(cons)
    vac = os.path.join(tmp, "vacuumed")
    shutil.copytree(cons, vac)
    tiledb.vacuum(vac, config=tiledb.Config({"sm.vacuum.mode": "array_meta"}))
    expected["vacuumed"] = history_snaps(vac)

    for name in ("types", "history", "consolidated", "vacuumed"):
        dst = os.path.join(outdir, name, "__meta")
        shutil.rmtree(os.path.join(outdir, name), ignore_errors=True)
        shutil.copytree(os.path.join(tmp, name, "__meta"), dst)
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True, allow_nan=False)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main(sys.argv[1])
