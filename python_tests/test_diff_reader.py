"""Differential test of the read path: random arrays written by TileDB, random
queries read through flightd's DoGet, compared with TileDB's own answer.

Seeded (TILEFLIGHT_DIFF_SEED, default 20261121) so a failure names a case
that reruns identically; TILEFLIGHT_DIFF_ARRAYS (default 24) arrays with
QUERIES_PER_ARRAY queries each (>= 300 cases). `make fuzz-diff` runs more
arrays with a random seed.

Order: row-major and col-major results must come in exactly TileDB's order
(cells sorted by coordinates; for sparse arrays with duplicates, ties are
compared as a multiset); global and unordered results are compared as
multisets of rows."""

import json
import math
import os
import random

import numpy as np
import pyarrow as pa
import pytest
import tiledb

from flightd_fixture import flightd, flightd_bin, grpc_code  # noqa: F401

SEED = int(os.environ.get("TILEFLIGHT_DIFF_SEED", "20261121"))
N_ARRAYS = int(os.environ.get("TILEFLIGHT_DIFF_ARRAYS", "24"))
QUERIES_PER_ARRAY = 13
LETTERS = "abcdef"

ATTR_KINDS = ["f64", "n16", "s", "sn", "c", "vn", "u8"]


# ---------------------------------------------------------------- schemas

def rand_str(rng, lo=1, hi=3):
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(lo, hi)))


def make_dim(rng, i, dense, ndim, kind=None):
    name = f"d{i}"
    kinds = ["int32", "int64", "uint16"] if dense else ["int32", "int64", "uint16", "float64", "ascii"]
    kind = kind or rng.choice(kinds)
    if kind == "ascii":
        return {"name": name, "kind": kind}
    if kind == "float64":
        tile = rng.choice([10.0, 25.0, 50.0])
        return {"name": name, "kind": kind, "lo": 0.0, "hi": 100.0, "tile": tile}
    size = {1: rng.randint(10, 60), 2: rng.randint(4, 15), 3: rng.randint(3, 7)}[ndim] if dense else rng.randint(8, 50)
    # tiledb-py's dense slicing treats negative bounds like numpy indices,
    # so dense domains start at 0 or above.
    lo = 0 if kind == "uint16" else rng.randint(0 if dense else -20, 5)
    return {"name": name, "kind": kind, "lo": lo, "hi": lo + size - 1, "tile": rng.randint(1, size)}


def tiledb_dim(d):
    if d["kind"] == "ascii":
        return tiledb.Dim(d["name"], dtype="ascii")
    dt = {"int32": np.int32, "int64": np.int64, "uint16": np.uint16, "float64": np.float64}[d["kind"]]
    return tiledb.Dim(d["name"], domain=(dt(d["lo"]), dt(d["hi"])), tile=dt(d["tile"]), dtype=dt)


def tiledb_attr(kind):
    return {
        "a0": lambda: tiledb.Attr("a0", dtype=np.int32),
        "f64": lambda: tiledb.Attr("f64", dtype=np.float64),
        "n16": lambda: tiledb.Attr("n16", dtype=np.int16, nullable=True),
        "s": lambda: tiledb.Attr("s", dtype=str),
        "sn": lambda: tiledb.Attr("sn", dtype=str, nullable=True),
        "c": lambda: tiledb.Attr("c", dtype=np.complex64),
        "vn": lambda: tiledb.Attr("vn", dtype=np.int32, var=True),
        "u8": lambda: tiledb.Attr("u8", dtype=np.uint8, filters=[tiledb.ZstdFilter()]),
    }[kind]()


def make_schema(rng):
    dense = rng.random() < 0.4
    ndim = rng.randint(1, 3)
    # TileDB wants one datatype for all dimensions of a dense array.
    kind = rng.choice(["int32", "int64", "uint16"]) if dense else None
    dims = [make_dim(rng, i, dense, ndim, kind) for i in range(ndim)]
    attrs = ["a0"] + rng.sample(ATTR_KINDS, rng.randint(0, 3))
    if dense:
        # tiledb-py miscounts the cells of var numeric and multi-value
        # attributes in dense writes, so dense arrays here go without them.
        attrs = [a for a in attrs if a not in ("vn", "c")]
    has_str = any(d["kind"] == "ascii" for d in dims)
    orders = ["row-major", "col-major"] if dense else ["row-major", "col-major", "hilbert"]
    spec = {"dense": dense, "dims": dims, "attrs": attrs, "cell_order": rng.choice(orders),
            "tile_order": rng.choice(["row-major", "col-major"]),
            "dups": (not dense) and rng.random() < 0.3, "capacity": rng.randint(4, 32)}
    if spec["cell_order"] == "hilbert" and has_str and rng.random() < 0.5:
        spec["cell_order"] = "row-major"
    return spec


def create(uri, spec):
    kw = {"domain": tiledb.Domain(*[tiledb_dim(d) for d in spec["dims"]]), "sparse": not spec["dense"],
          "attrs": [tiledb_attr(a) for a in spec["attrs"]], "cell_order": spec["cell_order"]}
    if spec["cell_order"] != "hilbert":
        kw["tile_order"] = spec["tile_order"]
    if not spec["dense"]:
        kw["capacity"] = spec["capacity"]
        kw["allows_duplicates"] = spec["dups"]
    tiledb.Array.create(uri, tiledb.ArraySchema(**kw))


# ---------------------------------------------------------------- values

def attr_values(rng, kind, n):
    if kind == "a0":
        return np.array([rng.randint(-100, 100) for _ in range(n)], np.int32)
    if kind == "f64":
        return np.array([round(rng.uniform(-1e3, 1e3), 3) for _ in range(n)], np.float64)
    if kind == "n16":
        return pa.array([None if rng.random() < 0.2 else rng.randint(-300, 300) for _ in range(n)], pa.int16())
    if kind == "s":
        return np.array([rand_str(rng, 0, 5) for _ in range(n)], dtype=object)
    if kind == "sn":
        return pa.array([None if rng.random() < 0.2 else rand_str(rng, 0, 4) for _ in range(n)], pa.large_utf8())
    if kind == "c":
        return np.array([complex(rng.randint(-9, 9), rng.randint(-9, 9)) for _ in range(n)], np.complex64)
    if kind == "vn":
        return np.array([np.array([rng.randint(-50, 50) for _ in range(rng.randint(1, 3))], np.int32)
                         for _ in range(n)] + [None], dtype=object)[:-1]
    if kind == "u8":
        return np.array([rng.randint(0, 255) for _ in range(n)], np.uint8)
    raise ValueError(kind)


def rand_coord(rng, d):
    if d["kind"] == "ascii":
        return rand_str(rng)
    if d["kind"] == "float64":
        return rng.choice([round(rng.uniform(d["lo"], d["hi"]), 2), float(rng.randint(0, 10) * 10)])
    return rng.randint(d["lo"], d["hi"])


def write_sparse(rng, uri, spec, t):
    n = rng.randint(3, 30)
    seen, coords = set(), []
    while len(coords) < n:
        c = tuple(rand_coord(rng, d) for d in spec["dims"])
        if c in seen and not spec["dups"]:
            if len(seen) > 200:
                break
            continue
        seen.add(c)
        coords.append(c)
    n = len(coords)
    cols = []
    for i, d in enumerate(spec["dims"]):
        vals = [c[i] for c in coords]
        if d["kind"] == "ascii":
            cols.append(np.array(vals, dtype=object))
        else:
            dt = {"int32": np.int32, "int64": np.int64, "uint16": np.uint16, "float64": np.float64}[d["kind"]]
            cols.append(np.array(vals, dtype=dt))
    data = {a: attr_values(rng, a, n) for a in spec["attrs"]}
    with tiledb.open(uri, "w", timestamp=t) as A:
        A[tuple(cols)] = data


def write_dense(rng, uri, spec, t):
    box = []
    for d in spec["dims"]:
        a = rng.randint(d["lo"], d["hi"])
        b = rng.randint(a, min(d["hi"], a + rng.randint(0, d["hi"] - d["lo"])))
        box.append((a, b))
    shape = tuple(b - a + 1 for a, b in box)
    n = int(np.prod(shape))
    data = {}
    for a in spec["attrs"]:
        v = attr_values(rng, a, n)
        data[a] = v if isinstance(v, pa.Array) else v.reshape(shape)
    with tiledb.open(uri, "w", timestamp=t) as A:
        A[tuple(slice(a, b + 1) for a, b in box)] = data


# ---------------------------------------------------------------- normalisation

def norm(v):
    if v is None or v is np.ma.masked:
        return None
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode()
    if isinstance(v, (complex, np.complexfloating)):
        return (float(v.real), float(v.imag))
    if isinstance(v, (list, tuple, np.ndarray)):
        return tuple(norm(x) for x in v)
    if isinstance(v, (float, np.floating)):
        return "nan" if math.isnan(v) else float(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    return v


def ref_columns(res, names, validity):
    """TileDB's multi_index result as a list of rows (tuples) over names.
    tiledb-py's multi_index drops validity, so it comes from the query's
    raw buffers (one byte per cell, in result order)."""
    cols = []
    for n in names:
        a = res[n]
        mask = None
        if np.ma.isMaskedArray(a):
            mask = np.ma.getmaskarray(a).ravel()
            a = a.data
        if n in validity:
            mask = np.asarray(validity[n]) == 0
        flat = a.ravel() if isinstance(a, np.ndarray) else list(a)
        vals = [norm(x) for x in flat]
        if mask is not None:
            vals = [None if m else x for x, m in zip(vals, mask)]
        cols.append(vals)
    return [tuple(r) for r in zip(*cols)] if cols else []


def our_rows(table, names):
    cols = []
    for n in names:
        col = table.column(n)
        vals = col.to_pylist()
        if pa.types.is_fixed_size_list(col.type) and names and n == "c":
            vals = [None if x is None else tuple(x) for x in vals]
        cols.append([norm(x) if not isinstance(x, list) else tuple(norm(y) for y in x) for x in vals])
    return [tuple(r) for r in zip(*cols)]


def sort_key(row):
    return tuple((0, "") if x is None else (1, repr(x)) for x in row)


# ---------------------------------------------------------------- queries

def rand_ranges(rng, d, uri_ned):
    k = rng.randint(1, 3)
    if d["kind"] == "ascii":
        pts = sorted({rand_str(rng, 1, 2) for _ in range(2 * k)})
        if len(pts) % 2:
            pts = pts[:-1]
        if not pts:
            pts = ["a", "f"]
        return [[pts[i], pts[i + 1]] for i in range(0, len(pts), 2)]
    if d["kind"] == "float64":
        pts = sorted({round(rng.uniform(d["lo"], d["hi"]), 1) for _ in range(2 * k)})
        if len(pts) % 2:
            pts = pts[:-1]
        if not pts:
            pts = [d["lo"], d["hi"]]
        return [[pts[i], pts[i + 1]] for i in range(0, len(pts), 2)]
    # Integer ranges: ascending, disjoint and not adjacent (TileDB merges
    # adjacent ranges, which would change nothing but the range count).
    pts = sorted(rng.sample(range(d["lo"], d["hi"] + 1), min(2 * k, d["hi"] - d["lo"] + 1)))
    if len(pts) % 2:
        pts = pts[:-1]
    if not pts:
        return [[d["lo"], d["hi"]]]
    out = []
    for i in range(0, len(pts), 2):
        lo, hi = pts[i], pts[i + 1]
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def tiledb_slice(d, r):
    return slice(r[0], r[1])


ARRAYS = []


def build_arrays(root):
    rng = random.Random(SEED)
    out = []
    for i in range(N_ARRAYS):
        spec = make_schema(rng)
        name = f"diff/a{i:03d}"
        uri = os.path.join(root, name)
        create(uri, spec)
        times = []
        t = 0
        for _ in range(rng.randint(2, 5)):
            t += rng.randint(1, 20) * 10
            if spec["dense"]:
                write_dense(rng, uri, spec, t)
            else:
                write_sparse(rng, uri, spec, t)
            times.append(t)
        extra = rng.random()
        if extra < 0.2:
            tiledb.consolidate(uri)
            if rng.random() < 0.5:
                tiledb.vacuum(uri)
        elif extra < 0.4 and not spec["dense"]:
            t += 10
            with tiledb.open(uri, "d", timestamp=t) as A:
                A.query(cond=f"a0 < {rng.randint(-60, 40)}").submit()
            times.append(t)
        out.append((name, uri, spec, times, random.Random(rng.random())))
    return out


@pytest.fixture(scope="module")
def diff_arrays(flightd):
    return build_arrays(flightd.data)


def run_case(client, uri, name, spec, times, rng):
    import pyarrow.flight as fl
    dims = [d["name"] for d in spec["dims"]]
    allcols = dims + spec["attrs"]
    ts_choice = rng.random()
    if ts_choice < 0.5:
        ts, tdb_ts = None, None
    elif ts_choice < 0.8:
        k = rng.randrange(len(times))
        ts = times[k] + rng.choice([0, 5])
        tdb_ts = ts
    else:
        a = rng.randrange(len(times))
        b = rng.randrange(a, len(times))
        ts = [times[a], times[b]]
        tdb_ts = (times[a], times[b])
    with tiledb.open(uri, timestamp=tdb_ts) as A:
        ned = A.nonempty_domain()
        q = {"array": name}
        subarray, tdb_sel = {}, []
        for i, d in enumerate(spec["dims"]):
            give = rng.random() < 0.7 or ned is None
            if give:
                rs = rand_ranges(rng, d, ned)
                subarray[d["name"]] = rs
            else:
                lo, hi = ned[i]
                rs = [[norm(lo), norm(hi)]]
            tdb_sel.append([tiledb_slice(d, r) for r in rs])
        if subarray:
            q["subarray"] = subarray
        if rng.random() < 0.5:
            cols = rng.sample(allcols, rng.randint(1, len(allcols)))
            q["columns"] = cols
        else:
            cols = allcols
        layout = rng.choice(["row-major", "col-major", "global", "unordered"])
        q["layout"] = layout
        if ts is not None:
            q["timestamp"] = ts
        if rng.random() < 0.3:
            q["batch_rows"] = rng.randint(1, 50)
        order = "C" if spec["dense"] else "U"
        indexer = A.query(order=order, dims=dims, attrs=spec["attrs"]).multi_index
        res = indexer[tuple(tdb_sel)]
        validity = {}
        if any(a in ("n16", "s", "sn") for a in spec["attrs"]):
            raw = indexer.pyquery.results()
            validity = {a: raw[a][2] for a in ("n16", "sn") if a in spec["attrs"]}
            # tiledb-py strips trailing NULs when it makes str objects, which
            # turns TileDB's var-sized fill value ("\0") into "": the
            # reference for string attributes is TileDB's raw buffers.
            for a in ("s", "sn"):
                if a in spec["attrs"]:
                    data, offs = raw[a][0].tobytes(), list(raw[a][1]) + [len(raw[a][0])]
                    res[a] = np.array([data[offs[i]:offs[i + 1]].decode() for i in range(len(offs) - 1)] + [None],
                                      dtype=object)[:-1]
    ref = ref_columns(res, allcols, validity)
    idx = [allcols.index(c) for c in cols]
    nd = len(dims)
    try:
        got_t = client.do_get(fl.Ticket(json.dumps(q).encode())).read_all()
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{q}: {grpc_code(e)}: {e}")
    assert got_t.column_names == cols, q
    got = our_rows(got_t, cols)
    if "batch_rows" in q:
        assert all(b.num_rows <= q["batch_rows"] for b in got_t.to_batches()), q

    def coord_key(row, col_major):
        c = [sort_key((row[i],)) for i in range(nd)]
        return tuple(reversed(c)) if col_major else tuple(c)

    exact = layout in ("row-major", "col-major") and not spec["dups"]
    if exact:
        # Sort by coordinates as numbers/strings, not reprs.
        def ckey(row):
            c = list(row[:nd])
            c = [(x if not isinstance(x, str) else x.encode()) for x in c]
            return tuple(reversed(c)) if layout == "col-major" else tuple(c)
        ref_sorted = sorted(ref, key=ckey)
        want = [tuple(r[i] for i in idx) for r in ref_sorted]
        assert len(got) == len(want), f"{q}: {len(got)} rows, TileDB {len(want)}"
        assert got == want, f"{q}: rows differ (first: ours {first_diff(got, want)})"
    else:
        want = sorted((tuple(r[i] for i in idx) for r in ref), key=sort_key)
        got_s = sorted(got, key=sort_key)
        assert len(got_s) == len(want), f"{q}: {len(got_s)} rows, TileDB {len(want)}"
        assert got_s == want, f"{q}: multisets differ (first: {first_diff(got_s, want)})"


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"row {i}: ours {x}, TileDB {y}"
    return "lengths"


@pytest.mark.parametrize("k", range(N_ARRAYS))
def test_diff_reader(k, diff_arrays, flightd):
    name, uri, spec, times, rng = diff_arrays[k]
    client = flightd.client()
    failures = []
    for j in range(QUERIES_PER_ARRAY):
        try:
            run_case(client, uri, name, spec, times, rng)
        except AssertionError as e:
            failures.append(f"query {j}: {e}")
    client.close()
    assert not failures, f"seed {SEED} array {name} {json.dumps(spec)}:\n" + "\n".join(failures[:5])
