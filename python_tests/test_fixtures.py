"""Sanity checks on the generated fixture matrix: every case opens in TileDB,
its expect JSON parses and agrees with what TileDB reports now, and every
feature of the matrix is covered by a case that visibly has it."""

import json
import math
import os
import sys

import numpy as np
import pytest
import tiledb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gen_fixtures  # noqa: E402
from fixturelib import describe_fragments, describe_schema  # noqa: E402


def load_index(fixtures_dir):
    with open(os.path.join(fixtures_dir, "index.json")) as f:
        return json.load(f)


def load_expect(fixtures_dir, name):
    with open(os.path.join(fixtures_dir, "arrays", name + ".expect.json")) as f:
        return json.load(f)


def ctx_for(expect):
    if expect["encryption"]:
        return tiledb.Ctx({"sm.encryption_type": "AES_256_GCM",
                           "sm.encryption_key": expect["encryption"]["key"]})
    return tiledb.Ctx()


CASE_NAMES = [c.name for c in gen_fixtures.CASES]


def test_index_lists_every_case(fixtures_dir):
    index = load_index(fixtures_dir)
    assert [c["name"] for c in index["cases"]] == CASE_NAMES
    assert index["features"] == gen_fixtures.FEATURES
    assert index["tiledb_version"] == "2.30.0"


def test_every_feature_is_covered(fixtures_dir):
    index = load_index(fixtures_dir)
    covered = {f for c in index["cases"] for f in c["features"]}
    assert covered == set(index["features"]), sorted(set(index["features"]) - covered)


def _all_attrs(e):
    return e["schema"]["attributes"]


def _types(e):
    return {a["type"] for a in _all_attrs(e)}


def _dim_types(e):
    return [d["type"] for d in e["schema"]["dimensions"]]


def _filtered(filters):
    # TileDB's defaults: zstd(-1) on coords/offsets/dims, rle(-1) on validity.
    return filters not in ([], [{"name": "zstd", "level": -1}], [{"name": "rle", "level": -1}])


def _default(e):
    return e["reads"][0]


def _multi_tile(e):
    n = _default(e)["num_cells"]
    sch = e["schema"]
    if sch["type"] == "sparse":
        return n > sch["capacity"]
    return any(isinstance(d["tile"], int) and d["domain"][1] - d["domain"][0] + 1 > d["tile"]
               for d in sch["dimensions"])


def _has_fill_cells(e):
    """Some read holds an attribute's fill value (or null for nullable)."""
    for r in e["reads"]:
        for a in r.get("schema", e["schema"])["attributes"]:
            fill = None if a["nullable"] else a["fill"]
            if fill in r["data"][a["name"]]:
                return True
    return False


def _reads_differ(e):
    data = [json.dumps(r["data"], sort_keys=True) for r in e["reads"] if r["subarray"] is None]
    return len(set(data)) > 1


# A check per feature: the expect JSON of a case claiming it must show it.
FEATURE_CHECKS = {
    "dense": lambda e: e["schema"]["type"] == "dense",
    "sparse": lambda e: e["schema"]["type"] == "sparse",
    "dim_1d": lambda e: len(e["schema"]["dimensions"]) == 1,
    "dim_2d": lambda e: len(e["schema"]["dimensions"]) == 2,
    "dim_3d": lambda e: len(e["schema"]["dimensions"]) == 3,
    "dim_int": lambda e: any(t.startswith(("int", "uint")) for t in _dim_types(e)),
    "dim_float": lambda e: any(t.startswith("float") for t in _dim_types(e)),
    "dim_string": lambda e: "string_ascii" in _dim_types(e),
    "dim_datetime": lambda e: any(t.startswith("datetime_") for t in _dim_types(e)),
    "dim_mixed": lambda e: len(set(_dim_types(e))) > 1,
    "order_row": lambda e: "row-major" in (e["schema"]["cell_order"], e["schema"]["tile_order"]),
    "order_col": lambda e: "col-major" in (e["schema"]["cell_order"], e["schema"]["tile_order"]),
    "order_hilbert": lambda e: e["schema"]["cell_order"] == "hilbert",
    "multi_tile": lambda e: _multi_tile(e),
    "partial_tile": lambda e: any(
        d["tile"] and (d["domain"][1] - d["domain"][0] + 1) % d["tile"]
        for d in e["schema"]["dimensions"] if isinstance(d["tile"], int)),
    "allows_duplicates": lambda e: e["schema"]["allows_duplicates"],
    "all_int_types": lambda e: set(gen_fixtures.ALL_INT) <= _types(e),
    "float_types": lambda e: {"float32", "float64"} <= _types(e),
    "string_types": lambda e: {"char", "string_ascii", "string_utf8"} <= _types(e),
    "binary_types": lambda e: "blob" in _types(e),
    "bool": lambda e: "bool" in _types(e),
    "geometry": lambda e: {"geom_wkb", "geom_wkt"} <= _types(e),
    "datetime_attrs": lambda e: {f"datetime_{u}" for u in gen_fixtures._UNIT_NAME.values()}
    | {f"time_{gen_fixtures._UNIT_NAME[u]}" for u in gen_fixtures.TIME_UNITS} <= _types(e),
    "multi_value": lambda e: {2, 3} <= {a["cell_val_num"] for a in _all_attrs(e)},
    "var_string": lambda e: any(a["cell_val_num"] == "var" and a["type"].startswith("string")
                                for a in _all_attrs(e)),
    "var_numeric": lambda e: any(a["cell_val_num"] == "var" and a["type"][0] in "iuf"
                                 for a in _all_attrs(e)),
    "nullable": lambda e: any(a["nullable"] for a in _all_attrs(e))
    and any(None in col for col in _default(e)["data"].values()),
    "nullable_fill": lambda e: any(a["nullable"] and a["fill"] not in (None, "NaN")
                                   and a["fill"] != 0 and abs(a["fill"]) < 1e6
                                   for a in _all_attrs(e) if not isinstance(a["fill"], (list, str))),
    "fill_values": lambda e: e["schema"]["type"] == "dense" and _has_fill_cells(e),
    "custom_fill": lambda e: any(a["fill"] in (-7, 42, 1.25, 0.5, "none", -1) for a in _all_attrs(e)),
    "filters": lambda e: any(_filtered(a["filters"]) for a in _all_attrs(e)),
    "filters_coords": lambda e: _filtered(e["schema"]["coords_filters"])
    or any(_filtered(d["filters"]) for d in e["schema"]["dimensions"]),
    "filters_offsets": lambda e: _filtered(e["schema"]["offsets_filters"]),
    "filters_validity": lambda e: _filtered(e["schema"]["validity_filters"]),
    "multi_fragment": lambda e: max(len(s["fragments"]) for s in e["fragment_snapshots"]) > 1,
    "dense_overwrite": lambda e: e["schema"]["type"] == "dense" and len(e["fragment_snapshots"]) > 1,
    "sparse_overwrite": lambda e: e["schema"]["type"] == "sparse" and len(e["fragment_snapshots"]) > 1,
    "consolidated": lambda e: any(f["timestamp_range"][0] < f["timestamp_range"][1]
                                  for f in e["fragments"]),
    "vacuumed": lambda e: any(s["label"].startswith("after vacuum") for s in e["fragment_snapshots"])
    and not e["to_vacuum"],
    "consolidated_fragment_meta": lambda e: any(f["has_consolidated_metadata"] for f in e["fragments"]),
    "consolidated_commits": lambda e: any(f["path"].endswith(".con") for f in e["files"]),
    "delete": lambda e: any(f["path"].endswith(".del") for f in e["files"]),
    "delete_consolidated": lambda e: len(e["fragments"]) == 1
    and e["fragments"][0]["timestamp_range"][0] < e["fragments"][0]["timestamp_range"][1],
    "metadata": lambda e: len(e["metadata"]["typed"]) > 0,
    "metadata_deleted_key": lambda e: any(
        set(r.get("metadata", e["metadata"])["values"]) - set(e["metadata"]["values"])
        for r in e["reads"]),
    "metadata_consolidated": lambda e: any(f["path"].startswith("__meta/") and f["path"].endswith(".vac")
                                           for f in e["files"]),
    "enumeration": lambda e: {"string_utf8", "int32"} <= {x["type"] for x in e["schema"]["enumerations"]}
    or (e["schema"]["enumerations"] and any("schema" in r for r in e["reads"])),
    "schema_evolution": lambda e: len({f["schema_name"] for f in e["fragments"]}) > 1,
    "encryption": lambda e: e["encryption"] is not None and len(e["encryption"]["key"]) == 32,
    "dimension_label": lambda e: len(e["schema"]["dimension_labels"]) > 0
    and len(e["dimension_label_arrays"]) > 0,
    "time_travel": _reads_differ,
}


def test_feature_checks_cover_all_features():
    assert set(FEATURE_CHECKS) == set(gen_fixtures.FEATURES)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_case_features_visible(fixtures_dir, name):
    e = load_expect(fixtures_dir, name)
    for f in e["features"]:
        assert FEATURE_CHECKS[f](e), f"{name}: claims {f} but the expect JSON does not show it"


@pytest.mark.parametrize("name", CASE_NAMES)
def test_case_opens_and_matches(fixtures_dir, name):
    e = load_expect(fixtures_dir, name)
    assert e["format"] == gen_fixtures.EXPECT_FORMAT and e["case"] == name
    uri = os.path.join(fixtures_dir, "arrays", name)
    ctx = ctx_for(e)
    label_names = [lab["name"] for lab in e["schema"]["dimension_labels"]]
    with tiledb.open(uri, ctx=ctx) as A:
        s = describe_schema(A, label_names)
        for lab in s["dimension_labels"]:
            lab["uri"] = os.path.relpath(lab["uri"][len("file://"):], os.path.abspath(uri))
        assert s == e["schema"]
    assert describe_fragments(uri, ctx=ctx) == e["fragments"]
    # Each read's columns line up and hold num_cells values.
    for r in e["reads"]:
        for col in r["columns"]:
            assert len(r["data"][col]) == r["num_cells"], (name, r["name"], col)
    # Every recorded file is still there with its size.
    for f in e["files"]:
        assert os.path.getsize(os.path.join(uri, f["path"])) == f["size"]


def test_encrypted_needs_key(fixtures_dir):
    uri = os.path.join(fixtures_dir, "arrays", "encrypted")
    with pytest.raises(tiledb.TileDBError):
        with tiledb.open(uri, ctx=tiledb.Ctx()) as A:
            A[:]


def test_dense_reads_hold_every_cell(fixtures_dir):
    for name in CASE_NAMES:
        e = load_expect(fixtures_dir, name)
        if e["schema"]["type"] != "dense":
            continue
        for r in e["reads"]:
            if r["subarray"] is not None:
                continue
            cells = math.prod(d["domain"][1] - d["domain"][0] + 1 for d in e["schema"]["dimensions"])
            assert r["num_cells"] == cells, (name, r["name"])


def test_read_matches_tiledb_now(fixtures_dir):
    """Re-read one case of each kind and compare with the recorded data."""
    for name in ("dense_1d", "sparse_string_dim", "var_nullable"):
        e = load_expect(fixtures_dir, name)
        uri = os.path.join(fixtures_dir, "arrays", name)
        with tiledb.open(uri) as A:
            r = e["reads"][0]
            got = gen_fixtures.do_read(gen_fixtures.Builder(
                gen_fixtures.CASES[CASE_NAMES.index(name)], uri, None), A, r["layout"], None)
        assert json.loads(json.dumps(got)) == {k: r[k] for k in ("columns", "num_cells", "data")}


def test_conformance_md(fixtures_dir):
    md = gen_fixtures.conformance_md(load_index(fixtures_dir))
    lines = md.strip().splitlines()
    assert len(lines) == 2 + len(gen_fixtures.FEATURES)
    assert all(line.count("|") == len(CASE_NAMES) + 2 for line in lines)


def test_values_are_plain_json(fixtures_dir):
    # NaN must be spelled "NaN": bare NaN tokens are not JSON.
    for name in CASE_NAMES:
        with open(os.path.join(fixtures_dir, "arrays", name + ".expect.json")) as f:
            json.load(f, parse_constant=lambda c: pytest.fail(f"{name}: bare {c} in JSON"))
    assert np is not None
