"""The SQL dialect of docs/sql.md, run as its readers would: every ```sql
example of the page runs through ADBC (adbc-driver-flightsql) and through the
Flight SQL JDBC driver, and each answer must equal DuckDB's for the same text
over the same data (the arrays written by the tiledb package, read back by
tiledb into Arrow and loaded into DuckDB under the same schema.table names).
Every ```sql-error example must be refused with INVALID_ARGUMENT. The page and
the tests cannot drift apart: the tests are the page's examples."""

import datetime
import decimal
import math
import os
import re
import subprocess

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import tiledb

adbc_flightsql = pytest.importorskip("adbc_driver_flightsql.dbapi")
import adbc_driver_manager  # noqa: E402

from conftest import JAVA_OPTS  # noqa: E402
from flightd_fixture import flightd, flightd_bin  # noqa: E402,F401

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(os.path.dirname(HERE), "docs", "sql.md")
SCHEMA = "dial"
STATIONS = ["North", "SOUTH-east", "west", "Northwest"]


def examples(kind):
    """The fenced blocks of docs/sql.md whose info string is kind."""
    text = open(DOC, encoding="utf-8").read()
    return [b.strip() for b in re.findall(r"^```%s\n(.*?)^```" % re.escape(kind), text, re.M | re.S)]


def _readings(uri):
    dom = tiledb.Domain(tiledb.Dim("id", domain=(0, 1000), tile=16, dtype=np.int64))
    sch = tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("station", dtype=str, var=True), tiledb.Attr("sid", dtype=np.int64),
        tiledb.Attr("t", dtype=np.dtype("datetime64[us]")), tiledb.Attr("temp", dtype=np.float64),
        tiledb.Attr("rain", dtype=np.int32)])
    tiledb.Array.create(uri, sch)
    rng = np.random.default_rng(24)
    ids = np.arange(48, dtype=np.int64)
    t = np.datetime64("2024-03-01T00:00:00", "us") + (ids * (7 * 3600 + 13 * 60 + 5)).astype("timedelta64[s]")
    # Temperatures with a fraction away from .5: a cast to an integer
    # rounds them the same in every engine.
    temp = np.round(rng.normal(12, 6, len(ids)), 1)
    temp[np.isclose(np.abs(temp) % 1, 0.5)] += 0.1
    with tiledb.open(uri, "w") as A:
        A[ids] = {"station": np.array([STATIONS[i % 4] for i in ids], dtype=object), "sid": ids % 4 + 1,
                  "t": t, "temp": temp, "rain": rng.integers(0, 9, len(ids)).astype(np.int32)}


def _stations(uri):
    dom = tiledb.Domain(tiledb.Dim("sid", domain=(1, 100), tile=10, dtype=np.int64))
    sch = tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("name", dtype=str, var=True), tiledb.Attr("elevation", dtype=np.float64)])
    tiledb.Array.create(uri, sch)
    with tiledb.open(uri, "w") as A:
        A[np.arange(1, 5, dtype=np.int64)] = {"name": np.array(STATIONS, dtype=object),
                                               "elevation": np.array([120.0, 5.5, 830.0, 42.0])}


def tiledb_table(uri):
    """The whole (sparse) array as TileDB reads it, dimensions first."""
    with tiledb.open(uri) as A:
        names = [A.schema.domain.dim(i).name for i in range(A.schema.domain.ndim)]
        names += [A.schema.attr(i).name for i in range(A.schema.nattr)]
        res = A[:]
        return pa.table({n: pa.array(list(res[n]) if res[n].dtype == object else res[n]) for n in names})


@pytest.fixture(scope="module")
def env(flightd):
    os.makedirs(os.path.join(flightd.data, SCHEMA), exist_ok=True)
    duck = duckdb.connect()
    duck.execute("CREATE SCHEMA %s" % SCHEMA)
    for name, mk in [("readings", _readings), ("stations", _stations)]:
        uri = os.path.join(flightd.data, SCHEMA, name)
        if not os.path.exists(uri):
            mk(uri)
        tbl = tiledb_table(uri)  # noqa: F841 (DuckDB reads it by name)
        duck.execute("CREATE TABLE %s.%s AS SELECT * FROM tbl" % (SCHEMA, name))
    conn = adbc_flightsql.connect(flightd.url)
    try:
        yield conn, duck, flightd
    finally:
        conn.close()
        duck.close()


def norm(v):
    """A value as both engines' answers can be compared: numbers as floats
    (DuckDB's INTEGER and DECIMAL against the engine's BIGINT and DOUBLE),
    timestamps and dates as ISO text, the rest as text."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float, decimal.Decimal, np.integer, np.floating)):
        return float(v)
    if isinstance(v, datetime.datetime):
        return v.replace(tzinfo=None).isoformat()
    if isinstance(v, datetime.date):
        return v.isoformat()
    return str(v)


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def assert_rows(sql, got, want):
    assert len(got) == len(want), "%s\nflightd: %r\nDuckDB:  %r" % (sql, got, want)
    for g, w in zip(got, want):
        assert len(g) == len(w) and all(same(x, y) for x, y in zip(g, w)), \
            "%s\nflightd: %r\nDuckDB:  %r" % (sql, got, want)


def duck_rows(duck, sql):
    return [tuple(norm(v) for v in r) for r in duck.execute(sql).fetchall()]


def test_doc_has_every_construct():
    text = " ".join(examples("sql")).lower()
    for construct in ['"id"', "::", "cast(", "ilike", "not ilike", "median(", "date_trunc(", "quantile_cont(",
                      "quantile_disc(", "percentile_cont(", "within group", "filter (where", "offset",
                      "string_agg(", "||", "join", "information_schema.tables", "information_schema.columns"]:
        assert construct in text, "docs/sql.md has no example of " + construct


@pytest.mark.parametrize("sql", examples("sql"))
def test_example_adbc(env, sql):
    conn, duck, _ = env
    with conn.cursor() as cur:
        cur.execute(sql)
        got = [tuple(norm(v) for v in r) for r in cur.fetchall()]
    assert_rows(sql, got, duck_rows(duck, sql))


@pytest.mark.parametrize("sql", examples("sql-error"))
def test_refused_adbc(env, sql):
    conn, _, _ = env
    with conn.cursor() as cur, pytest.raises(adbc_driver_manager.ProgrammingError) as e:
        cur.execute(sql)
        cur.fetchall()
    assert "INVALID_ARGUMENT" in str(e.value) or "InvalidArgument" in str(e.value), str(e.value)


def jdbc_cell(cell, want):
    """A JDBC getString value read as norm gives DuckDB's value of it."""
    if cell == "NULL":
        return None
    if isinstance(want, bool):
        return cell.lower() in ("true", "1")
    if isinstance(want, float):
        return float(cell)
    if want is not None and re.fullmatch(r"\d{4}-\d\d-\d\dT.*", want):
        return datetime.datetime.fromisoformat(cell.replace(" ", "T")).isoformat()
    return cell


# JdbcCheck splits a PREPARED argument at "|" (no || in it); its int
# parameter binds the first ?.
JDBC_PREPARED = ("SELECT id, id::double / 2 AS h, upper(station) AS s FROM dial.readings"
                 " WHERE station ILIKE 'north%' AND id < ? ORDER BY id")


@pytest.fixture(scope="module")
def jdbc_facts(env, jdbc_jars):
    """Every example, and a prepared statement, through the JDBC driver in
    one JVM (JdbcCheck prints each result as "a|b;c|d" by getString)."""
    daemon = env[2]
    url = "jdbc:arrow-flight-sql://%s?useEncryption=false" % daemon.url.replace("grpc://", "")
    out = subprocess.run(["java", *JAVA_OPTS, "-cp", os.pathsep.join(jdbc_jars), "JdbcCheck", url, SCHEMA, "readings",
                          *examples("sql"), "PREPARED:%s|12" % JDBC_PREPARED],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(line.split("\t", 1) for line in out.stdout.splitlines() if "\t" in line)


def assert_jdbc(duck, sql, res):
    assert not res.startswith("ERROR"), "%s\n%s" % (sql, res)
    want = duck_rows(duck, sql)
    got = [tuple(r.split("|")) for r in res.split(";")] if res else []
    got = [tuple(jdbc_cell(c, w) for c, w in zip(g, want[k] if k < len(want) else g)) for k, g in enumerate(got)]
    assert_rows(sql, got, want)


def test_examples_jdbc(env, jdbc_facts):
    duck = env[1]
    for i, sql in enumerate(examples("sql")):
        assert_jdbc(duck, sql, jdbc_facts["query%d" % i])


def test_information_schema_has_no_engine_tables(env):
    """information_schema holds schemata, tables and columns, about the
    catalog's arrays only."""
    conn, _, _ = env
    with conn.cursor() as cur:
        cur.execute("SELECT DISTINCT table_catalog, table_type FROM information_schema.tables")
        assert set(cur.fetchall()) <= {("tileflight", "ARRAY"), ("tileflight", "B2ND")}
        cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'information_schema'"
                    " OR table_name LIKE 'innodb%'")
        assert cur.fetchall() == [(0,)]
        with pytest.raises(adbc_driver_manager.Error) as e:
            cur.execute("SELECT * FROM information_schema.innodb_tables")
            cur.fetchall()
        assert "innodb_tables" in str(e.value)
    # GetTables (Flight SQL metadata) lists arrays only.
    objs = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
    names = {(s["db_schema_name"], t["table_name"]) for c in objs for s in (c["catalog_db_schemas"] or [])
             for t in (s["db_schema_tables"] or [])}
    assert {(SCHEMA, "readings"), (SCHEMA, "stations")} <= names
    assert not any(s in ("information_schema", "mysql") for s, _ in names)


PREPARED = "SELECT id, id::double / 2 AS h, station || '!' AS s FROM dial.readings WHERE station ILIKE ? AND id < ? ORDER BY id"


def test_prepared_adbc(env):
    """A prepared statement in the dialect, parameters bound by ADBC."""
    conn, duck, _ = env
    with conn.cursor() as cur:
        cur.execute(PREPARED, parameters=("NORTH%", 12))
        got = [tuple(norm(v) for v in r) for r in cur.fetchall()]
    want = duck_rows(duck, PREPARED.replace("?", "'NORTH%'", 1).replace("?", "12", 1))
    assert got and len(got) == len(want)
    assert_rows(PREPARED, got, want)


def test_prepared_jdbc(env, jdbc_facts):
    """A prepared statement in the dialect through a JDBC PreparedStatement
    (an int parameter)."""
    res = jdbc_facts["query%d" % len(examples("sql"))]
    assert_jdbc(env[1], JDBC_PREPARED.replace("?", "12"), res)
