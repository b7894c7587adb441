#!/usr/bin/env python3
"""Decode tileflight's compressed parts with the C libraries TileDB links.

Usage: filters_c_decode.py DIR

DIR is filled by `go test ./filters -run TestCompressorParts
-filters.parts=DIR`: for every codec and level, NAME.comp (our compressor's
output for one part), NAME.orig (the part's bytes) and manifest.json. Each
part is decoded exactly as TileDB does: zlib streams with zlib (inflate),
zstd frames with libzstd, raw LZ4 blocks with liblz4 (pyarrow's lz4_raw),
bzip2 streams with libbzip2. Exits non-zero on any mismatch.
"""

import bz2
import json
import os
import sys
import zlib

import pyarrow as pa


def decode(codec, comp, n):
    if codec == "gzip":
        return zlib.decompress(comp)
    if codec == "bzip2":
        return bz2.decompress(comp)
    if codec == "zstd":
        return pa.Codec("zstd").decompress(comp, decompressed_size=n).to_pybytes()
    if codec == "lz4":
        if n == 0:  # liblz4 writes one zero token for an empty input
            return b"" if comp == b"\x00" else None
        return pa.Codec("lz4_raw").decompress(comp, decompressed_size=n).to_pybytes()
    raise ValueError(codec)


def main(d):
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    bad = 0
    for e in manifest:
        orig = open(os.path.join(d, e["orig"]), "rb").read()
        comp = open(os.path.join(d, e["comp"]), "rb").read()
        try:
            got = decode(e["codec"], comp, len(orig))
        except Exception as ex:  # noqa: BLE001 - report every failure
            got = ex
        if got != orig:
            bad += 1
            print("MISMATCH", e["comp"], repr(got)[:80])
    print(f"{len(manifest) - bad}/{len(manifest)} parts decoded by the C "
          "libraries")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
