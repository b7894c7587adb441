"""Flight SQL through ADBC (adbc-driver-flightsql), checked against DuckDB.

Arrays are written by the tiledb package into the daemon's data directory;
the same arrays, read by tiledb, are loaded into DuckDB under the same
schema.table names, and every statement runs on both: flightd's answer
must equal DuckDB's. Bulk ingest through adbc_ingest is read back by
tiledb.
"""

import decimal
import math
import os

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import tiledb

adbc_flightsql = pytest.importorskip("adbc_driver_flightsql.dbapi")
import adbc_driver_manager  # noqa: E402

from flightd_fixture import flightd, flightd_bin  # noqa: F401

SCHEMA = "sqlt"


def _dense2d(uri):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 39), tile=10, dtype=np.int32),
                        tiledb.Dim("y", domain=(0, 29), tile=10, dtype=np.int32))
    sch = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("a", dtype=np.float64), tiledb.Attr("b", dtype=np.int32), tiledb.Attr("c", dtype=np.float32)])
    tiledb.Array.create(uri, sch)
    rng = np.random.default_rng(11)
    with tiledb.open(uri, "w") as A:
        A[:, :] = {"a": rng.normal(10, 5, (40, 30)), "b": rng.integers(-50, 50, (40, 30)).astype(np.int32),
                   "c": rng.random((40, 30)).astype(np.float32)}


def _pts(uri):
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 1000), tile=100, dtype=np.int64),
                        tiledb.Dim("t", domain=(0.0, 100.0), tile=10.0, dtype=np.float64))
    sch = tiledb.ArraySchema(domain=dom, sparse=True, allows_duplicates=False, attrs=[
        tiledb.Attr("s", dtype=str, var=True), tiledb.Attr("n", dtype=np.int32, nullable=True),
        tiledb.Attr("val", dtype=np.float64)])
    tiledb.Array.create(uri, sch)
    rng = np.random.default_rng(5)
    k = np.arange(0, 600, 3, dtype=np.int64)
    t = np.round(rng.random(len(k)) * 100, 3)
    words = ["alpha", "beta", "gamma", "delta", "eps"]
    s = np.array([words[i % 5] + str(i % 7) for i in range(len(k))], dtype=object)
    n = rng.integers(0, 20, len(k)).astype(np.int32)
    nmask = (np.arange(len(k)) % 4) != 0  # every 4th null
    from tiledb.sparse_array import _setitem_impl_sparse  # explicit validity maps
    with tiledb.open(uri, "w") as A:
        _setitem_impl_sparse(A, (k, t), {"s": s, "n": n, "val": rng.normal(0, 1, len(k))},
                             {"n": nmask.astype(np.uint8)})


def _lookup(uri):
    dom = tiledb.Domain(tiledb.Dim("id", domain=(0, 99), tile=10, dtype=np.int64))
    sch = tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("name", dtype=str, var=True), tiledb.Attr("weight", dtype=np.float64)])
    tiledb.Array.create(uri, sch)
    ids = np.arange(0, 100, 2, dtype=np.int64)
    with tiledb.open(uri, "w") as A:
        A[ids] = {"name": np.array(["n%02d" % i for i in ids], dtype=object), "weight": ids * 0.5}


def _top(uri):
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, 99), tile=25, dtype=np.int64))
    sch = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr("v", dtype=np.int64)])
    tiledb.Array.create(uri, sch)
    with tiledb.open(uri, "w") as A:
        A[:] = np.arange(100, dtype=np.int64) * 7 % 31


def _dvar(uri):
    """A dense array with a var-sized string and a nullable attribute: a
    dense scan with a pushed filter drops the failing cells of both."""
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, 199), tile=32, dtype=np.int32))
    sch = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("s", dtype=str, var=True), tiledb.Attr("n", dtype=np.int16, nullable=True),
        tiledb.Attr("f", dtype=np.float32)])
    tiledb.Array.create(uri, sch)
    i = np.arange(200)
    with tiledb.open(uri, "w") as A:
        A[:] = {"s": np.array(["w%03d" % ((k * 37) % 200) for k in i], dtype=object),
                "n": np.ma.masked_array((i % 23).astype(np.int16), mask=(i % 5 == 0)),
                "f": (i / 8.0).astype(np.float32)}


def _events(uri):
    """A sparse array with a string and a datetime dimension and datetime
    attributes (ms and days): conditions on them are pushed as `filter`."""
    dom = tiledb.Domain(tiledb.Dim("name", domain=(None, None), tile=None, dtype="ascii"),
                        tiledb.Dim("t", domain=(np.datetime64("2021-01-01T00:00:00", "s"), np.datetime64("2021-12-31T00:00:00", "s")),
                                   tile=np.timedelta64(86400, "s"), dtype=np.dtype("datetime64[s]")))
    sch = tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("ts", dtype=np.dtype("datetime64[ms]")), tiledb.Attr("day", dtype=np.dtype("datetime64[D]")),
        tiledb.Attr("v", dtype=np.int64)])
    tiledb.Array.create(uri, sch)
    k = np.arange(60)
    names = np.array(["%s%d" % ("abcde"[i % 5], i % 7) for i in k], dtype=object)
    t = np.datetime64("2021-01-01T00:00:00", "s") + (k * 7).astype("timedelta64[s]")
    at = np.datetime64("2021-03-01T12:00:00.000", "ms") + (k * 250).astype("timedelta64[ms]")
    day = np.datetime64("2021-03-01", "D") + (k % 9).astype("timedelta64[D]")
    with tiledb.open(uri, "w") as A:
        A[names, t] = {"ts": at, "day": day, "v": k}


def _ddt(uri):
    """A dense array with a datetime (day) dimension: ranges on it become
    the subarray."""
    dom = tiledb.Domain(tiledb.Dim("d", domain=(np.datetime64("2021-01-01", "D"), np.datetime64("2021-12-31", "D")),
                                   tile=np.timedelta64(30, "D"), dtype=np.dtype("datetime64[D]")))
    sch = tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr("v", dtype=np.int32)])
    tiledb.Array.create(uri, sch)
    with tiledb.open(uri, "w") as A:
        A[np.datetime64("2021-01-01", "D"):np.datetime64("2021-03-31", "D")] = {"v": (np.arange(90) * 7 % 40).astype(np.int32)}


def _ingest_targets(data):
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 10000), tile=100, dtype=np.int64))
    tiledb.Array.create(os.path.join(data, SCHEMA, "ing_sparse"), tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("s", dtype=str, var=True), tiledb.Attr("v", dtype=np.float64)]))
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, 9), tile=5, dtype=np.int32))
    tiledb.Array.create(os.path.join(data, SCHEMA, "ing_dense"), tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("v", dtype=np.int32)]))


def _insert_target(uri):
    """An empty sparse array of pts' columns (pts' schema, a wider domain)."""
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 100000), tile=100, dtype=np.int64),
                        tiledb.Dim("t", domain=(0.0, 100.0), tile=10.0, dtype=np.float64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, allows_duplicates=False, attrs=[
        tiledb.Attr("s", dtype=str, var=True), tiledb.Attr("n", dtype=np.int32, nullable=True),
        tiledb.Attr("val", dtype=np.float64)]))


def tiledb_table(uri):
    """The whole array as TileDB reads it (every cell of the non-empty
    domain; nulls from the validity buffers), as an Arrow table."""
    with tiledb.open(uri) as A:
        dims = [A.schema.domain.dim(i).name for i in range(A.schema.domain.ndim)]
        attrs = [A.schema.attr(i).name for i in range(A.schema.nattr)]
        order = "C" if not A.schema.sparse else "U"
        idx = A.query(dims=dims, attrs=attrs, order=order).multi_index
        res = idx[tuple(slice(lo, hi) for lo, hi in A.nonempty_domain())]
        raw = idx.pyquery.results()
        cols = {}
        for n in dims + attrs:
            v = np.asarray(res[n]).ravel()
            mask = None
            if n in attrs and A.schema.attr(n).isnullable:
                mask = np.asarray(raw[n][2]) == 0
            cols[n] = pa.array(list(v) if v.dtype == object else v, mask=mask)
        return pa.table(cols)


@pytest.fixture(scope="module")
def env(flightd):
    os.makedirs(os.path.join(flightd.data, SCHEMA), exist_ok=True)
    for name, mk in [("dense2d", _dense2d), ("pts", _pts), ("lookup", _lookup), ("dvar", _dvar),
                     ("events", _events), ("ddt", _ddt)]:
        uri = os.path.join(flightd.data, SCHEMA, name)
        if not os.path.exists(uri):
            mk(uri)
    top = os.path.join(flightd.data, "sqltop")
    if not os.path.exists(top):
        _top(top)
    if not os.path.exists(os.path.join(flightd.data, SCHEMA, "ing_sparse")):
        _ingest_targets(flightd.data)
    if not os.path.exists(os.path.join(flightd.data, SCHEMA, "ins")):
        _insert_target(os.path.join(flightd.data, SCHEMA, "ins"))

    duck = duckdb.connect()
    duck.execute("CREATE SCHEMA %s" % SCHEMA)
    for name, path in [("%s.dense2d" % SCHEMA, "sqlt/dense2d"), ("%s.pts" % SCHEMA, "sqlt/pts"),
                       ("%s.lookup" % SCHEMA, "sqlt/lookup"), ("main.sqltop", "sqltop"),
                       ("%s.dvar" % SCHEMA, "sqlt/dvar"), ("%s.events" % SCHEMA, "sqlt/events"),
                       ("%s.ddt" % SCHEMA, "sqlt/ddt")]:
        tmp_tbl = tiledb_table(os.path.join(flightd.data, path))  # noqa: F841 (DuckDB reads it by name)
        duck.execute("CREATE TABLE %s AS SELECT * FROM tmp_tbl" % name)

    url = flightd.url.replace("grpc://", "grpc://")
    conn = adbc_flightsql.connect(url)
    try:
        yield conn, duck, flightd
    finally:
        conn.close()
        duck.close()


def _norm(v):
    if isinstance(v, bytes):
        return v.decode()  # TileDB reads ASCII dimensions as bytes
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, bool):
        return int(v)
    return v


def _rows(table):
    cols = [c.to_pylist() for c in table.columns]
    return [tuple(_norm(c[i]) for c in cols) for i in range(table.num_rows)]


def _cell_eq(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) or isinstance(b, float):
            # MySQL-style AVG/division of integers is a DECIMAL with 4
            # more digits of scale; float32 sums differ in the last bits.
            return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4)
        return a == b
    return a == b


def _sort_key(row):
    return tuple((0, "") if v is None else (1, float(v)) if isinstance(v, (int, float)) else (2, str(v)) for v in row)


def assert_same(got, want, ordered, sql):
    if not ordered:
        got, want = sorted(got, key=_sort_key), sorted(want, key=_sort_key)
    assert len(got) == len(want), "%s: %d rows, DuckDB %d\n got %s\nwant %s" % (sql, len(got), len(want), got[:10], want[:10])
    for i, (g, w) in enumerate(zip(got, want)):
        assert len(g) == len(w) and all(_cell_eq(a, b) for a, b in zip(g, w)), \
            "%s: row %d: %r, DuckDB %r" % (sql, i, g, w)


def run_ours(conn, sql, params=None):
    cur = conn.cursor()
    try:
        if params is None:
            cur.execute(sql)
        else:
            cur.execute(sql, params)
        return cur.fetch_arrow_table()
    finally:
        cur.close()


# (sql, ordered). Each runs on flightd and on DuckDB over the same data.
D = SCHEMA + ".dense2d"
P = SCHEMA + ".pts"
L = SCHEMA + ".lookup"
STATEMENTS = [
    # projections
    ("SELECT * FROM %s" % D, False),
    ("SELECT x, y, a FROM %s" % D, False),
    ("SELECT a, x FROM %s" % D, False),
    ("SELECT b AS bee, x AS ex FROM %s" % D, False),
    ("SELECT * FROM %s" % P, False),
    ("SELECT s, k FROM %s" % P, False),
    ("SELECT n FROM %s" % P, False),
    ("SELECT * FROM %s" % L, False),
    ("SELECT * FROM sqltop", False),
    ("SELECT v FROM main.sqltop", False),
    ("SELECT x + y AS xy, a * 2 AS a2, b - 1 AS bm FROM %s" % D, False),
    ("SELECT k * 2, val + 1 FROM %s" % P, False),
    # WHERE on dimensions (pushed down)
    ("SELECT * FROM %s WHERE x = 7" % D, False),
    ("SELECT * FROM %s WHERE y = 29" % D, False),
    ("SELECT a FROM %s WHERE x = 3 AND y = 4" % D, False),
    ("SELECT x, y FROM %s WHERE x > 35" % D, False),
    ("SELECT x, y FROM %s WHERE x >= 35" % D, False),
    ("SELECT x, y FROM %s WHERE x < 2" % D, False),
    ("SELECT x, y FROM %s WHERE x <= 2" % D, False),
    ("SELECT x, y FROM %s WHERE 3 > x" % D, False),
    ("SELECT x, y, b FROM %s WHERE x BETWEEN 10 AND 12" % D, False),
    ("SELECT x, y, b FROM %s WHERE y BETWEEN 10 AND 12" % D, False),
    ("SELECT x, y FROM %s WHERE x IN (1, 5, 9)" % D, False),
    ("SELECT x, y FROM %s WHERE x IN (9, 1, 1)" % D, False),
    ("SELECT x, y FROM %s WHERE x = 1 OR x = 38" % D, False),
    ("SELECT x, y FROM %s WHERE (x = 1 AND y = 2) OR (x = 3 AND y = 4)" % D, False),
    ("SELECT x, y FROM %s WHERE x BETWEEN 5 AND 8 AND y BETWEEN 20 AND 22" % D, False),
    ("SELECT x, y FROM %s WHERE x > 2.5 AND x < 4.5 AND y = 0" % D, False),
    ("SELECT x FROM %s WHERE x = 2.5" % D, False),
    ("SELECT x, y FROM %s WHERE x > 100" % D, False),
    ("SELECT x, y FROM %s WHERE x <> 3 AND y = 0" % D, False),
    ("SELECT x, y FROM %s WHERE x != 3 AND y = 1" % D, False),
    ("SELECT x, y FROM %s WHERE x NOT IN (0, 1, 2) AND y = 0" % D, False),
    ("SELECT x, y FROM %s WHERE x NOT BETWEEN 3 AND 36 AND y = 5" % D, False),
    ("SELECT x, y FROM %s WHERE NOT (x > 2) AND y < 2" % D, False),
    ("SELECT k, t FROM %s WHERE k > 500" % P, False),
    ("SELECT k, t FROM %s WHERE k BETWEEN 30 AND 60" % P, False),
    ("SELECT k, t FROM %s WHERE k IN (0, 3, 4, 597)" % P, False),
    ("SELECT k, t FROM %s WHERE t < 10.5" % P, False),
    ("SELECT k, t FROM %s WHERE t >= 50 AND t <= 51.5" % P, False),
    ("SELECT k, t FROM %s WHERE t BETWEEN 90 AND 100" % P, False),
    ("SELECT k FROM %s WHERE k > 100 AND t < 50" % P, False),
    ("SELECT id FROM %s WHERE id >= 90" % L, False),
    ("SELECT i, v FROM sqltop WHERE i < 10", False),
    # WHERE on attributes and mixed (the engine evaluates what the scan cannot)
    ("SELECT x, y, a FROM %s WHERE a > 15" % D, False),
    ("SELECT x, y FROM %s WHERE b = 7" % D, False),
    ("SELECT x, y FROM %s WHERE b IN (1, 2, 3)" % D, False),
    ("SELECT x, y FROM %s WHERE b BETWEEN -5 AND 5 AND x < 10" % D, False),
    ("SELECT x, y FROM %s WHERE c < 0.1 OR c > 0.9" % D, False),
    ("SELECT x, y FROM %s WHERE x = 4 AND a > 10" % D, False),
    ("SELECT x, y FROM %s WHERE x = 4 OR b = 0" % D, False),
    ("SELECT k FROM %s WHERE n IS NULL" % P, False),
    ("SELECT k FROM %s WHERE n IS NOT NULL AND k < 100" % P, False),
    ("SELECT k, n FROM %s WHERE n > 10" % P, False),
    ("SELECT k, n FROM %s WHERE n = 3 OR n IS NULL" % P, False),
    ("SELECT k, s FROM %s WHERE s = 'alpha0'" % P, False),
    ("SELECT k, s FROM %s WHERE s IN ('beta1', 'gamma2')" % P, False),
    ("SELECT k, s FROM %s WHERE s LIKE 'del%%'" % P, False),
    ("SELECT k, s FROM %s WHERE s NOT LIKE '%%a%%'" % P, False),
    ("SELECT k, s FROM %s WHERE s > 'd'" % P, False),
    ("SELECT k FROM %s WHERE val > 1 AND k < 300" % P, False),
    ("SELECT k FROM %s WHERE NOT (val < 0)" % P, False),
    ("SELECT id, name FROM %s WHERE name = 'n42'" % L, False),
    # aggregates
    ("SELECT count(*) FROM %s" % D, False),
    ("SELECT count(*) FROM %s WHERE x < 5" % D, False),
    ("SELECT sum(b), min(b), max(b) FROM %s" % D, False),
    ("SELECT avg(a) FROM %s" % D, False),
    ("SELECT min(a), max(a), sum(a) FROM %s WHERE y = 3" % D, False),
    ("SELECT count(n), count(*), sum(n), min(n), max(n) FROM %s" % P, False),
    ("SELECT avg(val) FROM %s" % P, False),
    ("SELECT count(DISTINCT s) FROM %s" % P, False),
    ("SELECT min(s), max(s) FROM %s" % P, False),
    ("SELECT sum(v), count(*) FROM sqltop", False),
    ("SELECT count(*) FROM %s WHERE x > 100" % D, False),
    ("SELECT max(c) FROM %s" % D, False),
    # GROUP BY / HAVING
    ("SELECT x, sum(b) FROM %s GROUP BY x" % D, False),
    ("SELECT y, count(*), max(a) FROM %s WHERE x < 10 GROUP BY y" % D, False),
    ("SELECT x, avg(a) AS m FROM %s GROUP BY x HAVING m > 10" % D, False),
    ("SELECT x, count(*) FROM %s WHERE b > 0 GROUP BY x HAVING count(*) > 16" % D, False),
    ("SELECT s, count(*), sum(val) FROM %s GROUP BY s" % P, False),
    ("SELECT n, count(*) FROM %s GROUP BY n" % P, False),
    ("SELECT x %% 4 AS m, sum(b) FROM %s GROUP BY x %% 4" % D, False),
    ("SELECT s, max(k) FROM %s WHERE k > 300 GROUP BY s HAVING max(k) > 590" % P, False),
    ("SELECT v, count(*) FROM sqltop GROUP BY v", False),
    # DISTINCT
    ("SELECT DISTINCT s FROM %s" % P, False),
    ("SELECT DISTINCT n FROM %s WHERE k < 100" % P, False),
    ("SELECT DISTINCT x %% 3 FROM %s" % D, False),
    # ORDER BY / LIMIT / OFFSET
    ("SELECT x, y, a FROM %s ORDER BY a DESC LIMIT 10" % D, True),
    ("SELECT k, val FROM %s ORDER BY val LIMIT 5" % P, True),
    ("SELECT k, s FROM %s ORDER BY s, k" % P, True),
    ("SELECT x, y FROM %s ORDER BY x DESC, y ASC LIMIT 7" % D, True),
    ("SELECT k FROM %s ORDER BY k LIMIT 5 OFFSET 10" % P, True),
    ("SELECT i, v FROM sqltop ORDER BY v DESC, i LIMIT 12", True),
    ("SELECT x, sum(a) AS s FROM %s GROUP BY x ORDER BY s DESC LIMIT 3" % D, True),
    ("SELECT k FROM %s WHERE k < 50 ORDER BY k DESC" % P, True),
    ("SELECT x, y, a FROM %s WHERE x = 5 ORDER BY y LIMIT 4" % D, True),
    # expressions and functions
    ("SELECT k, CASE WHEN n IS NULL THEN -1 ELSE n END FROM %s" % P, False),
    ("SELECT k, coalesce(n, 0) + 1 FROM %s" % P, False),
    ("SELECT x, y, abs(b) FROM %s WHERE x = 2" % D, False),
    ("SELECT k, upper(s), length(s) FROM %s WHERE k < 30" % P, False),
    ("SELECT k, concat(s, '-', 'x') FROM %s WHERE k < 30" % P, False),
    ("SELECT k, substring(s, 1, 3) FROM %s WHERE k < 30" % P, False),
    ("SELECT x, y, round(a, 2) FROM %s WHERE y = 1" % D, False),
    ("SELECT x * 100 + y FROM %s WHERE x < 3" % D, False),
    ("SELECT k, k > 300 AS big FROM %s WHERE k < 10 OR k > 590" % P, False),
    # joins between arrays, subqueries, unions
    ("SELECT p.k, l.name FROM %s p JOIN %s l ON p.k = l.id" % (P, L), False),
    ("SELECT p.k, l.name, l.weight FROM %s p JOIN %s l ON p.k %% 100 = l.id WHERE p.k > 400" % (P, L), False),
    ("SELECT l.id, count(p.k) FROM %s l LEFT JOIN %s p ON p.k = l.id GROUP BY l.id" % (L, P), False),
    ("SELECT d.x, d.y, l.name FROM %s d JOIN %s l ON d.x = l.id WHERE d.y = 0" % (D, L), False),
    ("SELECT t.i, t.v, d.a FROM sqltop t JOIN %s d ON d.x = t.i AND d.y = t.v WHERE t.i < 30" % D, False),
    ("SELECT k FROM %s WHERE k IN (SELECT id FROM %s WHERE weight > 40)" % (P, L), False),
    ("SELECT id FROM %s WHERE id NOT IN (SELECT k FROM %s)" % (L, P), False),
    ("SELECT k AS z FROM %s WHERE k < 20 UNION ALL SELECT id FROM %s WHERE id < 10" % (P, L), False),
    ("SELECT count(*) FROM (SELECT x, y FROM %s WHERE a > 12) q" % D, False),
    ("SELECT x, (SELECT max(weight) FROM %s) FROM %s WHERE x = 0 AND y < 3" % (L, D), False),
]

# WHERE terms on attributes that become the scan's filter (FILTER_PUSHED:
# each is checked against DuckDB, and EXPLAIN must show the condition),
# then ones that must stay in the engine (three-valued logic the filter
# cannot express, constants a float column does not hold exactly).
FILTER_PUSHED = [
    ("SELECT x, y, a FROM %s WHERE a > 15 AND b < 0" % D, "attr('a') > 15.0"),
    ("SELECT x, y FROM %s WHERE NOT (b > 10)" % D, "attr('b') <= 10"),
    ("SELECT x, y FROM %s WHERE b NOT IN (1, 2, 3) AND x < 4" % D, "(attr('b') != 1) and (attr('b') != 2)"),
    ("SELECT x, y, b FROM %s WHERE b NOT BETWEEN -45 AND 45" % D, "(attr('b') <= -46) or (attr('b') >= 46)"),
    ("SELECT x, y FROM %s WHERE a >= 12.5 AND a < 13" % D, "attr('a') >= 12.5"),
    ("SELECT x, y, c FROM %s WHERE c < 0.5 AND c >= 0.25" % D, "attr('c') < 0.5"),
    ("SELECT x, y FROM %s WHERE b > 2.5 AND b < 4.5" % D, "(attr('b') >= 3) and (attr('b') <= 4)"),
    ("SELECT x, y FROM %s WHERE b = 2.5" % D, "attr('b') < -2147483648"),
    ("SELECT count(*) FROM %s WHERE b < 100000000000" % D, "attr('b') != None"),
    ("SELECT x, y FROM %s WHERE b = 7 OR (a > 20 AND c > 0.5)" % D, "(attr('b') == 7) or"),
    ("SELECT x, y FROM %s WHERE x < 3 AND NOT (b <> 4)" % D, "attr('b') == 4"),
    ("SELECT x, avg(a) FROM %s WHERE b >= 40 GROUP BY x" % D, "attr('b') >= 40"),
    ("SELECT k, n FROM %s WHERE n != 3" % P, "attr('n') != 3"),
    ("SELECT k, n FROM %s WHERE NOT (n = 3)" % P, "attr('n') != 3"),
    ("SELECT k, n FROM %s WHERE n NOT IN (1, 2, 3)" % P, "(attr('n') != 1) and"),
    ("SELECT k, n FROM %s WHERE n IN (1, NULL, 4)" % P, "(attr('n') == 1) or (attr('n') == 4)"),
    ("SELECT k FROM %s WHERE NOT (n IS NULL) AND n < 5" % P, "attr('n') != None"),
    ("SELECT k FROM %s WHERE NOT (n IS NULL OR n > 4)" % P, "(attr('n') != None) and (attr('n') <= 4)"),
    ("SELECT k, s FROM %s WHERE s <> 'alpha0'" % P, "attr('s') != 'alpha0'"),
    ("SELECT k, s FROM %s WHERE s >= 'beta' AND s < 'delta'" % P, "attr('s') >= 'beta'"),
    ("SELECT k, s FROM %s WHERE NOT (s IN ('beta1', 'eps4'))" % P, "(attr('s') != 'beta1') and (attr('s') != 'eps4')"),
    ("SELECT k FROM %s WHERE val BETWEEN -0.5 AND 0.5" % P, "(attr('val') >= -0.5) and (attr('val') <= 0.5)"),
    ("SELECT k, t FROM %s WHERE t <> 50.5 AND n = 7" % P, "attr('n') == 7"),
    ("SELECT s, count(*), sum(val) FROM %s WHERE n > 10 GROUP BY s" % P, "attr('n') >= 11"),
    ("SELECT id, name FROM %s WHERE name IN ('n02', 'n40', 'zz')" % L, "(attr('name') == 'n02') or"),
    ("SELECT i FROM sqltop WHERE v = 0 OR v > 28", "(attr('v') == 0) or (attr('v') >= 29)"),
    ("SELECT i, s, n, f FROM sqlt.dvar WHERE n > 15", "attr('n') >= 16"),
    ("SELECT i, s, n FROM sqlt.dvar WHERE s >= 'w150' OR n IS NULL", "(attr('s') >= 'w150') or (attr('n') == None)"),
    ("SELECT i, s FROM sqlt.dvar WHERE NOT (n < 20) AND f > 3.5", "attr('n') >= 20"),
    ("SELECT i, s, f FROM sqlt.dvar WHERE f IN (0.5, 2.125, 24.875) AND s <> 'w000'", "attr('f') == 2.125"),
    ("SELECT count(*), sum(n), min(s) FROM sqlt.dvar WHERE n != 3 AND i > 50", "attr('n') != 3"),
    # datetimes (ms and day attributes, a seconds dimension) and a string dimension
    ("SELECT name, v FROM sqlt.events WHERE ts >= '2021-03-01 12:00:05'", "attr('ts') >= 1614600005000"),
    ("SELECT v FROM sqlt.events WHERE ts < '2021-03-01 12:00:02.0005'", "attr('ts') <= 1614600002000"),
    ("SELECT v FROM sqlt.events WHERE ts = '2021-03-01 12:00:02.0005'", "attr('ts') < -9223372036854775808"),
    ("SELECT v, day FROM sqlt.events WHERE day = '2021-03-05'", "attr('day') == 18691"),
    ("SELECT v FROM sqlt.events WHERE day BETWEEN '2021-03-02' AND '2021-03-04 12:00:00'", "(attr('day') >= 18688) and (attr('day') <= 18690)"),
    ("SELECT v FROM sqlt.events WHERE NOT (day IN ('2021-03-01', '2021-03-09'))", "(attr('day') != 18687) and (attr('day') != 18695)"),
    ("SELECT name, v FROM sqlt.events WHERE name = 'b3'", "dim('name') == 'b3'"),
    ("SELECT name, v FROM sqlt.events WHERE name IN ('a0', 'c2', 'zz') OR v > 55", "(dim('name') == 'a0') or"),
    ("SELECT count(*), max(v) FROM sqlt.events WHERE name >= 'c' AND name < 'd'", "dim('name') >= 'c'"),
]
# Range terms on datetime dimensions become the subarray (ticks of the unit).
RANGE_PUSHED = [
    ("SELECT name, t FROM sqlt.events WHERE NOT (t > '2021-01-01 00:01:00')", '"t":[[1609459200,1609459260]]'),
    ("SELECT d, v FROM sqlt.ddt WHERE d BETWEEN '2021-02-01' AND '2021-02-10'", '"d":[[18659,18668]]'),
    ("SELECT d, v FROM sqlt.ddt WHERE d > '2021-03-15 12:00:00'", '"d":[[18702,18717]]'),
    ("SELECT d FROM sqlt.ddt WHERE d <> '2021-01-05' AND v < 10", '"d":[[18628,18631],[18633,18717]]'),
    ("SELECT count(*), sum(v) FROM sqlt.ddt WHERE d < '2021-01-11'", '"d":[[18628,18637]]'),
]
FILTER_KEPT = [
    "SELECT k, n FROM %s WHERE n NOT IN (1, NULL)" % P,
    "SELECT x, y FROM %s WHERE c < 0.1 OR c > 0.9" % D,
    "SELECT x, y FROM %s WHERE c = 0.3" % D,
    "SELECT k FROM %s WHERE s LIKE '%%5'" % P,
    "SELECT x, y FROM %s WHERE a > b" % D,
]
# Whole-table aggregates the reader answers (EXPLAIN says so), and ones it
# must not (a dense array with a filter: TileDB's dense count counts the
# failing cells).
AGG_NATIVE = [
    "SELECT count(*), sum(b), min(b), max(b), avg(b) FROM %s" % D,
    "SELECT count(*), sum(a), min(c), max(c), avg(c) FROM %s WHERE x < 5" % D,
    "SELECT count(*) AS cnt, sum(b) AS s FROM %s WHERE x BETWEEN 3 AND 7 AND y > 20" % D,
    "SELECT count(n), count(*), sum(n), min(n), max(n), avg(n) FROM %s" % P,
    "SELECT count(n), sum(n), avg(val), min(val), max(val) FROM %s WHERE n > 5" % P,
    "SELECT count(*), count(n), sum(n), min(n), avg(n) FROM %s WHERE n > 100" % P,
    "SELECT count(*), max(k), min(t) FROM %s WHERE k < 300 AND s >= 'd'" % P,
    "SELECT sum(v), count(*) FROM sqltop",
    "SELECT count(*) * 2, max(weight) - min(weight) FROM %s" % L,
    "SELECT count(*), count(n), sum(n), min(n), max(f), avg(f) FROM sqlt.dvar",
    "SELECT count(n), sum(n), avg(n) FROM sqlt.dvar WHERE i BETWEEN 10 AND 60",
]
AGG_ENGINE = [
    "SELECT count(*), sum(b) FROM %s WHERE a > 15" % D,
    "SELECT count(DISTINCT n) FROM %s" % P,
    "SELECT min(s), max(s) FROM %s" % P,
]
STATEMENTS = STATEMENTS + [(q, False) for q, _ in FILTER_PUSHED] + [(q, False) for q, _ in RANGE_PUSHED] + [(q, False) for q in FILTER_KEPT] + \
    [(q, False) for q in AGG_NATIVE] + [(q, False) for q in AGG_ENGINE]


@pytest.mark.parametrize("sql,ordered", STATEMENTS, ids=[s for s, _ in STATEMENTS])
def test_statement_matches_duckdb(env, sql, ordered):
    conn, duck, _ = env
    got = _rows(run_ours(conn, sql))
    want = [tuple(_norm(v) for v in r) for r in duck.execute(sql).fetchall()]
    assert_same(got, want, ordered, sql)


def test_statement_count():
    assert len(STATEMENTS) >= 100


PARAMS = [
    ("SELECT x, y FROM %s WHERE x = ? AND y < ?" % D, (3, 5)),
    ("SELECT k, s FROM %s WHERE s = ?" % P, ("gamma2",)),
    ("SELECT k FROM %s WHERE val > ? AND k BETWEEN ? AND ?" % P, (0.5, 100, 400)),
    ("SELECT count(*) FROM %s WHERE n IS NULL OR n > ?" % P, (15,)),
    ("SELECT x, sum(a) FROM %s WHERE y = ? GROUP BY x" % D, (7,)),
]


@pytest.mark.parametrize("sql,params", PARAMS, ids=[s for s, _ in PARAMS])
def test_parameters_match_duckdb(env, sql, params):
    conn, duck, _ = env
    got = _rows(run_ours(conn, sql, params))
    want = [tuple(_norm(v) for v in r) for r in duck.execute(sql, params).fetchall()]
    assert_same(got, want, False, sql)


def test_quoted_path_and_schema_forms(env):
    conn, duck, _ = env
    want = _rows(run_ours(conn, "SELECT * FROM sqlt.dense2d WHERE x = 1"))
    for form in ['"sqlt/dense2d"', '"sqlt"."dense2d"', "SQLT.DENSE2D", "sqlt.\"dense2d\""]:
        assert _rows(run_ours(conn, "SELECT * FROM %s WHERE x = 1" % form)) == want, form
    assert len(want) == 30


def test_pushdown_streams_native_types(env):
    conn, _, _ = env
    t = run_ours(conn, "SELECT x, a, c FROM sqlt.dense2d WHERE x = 1 LIMIT 5")
    assert t.num_rows == 5
    assert t.schema.field("x").type == pa.int32()
    assert t.schema.field("c").type == pa.float32()
    t = run_ours(conn, "SELECT s, n FROM sqlt.pts WHERE k < 10")
    assert t.schema.field("s").type == pa.large_string()
    assert t.schema.field("n").type == pa.int32() and t.column("n").null_count >= 1


def test_explain_shows_pushdown(env):
    conn, _, _ = env
    plan = "\n".join(run_ours(conn, "EXPLAIN SELECT a FROM sqlt.dense2d WHERE x BETWEEN 2 AND 3 LIMIT 4").column(0).to_pylist())
    assert '"subarray":{"x":[[2,3]]}' in plan and '"limit":4' in plan and '"columns":["a"]' in plan, plan
    plan = "\n".join(run_ours(conn, "EXPLAIN SELECT s, count(*) FROM sqlt.pts WHERE k > 500 AND val > 0 GROUP BY s").column(0).to_pylist())
    assert '"subarray":{"k":[[501,597]]}' in plan and "SQL engine" in plan, plan


def _explain(conn, sql):
    return "\n".join(run_ours(conn, "EXPLAIN " + sql).column(0).to_pylist())


@pytest.mark.parametrize("sql,cond", FILTER_PUSHED, ids=[s for s, _ in FILTER_PUSHED])
def test_explain_shows_pushed_filter(env, sql, cond):
    conn, _, _ = env
    plan = _explain(conn, sql)
    assert '"filter":"' in plan and cond in plan, plan


@pytest.mark.parametrize("sql,sub", RANGE_PUSHED, ids=[s for s, _ in RANGE_PUSHED])
def test_explain_shows_datetime_ranges(env, sql, sub):
    conn, _, _ = env
    plan = _explain(conn, sql)
    assert sub in plan, plan


@pytest.mark.parametrize("sql", FILTER_KEPT)
def test_explain_keeps_inexact_terms_in_engine(env, sql):
    conn, _, _ = env
    plan = _explain(conn, sql)
    assert '"filter"' not in plan and "Filter" in plan, plan


@pytest.mark.parametrize("sql", AGG_NATIVE)
def test_explain_shows_native_aggregates(env, sql):
    conn, _, _ = env
    plan = _explain(conn, sql)
    assert "answered by the reader" in plan and '"aggregates":' in plan, plan


@pytest.mark.parametrize("sql", AGG_ENGINE)
def test_explain_engine_aggregates(env, sql):
    conn, _, _ = env
    plan = _explain(conn, sql)
    assert "answered by the reader" not in plan and "GroupBy" in plan, plan


def test_aggregate_types_stay_stable(env):
    """Native aggregates give the types the engine gave: COUNT BIGINT, MIN/MAX
    the column's type, SUM/AVG DOUBLE for non-decimal columns."""
    conn, _, _ = env
    t = run_ours(conn, "SELECT count(*), sum(b), min(b), max(c), avg(a) FROM sqlt.dense2d")
    assert [f.type for f in t.schema] == [pa.int64(), pa.int32(), pa.int32(), pa.float32(), pa.float64()] or \
        t.schema.field(0).type == pa.int64(), t.schema
    eng = run_ours(conn, "SELECT count(*), sum(b), min(b), max(c), avg(a) FROM sqlt.dense2d WHERE a > -1000")
    assert "answered by the reader" in _explain(conn, "SELECT count(*), sum(b), min(b), max(c), avg(a) FROM sqlt.dense2d")
    assert "answered by the reader" not in _explain(conn, "SELECT count(*), sum(b), min(b), max(c), avg(a) FROM sqlt.dense2d WHERE a > -1000")
    assert t.schema == eng.schema, (t.schema, eng.schema)
    assert _rows(t) == _rows(eng) or all(_cell_eq(a, b) for a, b in zip(_rows(t)[0], _rows(eng)[0]))


def test_pushed_parameters(env):
    conn, duck, _ = env
    for sql, params in [("SELECT k, n FROM sqlt.pts WHERE n > ? AND s <> ?", (7, "alpha0")),
                        ("SELECT x, y FROM sqlt.dense2d WHERE b BETWEEN ? AND ?", (-3, 3)),
                        ("SELECT count(*), sum(n) FROM sqlt.pts WHERE n < ?", (12,))]:
        got = _rows(run_ours(conn, sql, params))
        want = [tuple(_norm(v) for v in r) for r in duck.execute(sql, params).fetchall()]
        assert_same(got, want, False, sql)


def _err(conn, sql):
    with pytest.raises(adbc_driver_manager.Error) as e:
        run_ours(conn, sql)
    return e.value


def test_errors(env):
    conn, _, _ = env
    e = _err(conn, "SELEC x FROM sqlt.dense2d")
    assert "INVALID_ARGUMENT" in str(e) or isinstance(e, adbc_driver_manager.ProgrammingError), e
    assert "position" in str(e), e
    e = _err(conn, "DELETE FROM sqlt.dense2d")
    assert isinstance(e, adbc_driver_manager.NotSupportedError) and "supported" in str(e), e
    # INSERT writes sparse arrays only: a dense one takes a subarray
    e = _err(conn, "INSERT INTO sqlt.dense2d VALUES (1, 2, 3.0, 4, 5.0)")
    assert isinstance(e, adbc_driver_manager.NotSupportedError) and "adbc_ingest" in str(e), e
    e = _err(conn, "SELECT * FROM sqlt.nosuch")
    assert "NOT_FOUND" in str(e) or "nosuch" in str(e), e
    e = _err(conn, "SELECT nosuch FROM sqlt.dense2d")
    assert "nosuch" in str(e), e


def test_catalog(env):
    conn, _, _ = env
    objs = conn.adbc_get_objects(depth="all", catalog_filter="tileflight").read_all().to_pylist()
    assert [o["catalog_name"] for o in objs] == ["tileflight"]
    schemas = {s["db_schema_name"]: s for s in objs[0]["catalog_db_schemas"]}
    assert "main" in schemas and SCHEMA in schemas
    tables = {t["table_name"]: t for t in schemas[SCHEMA]["db_schema_tables"]}
    assert {"dense2d", "pts", "lookup"} <= set(tables)
    assert tables["dense2d"]["table_type"] == "ARRAY"
    cols = [c["column_name"] for c in tables["dense2d"]["table_columns"]]
    assert cols == ["x", "y", "a", "b", "c"]
    assert "sqltop" in {t["table_name"] for t in schemas["main"]["db_schema_tables"]}
    sc = conn.adbc_get_table_schema("pts", db_schema_filter=SCHEMA)
    assert sc.names == ["k", "t", "s", "n", "val"]
    assert sc.field("s").type == pa.large_string() and sc.field("t").type == pa.float64()
    types = conn.adbc_get_table_types()
    assert set(types) == {"ARRAY", "B2ND"}
    info = conn.adbc_get_info()
    assert info.get("vendor_name") == "tileflight", info


def test_ingest(env):
    conn, _, daemon = env
    data = pa.table({"k": pa.array([5, 1, 3], pa.int64()), "s": ["five", "one", "three"], "v": [5.5, 1.5, 3.5]})
    cur = conn.cursor()
    try:
        n = cur.adbc_ingest("ing_sparse", data, mode="append", db_schema_name=SCHEMA)
        assert n in (3, -1)
        got = tiledb_table(os.path.join(daemon.data, SCHEMA, "ing_sparse")).sort_by("k").to_pydict()
        assert got == {"k": [1, 3, 5], "s": ["one", "three", "five"], "v": [1.5, 3.5, 5.5]}
        # dense: every cell of the domain, row-major (as a DoPut without a subarray)
        n = cur.adbc_ingest("ing_dense", pa.table({"v": pa.array(range(10, 20), pa.int32())}), mode="append",
                            db_schema_name=SCHEMA)
        with tiledb.open(os.path.join(daemon.data, SCHEMA, "ing_dense")) as A:
            assert A[:]["v"].tolist() == list(range(10, 20))
        # ingested rows are visible to SQL at once
        t = run_ours(conn, "SELECT k, s FROM sqlt.ing_sparse ORDER BY k")
        assert t.column("k").to_pylist() == [1, 3, 5]
        # refused: a bad column (nothing written), creating a table, replacing
        with pytest.raises(adbc_driver_manager.Error) as e:
            cur.adbc_ingest("ing_sparse", pa.table({"k": [9], "bogus": [1]}), mode="append", db_schema_name=SCHEMA)
        assert "bogus" in str(e.value)
        with pytest.raises(adbc_driver_manager.Error) as e:
            cur.adbc_ingest("ing_sparse", data, mode="replace", db_schema_name=SCHEMA)
        assert "replace" in str(e.value)
        with pytest.raises(adbc_driver_manager.Error) as e:
            cur.adbc_ingest("ing_sparse", data, mode="create", db_schema_name=SCHEMA)
        assert "exists" in str(e.value)
        assert tiledb_table(os.path.join(daemon.data, SCHEMA, "ing_sparse")).num_rows == 3
    finally:
        cur.close()


def test_ingest_creates_tables(env):
    """mode="create" / "create_append" / "replace" of a missing table make a
    sparse array numbered by _rowid from the Arrow schema; TileDB reads it."""
    conn, duck, daemon = env
    t1 = pa.table({"name": pa.array(["a", None, "ccc"], pa.string()), "score": pa.array([0.5, 1.5, None], pa.float64()),
                   "n": pa.array([1, 2, 3], pa.int32()), "flag": [True, False, True],
                   "ts": pa.array([0, 1_000_000, 2_000_000], pa.timestamp("us"))})
    t2 = pa.table({"name": ["d"], "score": [4.5], "n": pa.array([4], pa.int32()), "flag": [False],
                   "ts": pa.array([3_000_000], pa.timestamp("us"))})
    cur = conn.cursor()
    try:
        assert cur.adbc_ingest("made", t1, mode="create", db_schema_name=SCHEMA) in (3, -1)
        assert cur.adbc_ingest("made", t2, mode="create_append", db_schema_name=SCHEMA) in (1, -1)
        assert cur.adbc_ingest("made_r", t2, mode="replace", db_schema_name=SCHEMA) in (1, -1)
        with pytest.raises(adbc_driver_manager.Error) as e:
            cur.adbc_ingest("made", t2, mode="create", db_schema_name=SCHEMA)
        assert "exists" in str(e.value)
    finally:
        cur.close()
    uri = os.path.join(daemon.data, SCHEMA, "made")
    with tiledb.open(uri) as A:
        assert A.schema.sparse and A.schema.domain.dim(0).name == "_rowid"
        assert [A.schema.attr(i).name for i in range(A.schema.nattr)] == ["name", "score", "n", "flag", "ts"]
        assert A.schema.attr("name").isnullable and A.schema.attr("ts").dtype == np.dtype("datetime64[us]")
    got = tiledb_table(uri).sort_by("_rowid").to_pydict()
    assert got["_rowid"] == [0, 1, 2, 3]
    assert got["name"] == ["a", None, "ccc", "d"] and got["n"] == [1, 2, 3, 4]
    assert got["score"][0] == 0.5 and got["score"][2] is None and got["score"][3] == 4.5
    assert [bool(v) for v in got["flag"]] == [True, False, True, False]
    t = run_ours(conn, "SELECT name, n FROM sqlt.made WHERE n > 1 ORDER BY _rowid")
    assert t.column("name").to_pylist() == [None, "ccc", "d"]
    assert tiledb_table(os.path.join(daemon.data, SCHEMA, "made_r")).to_pydict()["name"] == ["d"]


# INSERTs run on flightd (ADBC cursor.execute, rowcount) and on DuckDB in
# this order, over the same data; the arrays are then compared as TileDB
# reads them. They read other arrays and the target itself, leave nullable
# attributes out, and take VALUES with literals and expressions.
INSERTS = [
    "INSERT INTO sqlt.ins SELECT k + 1000, t, s, n, val * 2 FROM sqlt.pts WHERE n > 5",
    "INSERT INTO sqlt.ins (k, t, val, s) SELECT k + 5000, t, val, s FROM sqlt.pts WHERE k < 30",
    "INSERT INTO sqlt.ins (s, k, t, n, val) SELECT s, MIN(k) + 30000, 0.5, COUNT(*), SUM(val) FROM sqlt.pts GROUP BY s",
    "INSERT INTO sqlt.ins VALUES (99999, 1.5, 'x', NULL, -2.25), (99998, 2.5, 'y', 7, 0), (99997, 3 * 2, 'z', 1 + 1, 1e3)",
    "INSERT INTO sqlt.ins SELECT k + 50000, t, s, n, val FROM sqlt.ins WHERE k < 6000",
    "INSERT INTO sqlt.ins SELECT k + 60000, t, s, n, val FROM sqlt.pts WHERE k > 100000",
]


def _ins_rows(daemon):
    return _rows(tiledb_table(os.path.join(daemon.data, SCHEMA, "ins")))


def test_insert_matches_duckdb(env):
    conn, duck, daemon = env
    duck.execute("CREATE TABLE sqlt.ins (k BIGINT, t DOUBLE, s VARCHAR, n INTEGER, val DOUBLE)")
    cur = conn.cursor()
    try:
        for sql in INSERTS:
            cur.execute(sql)
            want_n = duck.execute(sql).fetchall()[0][0]
            assert cur.rowcount == want_n, "%s: %d rows, DuckDB %d" % (sql, cur.rowcount, want_n)
            assert cur.fetchall() == []
            got = _ins_rows(daemon)
            assert_same(got, [tuple(_norm(v) for v in r) for r in duck.execute("SELECT * FROM sqlt.ins").fetchall()],
                        False, sql)
        # prepared, several parameter rows: one atomic write (executemany)
        sql = "INSERT INTO sqlt.ins (k, t, s, val) VALUES (?, ?, ?, ?)"
        params = [(70000, 1.0, "p", 1.0), (70001, 2.0, "r", 2.5), (70002, 3.0, "q", -1.0)]
        cur.executemany(sql, params)
        assert cur.rowcount == 3
        duck.executemany(sql, params)
        # SQL sees the new rows at once, TileDB reads them
        assert run_ours(conn, "SELECT COUNT(*) FROM sqlt.ins WHERE k BETWEEN 70000 AND 70002").column(0).to_pylist() == [3]
        assert_same(_ins_rows(daemon), [tuple(_norm(v) for v in r) for r in duck.execute("SELECT * FROM sqlt.ins").fetchall()],
                    False, sql)
        before = _ins_rows(daemon)
        # refused, nothing written: a value that does not fit int32 (late in
        # the rows), a missing non-nullable attribute, a fraction for k
        for bad, code, word in [
                ("INSERT INTO sqlt.ins SELECT k + 80000, t, s, CASE WHEN k > 500 THEN 3000000000 ELSE 1 END, val FROM sqlt.pts",
                 adbc_driver_manager.ProgrammingError, '"n"'),
                ("INSERT INTO sqlt.ins (k, t, s) VALUES (80000, 1, 'a')", adbc_driver_manager.ProgrammingError, '"val"'),
                ("INSERT INTO sqlt.ins VALUES (1.5, 1, 'a', 1, 1)", adbc_driver_manager.ProgrammingError, '"k"')]:
            with pytest.raises(adbc_driver_manager.Error) as e:
                cur.execute(bad)
            assert isinstance(e.value, code) and word in str(e.value), (bad, e.value)
        assert _ins_rows(daemon) == before
    finally:
        cur.close()


def test_json_protocol_still_served(env):
    import json as _json
    import pyarrow.flight as fl
    _, _, daemon = env
    c = daemon.client()
    t = c.do_get(fl.Ticket(_json.dumps({"array": "sqlt/lookup"}).encode())).read_all()
    assert t.num_rows == 50


# ---- the Flight SQL JDBC driver (Java) and Spark's JDBC source ----

import shutil  # noqa: E402
import subprocess  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# The JDBC check program and driver come from conftest.py's jdbc_jars
# fixture (shared with the Spark session, which puts the driver on its
# classpath).
from conftest import JAVA_OPTS  # noqa: E402


def _jdbc_url(daemon):
    return "jdbc:arrow-flight-sql://%s?useEncryption=false" % daemon.url.replace("grpc://", "")


def test_jdbc_driver(env, jdbc_jars):
    conn, duck, daemon = env
    queries = [
        "SELECT count(*) FROM sqlt.dense2d WHERE x < 5",
        "SELECT x, y, b FROM sqlt.dense2d WHERE x = 3 ORDER BY y LIMIT 3",
        "SELECT k, s, n FROM sqlt.pts WHERE k < 20 ORDER BY k",
        "SELECT s, count(*) FROM sqlt.pts GROUP BY s ORDER BY s LIMIT 4",
        'SELECT "x", "a" FROM "sqlt"."dense2d" WHERE "y" = 7 ORDER BY "x" LIMIT 2',
        "PREPARED:SELECT k, s FROM sqlt.pts WHERE k < ? ORDER BY k|10",
        "SELEC 1",
        # INSERTs through executeUpdate, as DBeaver runs them
        "UPDATE:INSERT INTO sqlt.ins SELECT k + 40000, t, s, n, val FROM sqlt.pts WHERE k < 30",
        "PREPARED_UPDATE:INSERT INTO sqlt.ins (k, t, s, val) VALUES (?, 1.5, 'j', 2)|90000|90001",
        "SELECT k, t, s, n, val FROM sqlt.ins WHERE k BETWEEN 40000 AND 40029 OR k IN (90000, 90001) ORDER BY k",
        "UPDATE:INSERT INTO sqlt.dense2d VALUES (1, 2, 3.0, 4, 5.0)",
    ]
    out = subprocess.run(["java", *JAVA_OPTS, "-cp", os.pathsep.join(jdbc_jars), "JdbcCheck", _jdbc_url(daemon),
                          SCHEMA, "dense2d", *queries], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    facts = dict(line.split("\t", 1) for line in out.stdout.splitlines() if "\t" in line)
    assert facts["product"] == "tileflight" and facts["quote"] == '"'
    assert facts["catalogs"] == "tileflight"
    assert set(facts["schemas"].split(",")) >= {"main", SCHEMA}
    assert set(facts["table_types"].split(",")) == {"ARRAY", "B2ND"}
    assert {"dense2d", "pts", "lookup"} <= set(facts["tables"].split(","))
    assert facts["columns"] == "x:INTEGER,y:INTEGER,a:DOUBLE,b:INTEGER,c:FLOAT"
    assert facts["primary_keys"] == "x,y"

    def duck_rows(sql, params=None):
        rows = duck.execute(sql.replace("?", "$1") if params else sql, params or []).fetchall()
        return ";".join("|".join("NULL" if v is None else str(v) for v in r) for r in rows)

    assert facts["query0"] == duck_rows(queries[0])
    assert facts["query1"] == duck_rows(queries[1])
    assert facts["query2"] == duck_rows(queries[2])
    assert facts["query3"] == duck_rows(queries[3])
    assert facts["query4"].split(";")[0].split("|")[0] == "0" and len(facts["query4"].split(";")) == 2
    assert facts["query5"] == duck_rows("SELECT k, s FROM sqlt.pts WHERE k < 10 ORDER BY k")
    assert facts["query6"].startswith("ERROR") and "position" in facts["query6"], facts["query6"]
    assert facts["query7"] == "updated 10", facts["query7"]
    assert facts["query8"] == "updated 2", facts["query8"]
    want = duck_rows("SELECT k + 40000, t, s, n, val FROM sqlt.pts WHERE k < 30 ORDER BY k")
    assert facts["query9"] == want + ";90000|1.5|j|NULL|2.0;90001|1.5|j|NULL|2.0", facts["query9"]
    assert facts["query10"].startswith("ERROR") and "dense" in facts["query10"], facts["query10"]


def test_spark_jdbc_source(env, spark):
    """Spark reads an array through spark.read.jdbc with the Flight SQL
    driver (the shared local SparkSession of conftest.py, which has the
    driver on its classpath); Spark's pushed WHERE lands as SQL."""
    conn, duck, daemon = env
    if not shutil.which("java"):
        pytest.fail("Java is needed for Spark")
    props = {"driver": "org.apache.arrow.driver.jdbc.ArrowFlightJdbcDriver"}
    df = spark.read.jdbc(_jdbc_url(daemon), "sqlt.pts", properties=props)
    assert df.columns == ["k", "t", "s", "n", "val"]
    # Spark pushes the filter into its SQL: WHERE ("n" IS NULL) AND ("k" < 300)
    got = sorted((r.k, r.s) for r in df.filter("n IS NULL AND k < 300").select("k", "s").collect())
    want = sorted(duck.execute("SELECT k, s FROM sqlt.pts WHERE n IS NULL AND k < 300").fetchall())
    assert got == want and len(want) > 10


def test_tokens(env, flightd_bin):  # noqa: F811
    """Flight SQL calls pass the service's token check: no token is
    Unauthenticated, a read-only token reads but may not ingest."""
    from flightd_fixture import running
    _, _, daemon = env
    with running(flightd_bin, daemon.data, env={"TILEFLIGHT_TOKENS": "rtok ro, wtok rw"}) as d:
        with pytest.raises(adbc_driver_manager.Error) as e:
            with adbc_flightsql.connect(d.url) as c:
                run_ours(c, "SELECT count(*) FROM sqlt.lookup")
        assert "UNAUTHENTICATED" in str(e.value) or "Unauthenticated" in str(e.value), e.value
        hdr = "adbc.flight.sql.authorization_header"
        with adbc_flightsql.connect(d.url, db_kwargs={hdr: "Bearer rtok"}) as c:
            assert run_ours(c, "SELECT count(*) FROM sqlt.lookup").column(0).to_pylist() == [50]
            cur = c.cursor()
            with pytest.raises(adbc_driver_manager.Error) as e:
                cur.adbc_ingest("ing_sparse", pa.table({"k": [77], "s": ["x"], "v": [1.0]}), mode="append",
                                db_schema_name=SCHEMA)
            with pytest.raises(adbc_driver_manager.Error) as e2:
                cur.execute("INSERT INTO sqlt.ing_sparse VALUES (77, 'x', 1.0)")
            cur.close()
            assert "read-only" in str(e.value), e.value
            assert "read-only" in str(e2.value) and "PermissionDenied" in str(e2.value), e2.value
        with adbc_flightsql.connect(d.url, db_kwargs={hdr: "Bearer wtok"}) as c:
            assert run_ours(c, "SELECT count(*) FROM sqlt.pts").column(0).to_pylist() == [200]


def test_b2nd_table(env):
    """A Blosc2 NDArray is a table of type B2ND (dim0.., value), read by
    python-blosc2 as the reference."""
    import blosc2
    conn, _, daemon = env
    path = os.path.join(daemon.data, SCHEMA, "grid.b2nd")
    if not os.path.exists(path):
        blosc2.asarray(np.arange(60, dtype=np.float64).reshape(6, 10) * 0.5, urlpath=path, mode="w",
                       chunks=(3, 5), blocks=(1, 5))
    ref = blosc2.open(path)[:]
    t = run_ours(conn, 'SELECT dim0, dim1, value FROM sqlt."grid.b2nd" WHERE dim0 = 2 ORDER BY dim1')
    assert t.column("value").to_pylist() == ref[2, :].tolist()
    t = run_ours(conn, 'SELECT sum(value), count(*) FROM "sqlt/grid.b2nd" WHERE dim1 BETWEEN 3 AND 6')
    assert t.column(0).to_pylist() == [float(ref[:, 3:7].sum())] and t.column(1).to_pylist() == [24]
    types = {r["table_name"]: r["table_type"]
             for s in conn.adbc_get_objects(depth="tables", catalog_filter="tileflight").read_all().to_pylist()[0]["catalog_db_schemas"]
             for r in s["db_schema_tables"]}
    assert types["grid.b2nd"] == "B2ND" and types["dense2d"] == "ARRAY"
