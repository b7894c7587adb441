"""Encrypted arrays (AES-256-GCM) both ways with TileDB 2.30: arrays that
tileflight's writer creates and writes with a key (schema, fragments,
array metadata) are opened by TileDB with that key and read exactly as
TileDB's own encrypted write of the same cells, fragment metadata
included; arrays TileDB creates encrypted take fragments and metadata from
our writer, which TileDB reads together with its own. Without the key, or
with a wrong one, our writer stores nothing."""

import json
import os
import subprocess

import numpy as np
import pyarrow as pa
import pytest
import tiledb

from test_writer import arrow_of, run, tfwrite, write_ipc  # noqa: F401 (fixture)

KEY = "0123456789abcdeF0123456789abcdeF"
WRONG = "FEDCBA9876543210FEDCBA9876543210"


def enc_ctx(key=KEY):
    return tiledb.Ctx(tiledb.Config({"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": key}))


ATTRS = [
    {"name": "a", "type": "int32", "filters": [{"name": "bitshuffle"}, {"name": "zstd", "level": 3}]},
    {"name": "f", "type": "float64", "nullable": True, "filters": [{"name": "gzip", "level": 6}]},
    {"name": "s", "type": "string_utf8", "cell_val_num": "var", "nullable": True,
     "filters": [{"name": "zstd", "level": 1}]},
]

SCHEMAS = {
    "dense": {"type": "dense", "cell_order": "col-major", "tile_order": "row-major",
              "dimensions": [{"name": "x", "type": "int32", "domain": [1, 30], "tile": 7},
                             {"name": "y", "type": "int32", "domain": [1, 26], "tile": 4}],
              "attributes": ATTRS},
    "sparse": {"type": "sparse", "capacity": 13, "cell_order": "row-major", "tile_order": "col-major",
               "dimensions": [{"name": "x", "type": "int32", "domain": [-100, 100], "tile": 16},
                              {"name": "y", "type": "float64", "domain": [0, 50], "tile": 8}],
               "attributes": ATTRS},
    "sparse_hilbert": {"type": "sparse", "capacity": 11, "cell_order": "hilbert",
                       "dimensions": [{"name": "x", "type": "int32", "domain": [-100, 100], "tile": 16},
                                      {"name": "y", "type": "float64", "domain": [0, 50], "tile": 8}],
                       "attributes": ATTRS},
}

WORDS = ["", "a", "bb", "secret", "tile", "flight", "zz\u00e9"]


def cells(rng, kind, n, sub=None):
    """Coordinates (sparse) and attribute values with validity."""
    out = {}
    if kind.startswith("sparse"):
        xs = rng.integers(-100, 101, n * 2).astype(np.int32)
        ys = rng.integers(0, 50, n * 2).astype(np.float64) + rng.choice([0.0, 0.25, 0.5], n * 2)
        _, idx = np.unique(np.stack([xs, ys.view(np.int64)]), axis=1, return_index=True)
        idx = np.sort(idx)[:n]
        out["x"], out["y"] = xs[idx], ys[idx]
        n = len(idx)
    out["a"] = rng.integers(-10**6, 10**6, n).astype(np.int32)
    out["f"] = rng.random(n) * 100
    out["s"] = np.array([WORDS[i] for i in rng.integers(0, len(WORDS), n)], dtype=object)
    valid = {"f": rng.random(n) > 0.3, "s": rng.random(n) > 0.3}
    return out, valid, n


def tiledb_write(uri, kind, vals, valid, ts, sub=None, ctx=None):
    """TileDB's own write of the same cells (nulls as explicit maps)."""
    with tiledb.open(uri, "w", timestamp=ts, ctx=ctx) as A:
        if kind == "dense":
            # Flat row-major buffers: tiledb-py cannot take 2-D nullable
            # strings.
            data = {"a": vals["a"],
                    "f": np.ma.masked_array(vals["f"], mask=~valid["f"]),
                    "s": np.array([None if not ok else v for v, ok in zip(vals["s"], valid["s"])],
                                  dtype=object)}
            A[sub[0][0]:sub[0][1] + 1, sub[1][0]:sub[1][1] + 1] = data
        else:
            raw = {"a": vals["a"], "f": np.where(valid["f"], vals["f"], 0.0),
                   "s": np.array([v if ok else "" for v, ok in zip(vals["s"], valid["s"])], dtype=object)}
            nm = {"f": valid["f"].astype(np.uint8), "s": valid["s"].astype(np.uint8), "a": None}
            nm = {k: v for k, v in nm.items() if v is not None}
            from tiledb.sparse_array import _setitem_impl_sparse
            _setitem_impl_sparse(A, (vals["x"], vals["y"]), raw, nm)


def our_write(exe, tmp_path, uri, kind, vals, valid, ts, sub=None, key=KEY, check=True):
    """Our write of the cells through tfwrite (dense input in row-major
    order, as TileDB's numpy write above takes it)."""
    cols = {}
    if kind.startswith("sparse"):
        cols["x"], cols["y"] = pa.array(vals["x"]), pa.array(vals["y"])
    cols["a"] = pa.array(vals["a"])
    cols["f"] = arrow_of("float64", vals["f"], valid["f"])
    cols["s"] = arrow_of("str", vals["s"], valid["s"])
    path = tmp_path / f"in_{ts}.arrow"
    write_ipc(path, pa.table(cols))
    args = ["write", uri, path, "-timestamp", ts]
    if kind == "dense":
        args += ["-subarray", json.dumps([list(s) for s in sub])]
    if key:
        args += ["-key", key]
    if check:
        return run(exe, *args)
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True)


def listing(uri):
    out = []
    for d, _, fs in os.walk(uri):
        out += [os.path.relpath(os.path.join(d, f), uri) for f in fs]
    return sorted(out)


def assert_same_read(ours, theirs, kind, sub=None):
    with tiledb.open(theirs, ctx=enc_ctx()) as T, tiledb.open(ours, ctx=enc_ctx()) as O:
        assert O.nonempty_domain() == T.nonempty_domain()
        if kind == "dense":
            # Slicing keeps the validity masks (multi_index drops them).
            sl = tuple(slice(a, b + 1) for a, b in sub)
            rt, ro = T[sl], O[sl]
        else:
            rt, ro = T.query(order="G")[:], O.query(order="G")[:]
            np.testing.assert_array_equal(ro["x"], rt["x"])
            np.testing.assert_array_equal(ro["y"], rt["y"])
        for a in ("a", "f", "s"):
            got, want = ro[a], rt[a]
            np.testing.assert_array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(want), err_msg=a)
            if a != "a":
                assert np.ma.getmaskarray(want).any(), a  # nulls were written and read
            keep = ~np.ma.getmaskarray(want)
            assert list(np.ma.getdata(got)[keep].ravel()) == list(np.ma.getdata(want)[keep].ravel()), a


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_ours_encrypted_read_by_tiledb(tfwrite, tmp_path, kind):
    rng = np.random.default_rng(len(kind))
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMAS[kind]))
    run(tfwrite, "create", ours, tmp_path / "schema.json", "-key", KEY)
    # TileDB decrypts our schema, and creates its twin from it.
    with tiledb.open(ours, ctx=enc_ctx()) as O:
        sch = O.schema
    tiledb.Array.create(theirs, sch, ctx=enc_ctx())
    sub = [(3, 17), (4, 15)] if kind == "dense" else None
    n = 15 * 12 if kind == "dense" else 150
    vals, valid, n = cells(rng, kind, n)
    tiledb_write(theirs, kind, vals, valid, 7, sub, ctx=enc_ctx())
    our_write(tfwrite, tmp_path, ours, kind, vals, valid, 7, sub)
    assert_same_read(ours, theirs, kind, sub)
    # Nothing of ours opens without the key, nor with a wrong one.
    for ctx in (None, enc_ctx(WRONG)):
        with pytest.raises(tiledb.TileDBError):
            with tiledb.open(ours, ctx=ctx) as O:
                O.query()[:] if kind != "dense" else O[:]
    # Fragment metadata, decrypted, equals TileDB's.
    mo, mt = dump_key(tfwrite, ours), dump_key(tfwrite, theirs)
    assert len(mo) == len(mt) == 1
    for k in mt[0][0]:
        assert mo[0][0][k] == mt[0][0][k], k
    assert mo[0][1] == mt[0][1]
    # Array metadata both ways.
    run(tfwrite, "meta", ours, json.dumps({"k": 5, "name": "secret words", "gone": 1.5}), "-key", KEY)
    with tiledb.open(ours, ctx=enc_ctx()) as O:
        assert O.meta["k"] == 5 and O.meta["name"] == "secret words" and O.meta["gone"] == 1.5
    with tiledb.open(ours, "w", ctx=enc_ctx()) as O:
        O.meta["theirs"] = 42
    run(tfwrite, "meta", ours, json.dumps({"gone": None}), "-key", KEY)
    with tiledb.open(ours, ctx=enc_ctx()) as O:
        assert dict(O.meta.items()) == {"k": 5, "name": "secret words", "theirs": 42}
    for f in listing(ours):
        b = open(os.path.join(ours, f), "rb").read()
        assert b"secret" not in b, f


def dump_key(exe, path):
    """test_writer.dump for an encrypted array."""
    out = []
    for _, v in sorted(json.loads(run(exe, "dump", path, "-key", KEY)).items()):
        m = v["meta"]
        for k in ("SchemaName", "Offsets", "Size", "Layout", "FileSizes", "FileVarSizes", "FileValiditySizes"):
            m["Footer"].pop(k, None)
        for k in ("TileOffsets", "TileVarOffsets", "TileValidityOffsets"):
            m.pop(k)
        out.append((m, sorted(v["files"])))
    return out


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_tiledb_encrypted_appended_by_us(tfwrite, tmp_path, kind):
    rng = np.random.default_rng(7 + len(kind))
    uri = str(tmp_path / "arr")
    # TileDB creates the array from the same JSON as ours would be.
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMAS[kind]))
    run(tfwrite, "create", str(tmp_path / "tmpl"), tmp_path / "schema.json")
    with tiledb.open(str(tmp_path / "tmpl")) as T:
        sch = T.schema
    tiledb.Array.create(uri, sch, ctx=enc_ctx())
    subs = [[(1, 9), (1, 26)], [(10, 30), (1, 26)]] if kind == "dense" else [None, None]
    parts = []
    for i, sub in enumerate(subs):
        n = (sub[0][1] - sub[0][0] + 1) * (sub[1][1] - sub[1][0] + 1) if sub else 120
        parts.append(cells(rng, kind, n))
    if kind != "dense":
        # Disjoint coordinates: x < 0 for TileDB's fragment, x >= 0 for ours.
        for (vals, valid, _), keep in zip(parts, (lambda x: x < 0, lambda x: x >= 0)):
            m = keep(vals["x"])
            for k in vals:
                vals[k] = vals[k][m]
            for k in valid:
                valid[k] = valid[k][m]
    (v0, ok0, _), (v1, ok1, _) = parts
    tiledb_write(uri, kind, v0, ok0, 5, subs[0], ctx=enc_ctx())
    with tiledb.open(uri, "w", timestamp=5, ctx=enc_ctx()) as A:
        A.meta["theirs"] = "secret one"
    before = listing(uri)
    # Without the key, or with a wrong one, we store nothing.
    for key in (None, WRONG):
        r = our_write(tfwrite, tmp_path, uri, kind, v1, ok1, 9, subs[1], key=key, check=False)
        assert r.returncode != 0 and ("encrypt" in r.stderr or "key" in r.stderr), r.stderr
        r2 = subprocess.run([tfwrite, "meta", uri, '{"x": 1}'] + (["-key", key] if key else []),
                                          capture_output=True, text=True)
        assert r2.returncode != 0, r2.stdout
        assert listing(uri) == before
    our_write(tfwrite, tmp_path, uri, kind, v1, ok1, 9, subs[1])
    run(tfwrite, "meta", uri, json.dumps({"ours": [1, 2, 3]}), "-key", KEY)
    with tiledb.open(uri, ctx=enc_ctx()) as A:
        assert len(tiledb.array_fragments(uri, ctx=enc_ctx())) == 2
        assert A.meta["theirs"] == "secret one" and tuple(A.meta["ours"]) == (1, 2, 3)
        if kind == "dense":
            r = A[1:31, 1:27]
            got = {k: r[k] for k in ("a", "f", "s")}
            # Row-major cells of both parts, stacked along x.
            for a in ("a", "f", "s"):
                want = np.concatenate([p[0][a] for p in parts])
                mask = np.concatenate([~p[1][a] for p in parts]) if a in ("f", "s") else np.zeros(len(want), bool)
                g = got[a].ravel()
                np.testing.assert_array_equal(np.ma.getmaskarray(g), mask, err_msg=a)
                assert list(np.ma.getdata(g)[~mask]) == list(want[~mask]), a
        else:
            r = A.query(order="G")[:]
            got = {(x, y): (a, None if np.ma.is_masked(f) else f, s)
                   for x, y, a, f, s in zip(r["x"], r["y"], r["a"], r["f"], r["s"])}
            want = {}
            for vals, valid, _ in parts:
                for i in range(len(vals["x"])):
                    want[(vals["x"][i], vals["y"][i])] = (
                        vals["a"][i], vals["f"][i] if valid["f"][i] else None,
                        vals["s"][i] if valid["s"][i] else None)
            assert len(got) == len(want) == sum(len(p[0]["x"]) for p in parts)
            for c, w in want.items():
                g = got[c]
                assert g[0] == w[0] and g[1] == w[1], c
                assert (np.ma.is_masked(g[2]) if w[2] is None else g[2] == w[2]), c
