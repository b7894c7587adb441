#!/usr/bin/env python3
"""Writes docs/conformance.md: what the tests prove against TileDB 2.30.

Usage: conformance_doc.py FIXTURES_DIR OUT.md

FIXTURES_DIR is the output of gen_fixtures.py (it holds index.json). The
feature table is generated from the matrix itself, so it cannot claim a
feature that no fixture has; the structure table names the Go tests that
check each structure against what TileDB wrote and reported.
"""
import json
import sys

STRUCTURES = [
    ("datatypes (all 44, sizes, names)", "format/datatype", "TestNamesRoundTrip, TestSizes"),
    ("timestamped names (3 historical forms), data file names (v<5, v8 percent-encoding, v9+)", "format/names",
     "every name TileDB 2.30 wrote + legacy names; FuzzParse, FuzzDecodeV8"),
    ("array schema v1..v23 (orders, capacity, dups, 3 default pipelines, domain, fixed/var dims, null extents, "
     "attributes with fill, nullability, order, enumerations, labels, current domain, evolution)", "format/schema",
     "30 TileDB-written schemas decode to TileDB's report and re-encode byte-identically; FuzzDecode, FuzzDecodeEnumeration, FuzzFromJSON"),
    ("filter pipeline serialization with every filter's options", "format/pipeline", "TestRoundTrip, FuzzDecode"),
    ("generic tiles (chunked, gzip, encrypted)", "format/gentile", "TileDB files decode; FuzzDecode"),
    ("fragment metadata: footer (v3..v23), R-tree, tile offsets/var offsets/var sizes/validity offsets, "
     "tile and fragment mins/maxes/sums/null counts, processed conditions, v23 optional sections, legacy v1-v4, "
     "consolidated .meta", "format/fragmeta",
     "TileDB fixtures: every section payload and footer re-encode byte-identically, per-tile stats equal to numpy's; "
     "FuzzFooter, FuzzRTree, FuzzSections, FuzzFragment, FuzzConsolidated, FuzzLegacy"),
    ("commits: .wrt/.ok, .con, .ign, .vac, .del (condition tree), .upd; visibility at a timestamp range",
     "format/commits", "17 TileDB histories: Resolve equals TileDB's fragment list; files re-encode byte-identically; "
     "FuzzCon, FuzzIgn, FuzzVac, FuzzDel, FuzzUpd, FuzzResolve"),
    ("array metadata (__meta), merge, vacuum", "format/arraymeta` (bytes, merge), `tdbarray.LoadMetadata` (reading)",
     "TileDB histories incl. consolidation and vacuum; payloads byte-identical; FuzzDecodePayload, FuzzDecodeFile"),
    ("every filter, both directions, pipelines, chunking, var-size rules", "filters, filters/codecs",
     "268 TileDB-written single-tile arrays: unfilter = TileDB's cells; filter = TileDB's bytes where deterministic; "
     "one fuzz target per unfilter"),
    ("fragments of format v1-4 (TileDB 1.x): coordinates zipped in __coords.tdb (v1 cell by cell, v2-4 and "
     "compressed v1 dimension by dimension), legacy fragment metadata, in every query path",
     "reader/tileio, python_tests/test_legacy_*.py",
     "TestZippedCoordsColumn, FuzzZippedCoords, TestLoadSyntheticLegacy, TestEncodeZippedVersions; synthetic v1, v2, v3 "
     "and v4 arrays built from the spec (internal/legacygen: sparse with plain v1, zstd v2 and v4, gzip v3 coordinates; "
     "v1-2 one-tile metadata, v3-4 footer and sections with the pre-v5 R-tree in __t1_t2_uuid fragments; dense v2 and v4; "
     "zstd int32 and gzip var-size string attributes) and TileDB's sparse v1 input array (local only, see below): "
     "reads in every layout, subarrays, conditions, aggregates, a merge with a v22 fragment TileDB wrote, our "
     "consolidation of both (TileDB reads it) and a DoPut into them (TileDB reads the merge) equal TileDB's; a file cut "
     "short in any of them is DataLoss naming the fragment and the file"),
    ("WebP encoding (uint8 RGB/BGR/RGBA/BGRA tiles; lossless, and lossy VP8 at the filter's quality) through DoPut",
     "filters/codecs, python_tests/test_writer_webp.py",
     "TestGolden: our encoding of TileDB's 8 WebP tiles decodes to the input (lossless) or with a PSNR within 0.5 dB "
     "of TileDB's encoding; FuzzForwardWebP; DoPut of each format, lossless, quality 80 and 30: TileDB reads exactly "
     "our pixels (lossless) or with a PSNR within 0.5 dB of its own write of the same image (lossy)"),
    ("an array as TileDB opens it: schema, visible fragments, metadata", "tdbarray",
     "TestConformance over the matrix below (schema, fragments with timestamps/version/cells/non-empty domain, metadata)"),
    ("every tile of every fragment loads", "reader/tileio", "TestLoadEveryTile over the matrix below"),
    ("flightd inspect", "cmd/flightd", "TestInspectShowsWhatTileDBReports over the matrix below"),
    ("fragments we write are read by TileDB", "writer, python_tests/test_writer*.py",
     "pipelines x dense/sparse x nullable/var: TileDB reads identical cells, non-empty domain and aggregates; crash tests"),
]


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    with open(f"{fixtures}/index.json") as f:
        index = json.load(f)
    features = index["features"]
    cases = index["cases"]
    by_feature = {k: [] for k in features}
    for c in sorted(cases, key=lambda c: c["name"]):
        for feat in c.get("features", []):
            by_feature.setdefault(feat, []).append(c["name"])
    lines = [
        "# Conformance with TileDB",
        "",
        "Generated by `python_tests/conformance_doc.py` from the fixture matrix "
        f"(`python_tests/gen_fixtures.py`, TileDB {index.get('tiledb_version', '?')}); regenerate with `make docs`.",
        "",
        "Every array below is written by TileDB itself (the `tiledb` Python package) during `make test`; next to it,",
        "the generator records what TileDB reports (schema, fragments, metadata) and what it reads back. The Go tests",
        "named here decode the same files and must agree exactly. A small subset is committed under `testdata/tiledb`",
        "so that `go test` runs without Python.",
        "",
        "## Structures",
        "",
        "| structure | package | proven by |",
        "| --- | --- | --- |",
    ]
    for what, pkg, how in STRUCTURES:
        lines.append(f"| {what} | `{pkg}` | {how} |")
    lines += [
        "",
        "Format versions 1-23 are decoded; TileDB 2.30 writes version 22, and so does tileflight. Versions that",
        "TileDB 2.30 can no longer write (1-21) are covered by synthetic encodings and, locally, by the few legacy",
        "arrays in TileDB's own test inputs (v1, v10), which are not redistributed here: set",
        "`TILEFLIGHT_LEGACY_ARRAYS` to a TileDB checkout's `test/inputs/arrays` to run the tests that read them.",
        "Of TileDB's two format v1-4 inputs, `non_split_coords_v1_4_0` (sparse) is read as TileDB reads it;",
        "`dense_array_v1_3_0` is refused by TileDB 2.30 (\"Reading data past end of serialized data size\": its",
        "schema's generic tile is cut short) and by tileflight (DataLoss naming `__array_schema.tdb`); dense v1-4",
        "fragments are proven on the synthetic v2 and v4 arrays instead. No TileDB input is in format v3 or v4:",
        "those are proven on synthetic arrays only (the footer layout, the R-tree with its dimension count and",
        "datatype, and fragment names `__t1_t2_uuid`, which say 4 for both). TileDB's inputs are MIT-licensed, but",
        "this repository carries none of their files, and CI cannot fetch them. TileDB 2.30 answers no cell of a v1-4 fragment to a query",
        "condition on a dimension (it evaluates it on per-dimension tiles such a fragment lacks); tileflight",
        "answers the cells whose coordinates satisfy it.",
        "",
        f"## Feature matrix ({len(cases)} arrays)",
        "",
        "| feature | arrays that have it |",
        "| --- | --- |",
    ]
    for feat, desc in features.items():
        names = by_feature.get(feat, [])
        lines.append(f"| {desc} (`{feat}`) | {', '.join('`' + n + '`' for n in names) or '**none**'} |")
    lines.append("")
    with open(out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
