#!/usr/bin/env python3
"""Generic tiles written by TileDB for package format/gentile: the schema
file of an AES-256-GCM encrypted array (its generic tile pipeline holds
gzip and the encryption filter).

Usage: filters_gentile_cases.py OUTDIR
(writes schema_aes.bin, key.txt, and schema_plain.bin: the same schema
unencrypted, whose payload must be the same)
"""

import os
import shutil
import sys
import tempfile

import numpy as np
import tiledb

KEY = "0123456789abcdeF0123456789abcdeF"


def schema_file(tmp, outdir, name, ctx):
    uri = os.path.join(tmp, name)
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 9), tile=10,
                                   dtype=np.int32, ctx=ctx), ctx=ctx)
    att = tiledb.Attr("a", dtype=np.float64, ctx=ctx)
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, attrs=[att],
                                                ctx=ctx), ctx=ctx)
    sdir = os.path.join(uri, "__schema")
    (fname,) = [n for n in os.listdir(sdir)
                if os.path.isfile(os.path.join(sdir, n))]
    shutil.copy(os.path.join(sdir, fname), os.path.join(outdir,
                                                       name + ".bin"))


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    tmp = tempfile.mkdtemp()
    ctx = tiledb.Ctx(tiledb.Config({"sm.encryption_type": "AES_256_GCM",
                                    "sm.encryption_key": KEY}))
    schema_file(tmp, outdir, "schema_aes", ctx)
    schema_file(tmp, outdir, "schema_plain", tiledb.Ctx())
    with open(os.path.join(outdir, "key.txt"), "w") as f:
        f.write(KEY)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
