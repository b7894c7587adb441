"""Golden buffers for arrowconv: what TileDB's query returns for a few
attribute types (raw data, start offsets, validity bytes) together with the
Arrow table TileDB's own Arrow adapter builds from the same buffers.

Usage: arrowconv_buffers.py OUTDIR   (writes OUTDIR/*.bin, manifest.json, tiledb.arrow)
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import pyarrow as pa
import tiledb
from tiledb.main import PyQuery


def main(out):
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp()
    uri = os.path.join(tmp, "arr")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99), tile=100, dtype=np.int64))
    attrs = [
        tiledb.Attr("i32", dtype=np.int32, nullable=True),
        tiledb.Attr("s", dtype=str, var=True, nullable=True),
        tiledb.Attr("d", dtype="datetime64[D]"),
        tiledb.Attr("ms", dtype="datetime64[ms]"),
        tiledb.Attr("b", dtype=np.bool_),
        tiledb.Attr("f", dtype=np.float64),
        tiledb.Attr("u8", dtype=np.uint8),
    ]
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, attrs=attrs, sparse=True))
    with tiledb.open(uri, "w") as A:
        A[np.array([1, 5, 7, 9, 11])] = {
            "i32": pa.array([1, None, 3, 4, -7], pa.int32()),
            "s": pa.array(["a", "", None, "héllo", "zz"], pa.large_string()),
            # TileDB's adapter cannot export negative days, so none here.
            "d": np.array(["2020-01-01", "1970-01-02", "1970-01-01", "2100-06-30", "2000-02-29"], dtype="datetime64[D]"),
            "ms": np.array([0, 1500, -1, 10**12, 7], dtype="datetime64[ms]"),
            "b": np.array([True, False, True, True, False]),
            "f": np.array([0.5, -1.25, 1e300, 0.0, -0.0]),
            "u8": np.array([0, 255, 7, 8, 9], np.uint8),
        }
    manifest = []
    with tiledb.open(uri) as A:
        q = PyQuery(A.ctx, A, tuple(a.name for a in attrs), ("x",), 3, True)
        q.submit()
        res = q.results()
        schema = A.schema
        for name, (data, offsets, validity) in res.items():
            if name == "x":
                dtype_name = "int64"
                var, nullable = False, False
            else:
                a = schema.attr(name)
                var, nullable = a.isvar, a.isnullable
                dtype_name = {"i32": "int32", "s": "string_utf8", "d": "datetime_day", "ms": "datetime_ms",
                              "b": "bool", "f": "float64", "u8": "uint8"}[name]
            n = 5
            data.tofile(os.path.join(out, name + ".data.bin"))
            if var:
                # tiledb-py appends the end offset; TileDB's own buffer is the n starts.
                np.asarray(offsets[:n], dtype="<u8").tofile(os.path.join(out, name + ".offsets.bin"))
            if nullable:
                np.asarray(validity[:n], dtype=np.uint8).tofile(os.path.join(out, name + ".validity.bin"))
            manifest.append({"name": name, "type": dtype_name, "var": bool(var), "nullable": bool(nullable), "n": n})
        table = q._buffers_to_pa_table()
    with pa.OSFile(os.path.join(out, "tiledb.arrow"), "wb") as f:
        with pa.ipc.new_file(f, table.schema) as w:
            w.write_table(table)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main(sys.argv[1])
