"""Flight SQL GROUP BY through ADBC against DuckDB over the same data (read by
TileDB-Py into Arrow): groupings the daemon computes over the scan's batches
(EXPLAIN says "pushed down: GROUP BY") with nullable keys and values, WHERE on
dimensions and attributes, HAVING, ORDER BY over the groups and string keys,
and groupings it leaves to the SQL engine (an expression key, DISTINCT), which
answer the same."""

import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 (pa.compute)
import pytest
import tiledb
from tiledb.sparse_array import _setitem_impl_sparse

from flightd_fixture import flightd_bin, running  # noqa: F401

flightsql = pytest.importorskip("adbc_driver_flightsql.dbapi")
duckdb = pytest.importorskip("duckdb")

N = 3000


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("groupby")
    os.makedirs(os.path.join(d, "lab"))
    uri = os.path.join(d, "lab", "facts")
    dom = tiledb.Domain(tiledb.Dim("id", domain=(0, 99999), tile=1000, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("grp", dtype=np.int32, nullable=True),
        tiledb.Attr("s", dtype=str, var=True, nullable=True),
        tiledb.Attr("v", dtype=np.float64, nullable=True),
        tiledb.Attr("n", dtype=np.int64),
        tiledb.Attr("b", dtype=np.uint8),
    ]))
    rng = np.random.default_rng(7)
    ids = np.sort(rng.choice(100000, N, replace=False)).astype(np.int64)
    grp = rng.integers(0, 6, N).astype(np.int32)
    s = np.array(["red", "green", "blue", "", "Red"], dtype=object)[rng.integers(0, 5, N)]
    v = np.round(rng.random(N) * 100, 2)
    n = rng.integers(-1000, 1000, N).astype(np.int64)
    b = rng.integers(0, 3, N).astype(np.uint8)
    valid = {name: (rng.random(N) >= p).astype(np.uint8) for name, p in (("grp", 0.1), ("s", 0.1), ("v", 0.15))}
    with tiledb.open(uri, "w") as A:
        # explicit validity maps (tiledb-py infers none from plain arrays)
        _setitem_impl_sparse(A, ids, {"grp": grp, "s": s, "v": v, "n": n, "b": b}, valid)
    # the same data read back by TileDB, as Arrow for DuckDB
    with tiledb.open(uri) as A:
        got = A.query()[:]
    cols = {}
    for name, x in got.items():
        mask = np.ma.getmaskarray(x) if isinstance(x, np.ma.MaskedArray) else None
        data = np.ma.getdata(x)
        cols[name] = pa.array(list(data) if data.dtype == object else data, mask=mask)
    assert int(pa.compute.sum(cols["grp"].is_null()).as_py()) > 0
    return d, pa.table(cols)


def canon(rows, ordered=False):
    """Rows with numbers as floats rounded to 6 significant digits; sorted unless ordered."""
    def num(x):
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            x = float(x)
            if x == 0 or math.isnan(x):
                return x
            return float("%.6g" % x)
        return x
    out = [tuple(num(x) for x in r) for r in rows]
    return out if ordered else sorted(out, key=repr)


# (query, grouped by the daemon over the batches, ordered)
CASES = [
    ("SELECT grp, sum(v), avg(v), count(*), count(v), min(v), max(v) FROM {t} GROUP BY grp", True, False),
    ("SELECT s, count(*), sum(n), min(n), max(n), avg(v) FROM {t} GROUP BY s", True, False),
    ("SELECT grp, s, count(*), sum(v) FROM {t} GROUP BY grp, s", True, False),
    ("SELECT b, min(s), max(s), count(s) FROM {t} GROUP BY b", True, False),
    ("SELECT grp, count(*), sum(v) FROM {t} WHERE id BETWEEN 20000 AND 60000 AND v > 30 GROUP BY grp", True, False),
    ("SELECT s, count(*) FROM {t} WHERE grp IS NULL OR n < 0 GROUP BY s", True, False),
    ("SELECT grp, count(*) AS c, sum(v) AS sv FROM {t} GROUP BY grp HAVING count(*) > 400 AND sum(v) > 0", True, False),
    ("SELECT grp, count(*) AS c FROM {t} WHERE grp IS NOT NULL GROUP BY grp ORDER BY c DESC, grp LIMIT 4", True, True),
    ("SELECT s, sum(n) AS t FROM {t} WHERE s IS NOT NULL GROUP BY s ORDER BY t, s", True, True),
    # left to the engine: no cell can match (the engine answers no rows itself),
    # an expression key, DISTINCT, an expression argument
    ("SELECT grp, count(*) FROM {t} WHERE id < 0 GROUP BY grp", False, False),
    ("SELECT n % 7, count(*), sum(v) FROM {t} GROUP BY n % 7", False, False),
    ("SELECT grp, count(DISTINCT s) FROM {t} GROUP BY grp", False, False),
    ("SELECT grp, sum(v * 2) FROM {t} GROUP BY grp", False, False),
]


def test_groupby_matches_duckdb(flightd_bin, data):
    d, table = data
    con = duckdb.connect()
    con.register("facts", table)
    with running(flightd_bin, d) as fd, flightsql.connect(fd.url) as conn:
        for q, native, ordered in CASES:
            with conn.cursor() as cur:
                cur.execute("EXPLAIN " + q.format(t="lab.facts"))
                plan = "\n".join(r[0] for r in cur.fetchall())
                assert ("pushed down: GROUP BY" in plan) == native, (q, plan)
                cur.execute(q.format(t="lab.facts"))
                got = cur.fetchall()
            want = con.sql(q.format(t="facts")).fetchall()
            assert want or "id < 0" in q, q
            assert canon(got, ordered) == canon(want, ordered), q
