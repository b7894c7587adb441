"""Differential test of the read path: random arrays written by TileDB, random
queries read through flightd's DoGet, compared with TileDB's own answer.

Seeded (TILEFLIGHT_DIFF_SEED, default 20261121) so a failure names a case
that reruns identically; TILEFLIGHT_DIFF_ARRAYS (default 24) arrays with
QUERIES_PER_ARRAY queries each (>= 300 cases). `make fuzz-diff` runs more
arrays with a random seed.

Arrays: dense and sparse, 1 to 3 dimensions of int32/int64/uint16 (negative
and far-from-zero domains), datetime_day/ms/ns (near zero or near today;
query ranges are integers in the unit) and, sparse only, float64 and ASCII
strings; row-major, col-major and (sparse) Hilbert cell orders; duplicates;
attributes int32, float64, nullable int16, strings (nullable or not),
complex64, var-sized int32, zstd-filtered uint8; several timestamped
writes, then sometimes consolidation (+ vacuum) or a delete condition.
Queries: random multi-range subarrays, column subsets, every layout,
timestamps and timestamp ranges, small batch sizes. The module runs its own
daemon, restarted after a crash, so a panic is reported with its stack and
the remaining arrays still run.

Order: row-major, col-major and global results must come in exactly
TileDB's order; only cells with equal coordinates (duplicates in sparse
arrays) may come in any order among themselves, so each run of equal
coordinates is compared as a multiset. Unordered results are compared as
multisets of rows.

The reference for a sparse query is TileDB's unrestricted read (no
subarray at all) in global order at the same timestamp, filtered here by the
query's ranges: a cell is in when each dimension's coordinate lies in one of
that dimension's ranges (inclusive; strings compare as bytes). The ranges
this module makes are disjoint, so a cell counts once (TileDB would count a
cell once per overlapping range in some readers; `check_disjoint` keeps the
model honest). The global order of a subarray is the array's global order
restricted to it; the other layouts sort that. TileDB's own subarray read
is not the reference because TileDB 2.30 gets it wrong on string
dimensions (see tiledb_known_issues.py for the repro); it is still read and
compared with the reference, and each disagreement is recorded and printed
at the end of the module (test_zz_tiledb_subarray_disagreements) instead of
failing: only a disagreement between flightd and the reference fails.

Dense queries use TileDB's subarray read (the fill values of unwritten
cells come from it). TileDB refuses multi-range subarrays in global order
(dense multi-range global reads through tiledb-py fail with
std::bad_alloc), so a dense global reference reads the bounding box of the
query's ranges in global order and keeps the cells inside the ranges.

Dense writes go through tiledb-py with a `tiledb.Subarray` selection and
flat, row-major value buffers. Slice selections (`A[lo:hi] = ...`) treat
negative bounds like numpy indices (`A[-4:-2]` on a domain starting at -5
fails with "Lower range bound 3 cannot be larger than the higher bound 1"),
so with a Subarray the ranges are taken as coordinates, which lets dense
arrays have negative and datetime domains. Var-sized numeric attributes are
object arrays of numpy arrays, complex64 attributes (FLOAT32, two values per
cell) plain complex arrays."""

import json
import math
import os
import random
import subprocess
import warnings

import numpy as np
import pyarrow as pa
import pytest
import tiledb

from flightd_fixture import Daemon, flightd_bin, grpc_code  # noqa: F401
# TileDB's known bugs this module works around, pinned so that an upgrade
# that fixes one shows (collected here: pytest only looks at test_*.py).
from tiledb_known_issues import (  # noqa: F401
    test_tiledb_known_issue_string_partition_adds_cells, test_tiledb_known_issue_string_partition_bounds,
    test_tiledb_known_issue_string_partition_drops_cells)

SEED = int(os.environ.get("TILEFLIGHT_DIFF_SEED", "20261121"))
N_ARRAYS = int(os.environ.get("TILEFLIGHT_DIFF_ARRAYS", "24"))
QUERIES_PER_ARRAY = 13
LETTERS = "abcdef"

ATTR_KINDS = ["f64", "n16", "s", "sn", "c", "vn", "u8"]
INT_KINDS = {"int32": np.int32, "int64": np.int64, "uint16": np.uint16}
# Datetime dimensions: TileDB's type name -> numpy unit. Their coordinates
# travel as integers in the unit, in queries and in the comparison.
TIME_KINDS = {"datetime_day": "D", "datetime_ms": "ms", "datetime_ns": "ns"}
# Realistic epochs for the datetime domains, so that tile arithmetic on
# values far from zero is exercised too.
TIME_BASES = {"D": 19000, "ms": 1_700_000_000_000, "ns": 1_700_000_000_000_000_000}


# ---------------------------------------------------------------- schemas

def rand_str(rng, lo=1, hi=3):
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(lo, hi)))


def rand_kind(rng, dense):
    # Datetimes are one choice among the kinds, then a unit.
    k = rng.choice(list(INT_KINDS) + ["datetime"] + ([] if dense else ["float64", "ascii"]))
    return rng.choice(list(TIME_KINDS)) if k == "datetime" else k


def make_dim(rng, i, dense, ndim, kind=None):
    name = f"d{i}"
    kind = kind or rand_kind(rng, dense)
    if kind == "ascii":
        return {"name": name, "kind": kind}
    if kind == "float64":
        tile = rng.choice([10.0, 25.0, 50.0])
        return {"name": name, "kind": kind, "lo": 0.0, "hi": 100.0, "tile": tile}
    size = {1: rng.randint(10, 60), 2: rng.randint(4, 15), 3: rng.randint(3, 7)}[ndim] if dense else rng.randint(8, 50)
    lo = rng.randint(0, 5) if kind == "uint16" else rng.randint(-20, 5)
    if kind in TIME_KINDS and rng.random() < 0.4:
        lo += TIME_BASES[TIME_KINDS[kind]]
    elif kind == "int64" and rng.random() < 0.2:
        lo += rng.choice([-(1 << 40), 1 << 40])
    return {"name": name, "kind": kind, "lo": lo, "hi": lo + size - 1, "tile": rng.randint(1, size)}


def np_dtype(d):
    if d["kind"] in TIME_KINDS:
        return np.dtype(f"datetime64[{TIME_KINDS[d['kind']]}]")
    return np.dtype({"float64": np.float64, **INT_KINDS}[d["kind"]])


def coord(d, v):
    """A coordinate or range bound as tiledb-py wants it for dimension d."""
    if d["kind"] in TIME_KINDS:
        return np.datetime64(int(v), TIME_KINDS[d["kind"]])
    if d["kind"] == "ascii":
        return v
    return np_dtype(d).type(v)


def tiledb_dim(d):
    if d["kind"] == "ascii":
        return tiledb.Dim(d["name"], dtype="ascii")
    if d["kind"] in TIME_KINDS:
        unit = TIME_KINDS[d["kind"]]
        return tiledb.Dim(d["name"], domain=(coord(d, d["lo"]), coord(d, d["hi"])),
                          tile=np.timedelta64(d["tile"], unit), dtype=np_dtype(d))
    dt = np_dtype(d).type
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


# The first arrays of every run are these (dense, datetime kind), so that
# each datetime unit is read from dense and sparse arrays whatever the seed.
FORCED = [(True, "datetime_day"), (False, "datetime_day"), (True, "datetime_ms"),
          (False, "datetime_ms"), (True, "datetime_ns"), (False, "datetime_ns")]


def make_schema(rng, forced=None):
    dense = rng.random() < 0.4
    ndim = rng.randint(1, 3)
    # TileDB wants one datatype for all dimensions of a dense array.
    kind = rand_kind(rng, True) if dense else None
    if forced:
        dense, kind = forced
    dims = [make_dim(rng, i, dense, ndim, kind) for i in range(ndim)]
    if forced and not dense:
        # A sparse array's other dimensions stay random.
        dims[1:] = [make_dim(rng, i, dense, ndim) for i in range(1, ndim)]
    attrs = ["a0"] + rng.sample(ATTR_KINDS, rng.randint(0, 3))
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
        # The trailing None keeps numpy from making a 2-D array when every
        # cell happens to have the same length.
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
    # Bounded tries: a small domain may hold fewer than n distinct cells.
    for _ in range(20 * n):
        if len(coords) == n:
            break
        c = tuple(rand_coord(rng, d) for d in spec["dims"])
        if c in seen and not spec["dups"]:
            continue
        seen.add(c)
        coords.append(c)
    n = len(coords)
    cols = []
    for i, d in enumerate(spec["dims"]):
        vals = [c[i] for c in coords]
        if d["kind"] == "ascii":
            cols.append(np.array(vals, dtype=object))
        elif d["kind"] in TIME_KINDS:
            cols.append(np.array(vals, np.int64).astype(np_dtype(d)))
        else:
            cols.append(np.array(vals, dtype=np_dtype(d)))
    data = {a: attr_values(rng, a, n) for a in spec["attrs"]}
    with tiledb.open(uri, "w", timestamp=t) as A:
        A[tuple(cols)] = data


def write_dense(rng, uri, spec, t):
    box = []
    for d in spec["dims"]:
        a = rng.randint(d["lo"], d["hi"])
        b = rng.randint(a, min(d["hi"], a + rng.randint(0, d["hi"] - d["lo"])))
        box.append((a, b))
    n = int(np.prod([b - a + 1 for a, b in box]))
    # Flat buffers in row-major order over a Subarray whose ranges are
    # coordinates (see the module docstring for why not slices).
    data = {a: attr_values(rng, a, n) for a in spec["attrs"]}
    with tiledb.open(uri, "w", timestamp=t) as A:
        sub = tiledb.Subarray(A)
        sub.add_ranges([[(coord(d, a), coord(d, b))] for d, (a, b) in zip(spec["dims"], box)])
        A[sub] = data


# ---------------------------------------------------------------- normalisation

def norm(v):
    if v is None or v is np.ma.masked:
        return None
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode()
    if isinstance(v, np.datetime64):
        return int(v.astype(np.int64))
    if isinstance(v, (complex, np.complexfloating)):
        return (norm(float(v.real)), norm(float(v.imag)))
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


# Nullable attribute kinds that other modules add to these arrays (their
# validity comes from TileDB's raw buffers too).
EXTRA_NULLABLE = []


def tiledb_rows(A, spec, order, sel, cond=None):
    """TileDB's answer for the selection sel (per dimension a list of
    slices), in TileDB's order for `order`, as rows over dims + attrs
    (restricted by the query condition cond, when given)."""
    dims = [d["name"] for d in spec["dims"]]
    kw = {"cond": cond} if cond is not None else {}
    indexer = A.query(order=order, dims=dims, attrs=spec["attrs"], **kw).multi_index
    res = indexer[tuple(sel)]
    validity = {}
    if any(a in ("n16", "s", "sn") or a in EXTRA_NULLABLE for a in spec["attrs"]):
        raw = indexer.pyquery.results()
        validity = {a: raw[a][2] for a in ("n16", "sn", *EXTRA_NULLABLE) if a in spec["attrs"]}
        # tiledb-py strips trailing NULs when it makes str objects, which
        # turns TileDB's var-sized fill value ("\0") into "": the
        # reference for string attributes is TileDB's raw buffers.
        for a in ("s", "sn"):
            if a in spec["attrs"]:
                data, offs = raw[a][0].tobytes(), list(raw[a][1]) + [len(raw[a][0])]
                res[a] = np.array([data[offs[i]:offs[i + 1]].decode() for i in range(len(offs) - 1)] + [None],
                                  dtype=object)[:-1]
    return ref_columns(res, dims + spec["attrs"], validity)


def our_rows(table, names):
    cols = []
    for n in names:
        col = table.column(n)
        # Datetimes compare as integers in the dimension's unit.
        if pa.types.is_date32(col.type):
            col = col.cast(pa.int32())
        elif pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        vals = col.to_pylist()
        cols.append([norm(x) if not isinstance(x, list) else tuple(norm(y) for y in x) for x in vals])
    return [tuple(r) for r in zip(*cols)]


def sort_key(row):
    return tuple((0, "") if x is None else (1, repr(x)) for x in row)


# ---------------------------------------------------------------- queries

def rand_ranges(rng, d):
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
    # Integer (and datetime) ranges: ascending, disjoint and not adjacent
    # (TileDB merges adjacent ranges, which would change nothing but the
    # range count).
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
    return slice(coord(d, r[0]), coord(d, r[1]))


def range_filter(ranges):
    """A predicate over rows (coordinates first): whether each coordinate
    lies in one of its dimension's ranges, bounds included. ranges has one
    entry per dimension, None for a dimension the query leaves open.
    Strings compare as bytes, as TileDB orders them."""
    enc = [None if rs is None else [tuple(b.encode() if isinstance(b, str) else b for b in r) for r in rs]
           for rs in ranges]

    def pred(row):
        for x, rs in zip(row, enc):
            if rs is None:
                continue
            if isinstance(x, str):
                x = x.encode()
            if not any(lo <= x <= hi for lo, hi in rs):
                return False
        return True
    return pred


def check_disjoint(q, ranges):
    """The reference counts a cell once however many ranges hold it, which
    is TileDB's answer only for disjoint ranges (rand_ranges makes them so)."""
    for rs in ranges:
        if rs is None:
            continue
        enc = sorted(tuple(b.encode() if isinstance(b, str) else b for b in r) for r in rs)
        for (_, hi), (lo, _) in zip(enc, enc[1:]):
            assert lo > hi, f"{q}: overlapping ranges {rs}: the reference's multiplicity model does not hold"


# TileDB's subarray reads that disagree with the reference (its own
# unrestricted read, filtered): recorded, printed at the end of the module.
TILEDB_DISAGREEMENTS = []


def string_leads_cell_order(spec):
    """Whether the array meets tiledb_known_issues' string-partition
    conditions on the cell order (a string dimension leads it)."""
    dims = spec["dims"]
    lead = {"row-major": dims[0], "col-major": dims[-1]}.get(spec["cell_order"])
    return lead is not None and lead["kind"] == "ascii"


def note_tiledb_subarray(q, spec, ref, tdb_sub):
    """Compare TileDB's subarray answer (rows over all columns, any order)
    with the reference; record a disagreement."""
    want = sorted(ref, key=sort_key)
    have = sorted(tdb_sub, key=sort_key)
    if have == want:
        return
    missing, extra = multiset_diff(want, have), multiset_diff(have, want)
    TILEDB_DISAGREEMENTS.append({
        "seed": SEED, "query": q, "spec": spec, "reference": len(want), "tiledb": len(have),
        "missing": missing[:4], "extra": extra[:4], "string_partition": string_leads_cell_order(spec)})


def multiset_diff(a, b):
    """The rows of a not matched in b (a and b sorted by sort_key)."""
    out, j = [], 0
    bk = [sort_key(r) for r in b]
    for r in a:
        k = sort_key(r)
        while j < len(b) and bk[j] < k:
            j += 1
        if j < len(b) and bk[j] == k:
            j += 1
        else:
            out.append(r)
    return out


def build_arrays(root):
    rng = random.Random(SEED)
    out = []
    for i in range(N_ARRAYS):
        spec = make_schema(rng, FORCED[i] if i < len(FORCED) else None)
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


class DiffDaemon:
    """This module's own flightd, so that a crash shows up here (with the
    daemon's panic) and not in every later test module; a crashed daemon is
    restarted on the same data for the next array."""

    def __init__(self, exe, data):
        self.exe, self.data = exe, str(data)
        self.d = Daemon(exe, self.data, args=["-memory-budget", str(256 << 20)])

    def crash_report(self):
        """None while the daemon lives; else its last log lines, and a
        fresh daemon takes its place."""
        try:
            self.d.proc.wait(1)  # a panicking daemon may still be exiting
        except subprocess.TimeoutExpired:
            return None
        self.d.stop(check=False)
        lines = self.d.log_lines
        start = next((i for i, line in enumerate(lines) if line.startswith("panic")), max(0, len(lines) - 10))
        self.d = Daemon(self.exe, self.data, args=["-memory-budget", str(256 << 20)])
        return "\n".join(lines[start:start + 12])

    def run_cases(self, n, label, case):
        """Runs case(client, j) for j in range(n) on a fresh client; returns
        the failures, each named `label j`. A case that crashed the daemon
        ends the run with the daemon's panic appended (a fresh daemon then
        serves the next array)."""
        client = self.d.client()
        failures = []
        for j in range(n):
            try:
                case(client, j)
            except AssertionError as e:
                failures.append(f"{label} {j}: {e}")
                crash = self.crash_report()
                if crash:
                    failures[-1] += "\nflightd crashed:\n" + crash
                    break
        client.close()
        return failures


@pytest.fixture(scope="module")
def diff_daemon(flightd_bin, tmp_path_factory):
    dd = DiffDaemon(flightd_bin, tmp_path_factory.mktemp("diff-data"))
    try:
        yield dd
    finally:
        dd.d.stop(check=False)


@pytest.fixture(scope="module")
def diff_arrays(diff_daemon):
    return build_arrays(diff_daemon.data)


def compare_ordered(q, got, ref, idx, nd):
    """got must be ref (rows over all columns, in the order wanted),
    projected on idx; rows of ref with equal coordinates may come in any
    order among themselves."""
    assert len(got) == len(ref), f"{q}: {len(got)} rows, the reference {len(ref)}"
    i = 0
    while i < len(ref):
        j = i + 1
        while j < len(ref) and ref[j][:nd] == ref[i][:nd]:
            j += 1
        want = [tuple(r[k] for k in idx) for r in ref[i:j]]
        have = got[i:j]
        if j - i > 1:
            want, have = sorted(want, key=sort_key), sorted(have, key=sort_key)
        if have != want:
            raise AssertionError(f"{q}: rows {i}..{j - 1} differ: ours {have}, the reference {want} "
                                 f"(the reference's row {i}: {ref[i]})")
        i = j


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
        subarray, tdb_sel, ranges, qranges = {}, [], [], []
        for i, d in enumerate(spec["dims"]):
            give = rng.random() < 0.7 or ned is None
            if give:
                rs = rand_ranges(rng, d)
                subarray[d["name"]] = rs
            else:
                lo, hi = ned[i]
                rs = [[norm(lo), norm(hi)]]
            ranges.append(rs)
            qranges.append(rs if give else None)
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
        if not spec["dense"]:
            # TileDB's unrestricted global-order read, filtered by the
            # query's ranges (see the module docstring), and TileDB's own
            # subarray answer, which is only compared with it.
            check_disjoint(q, qranges)
            every = [slice(None)] * len(spec["dims"])
            ref = [r for r in tiledb_rows(A, spec, "G", every) if range_filter(qranges)(r)]
            note_tiledb_subarray(q, spec, ref, tiledb_rows(A, spec, "U", tdb_sel))
        elif layout == "global":
            # TileDB's global order over the ranges' bounding box, restricted
            # to the ranges (it refuses multi-range global reads).
            box = [tiledb_slice(d, [min(r[0] for r in rs), max(r[1] for r in rs)])
                   for d, rs in zip(spec["dims"], ranges)]
            ref = [r for r in tiledb_rows(A, spec, "G", box) if range_filter(ranges)(r)]
        else:
            ref = tiledb_rows(A, spec, "C", tdb_sel)
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

    if layout in ("row-major", "col-major"):
        # Sort by coordinates as numbers/strings (strings bytewise, as
        # TileDB compares them); the sort is stable, and runs of equal
        # coordinates are compared as multisets anyway.
        def ckey(row):
            c = [(x if not isinstance(x, str) else x.encode()) for x in row[:nd]]
            return tuple(reversed(c)) if layout == "col-major" else tuple(c)
        compare_ordered(q, got, sorted(ref, key=ckey), idx, nd)
    elif layout == "global":
        compare_ordered(q, got, ref, idx, nd)
    else:
        want = sorted((tuple(r[i] for i in idx) for r in ref), key=sort_key)
        got_s = sorted(got, key=sort_key)
        assert len(got_s) == len(want), f"{q}: {len(got_s)} rows, the reference {len(want)}"
        assert got_s == want, f"{q}: multisets differ (first: {first_diff(got_s, want)})"


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"row {i}: ours {x}, the reference {y}"
    return "lengths"


@pytest.mark.parametrize("k", range(N_ARRAYS))
def test_diff_reader(k, diff_arrays, diff_daemon):
    name, uri, spec, times, rng = diff_arrays[k]
    failures = diff_daemon.run_cases(QUERIES_PER_ARRAY, "query",
                                     lambda client, j: run_case(client, uri, name, spec, times, rng))
    assert not failures, f"seed {SEED} array {name} {json.dumps(spec)}:\n" + "\n".join(failures[:5])


def test_zz_tiledb_subarray_disagreements(capsys):
    """Runs last: prints how often TileDB's subarray read disagreed with its
    own unrestricted read filtered by the same ranges (not a failure of
    ours; see tiledb_known_issues.py), with the first examples. Those that
    the known string-partition bug cannot explain (no string dimension
    leads the cell order) are printed apart: they are new TileDB bugs or a
    mistake of the reference, to investigate."""
    known = [r for r in TILEDB_DISAGREEMENTS if r["string_partition"]]
    other = [r for r in TILEDB_DISAGREEMENTS if not r["string_partition"]]
    lines = [f"seed {SEED}: TileDB's subarray read disagreed with its unrestricted read filtered in Python "
             f"in {len(TILEDB_DISAGREEMENTS)} sparse queries ({len(known)} with a string dimension leading the "
             f"cell order, the known string-partition bug; {len(other)} not explained)"]
    for r in other[:3] + known[:2]:
        lines.append(f"  {'UNEXPLAINED ' if not r['string_partition'] else ''}{json.dumps(r['query'])}: "
                     f"reference {r['reference']} rows, TileDB {r['tiledb']}; missing from TileDB {r['missing']}, "
                     f"extra in TileDB {r['extra']}; schema {json.dumps(r['spec'])}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    if TILEDB_DISAGREEMENTS:
        warnings.warn(lines[0], TileDBDisagreement)


class TileDBDisagreement(UserWarning):
    """TileDB's subarray read disagreed with its own filtered full read."""
