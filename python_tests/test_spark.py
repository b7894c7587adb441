"""tileflight.spark: the Spark 4 data source, in local mode against the real
daemon, checked against TileDB (the tiledb package).

One SparkSession (local[2], the `spark` fixture of conftest.py) serves this
module and test_spark_jvm.py: starting one costs
10-40 s on the shared machine, so the tests share it and keep their arrays
small."""

import os

import numpy as np
import pyarrow as pa
import pytest
import tiledb

import tileflight
from flightd_fixture import flightd, flightd_bin, running  # noqa: F401

R, C = 400, 50


@pytest.fixture(scope="module")
def client(flightd):
    c = tileflight.connect(flightd.url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def arrays(flightd):
    """A 400 x 50 dense array (tiles 50 x 25) and a sparse array of 5000
    points with a nullable float, a string and an int attribute, both
    written by TileDB."""
    root = os.path.join(flightd.data, "spk")
    os.makedirs(root, exist_ok=True)
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, R - 1), tile=50, dtype=np.int64),
                        tiledb.Dim("c", domain=(0, C - 1), tile=25, dtype=np.int64))
    tiledb.Array.create(os.path.join(root, "dense"), tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("a", dtype=np.int32), tiledb.Attr("b", dtype=np.float64, filters=[tiledb.ZstdFilter()])]))
    r = np.arange(R)[:, None]
    c = np.arange(C)[None, :]
    with tiledb.open(os.path.join(root, "dense"), "w") as A:
        A[:] = {"a": (r * 100 + c).astype(np.int32), "b": (r * 0.25 + c * 0.5)}
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99999), tile=1000, dtype=np.int64),
                        tiledb.Dim("y", domain=(-1000.0, 1000.0), tile=100.0, dtype=np.float64))
    tiledb.Array.create(os.path.join(root, "sparse"), tiledb.ArraySchema(domain=dom, sparse=True, capacity=500, attrs=[
        tiledb.Attr("v", dtype=np.float64, nullable=True), tiledb.Attr("s", dtype=str),
        tiledb.Attr("n", dtype=np.uint16)]))
    rng = np.random.default_rng(12)
    n = 5000
    x = rng.choice(100000, n, replace=False).astype(np.int64)
    y = rng.uniform(-1000, 1000, n)
    v = rng.normal(size=n)
    valid = rng.random(n) > 0.1
    with tiledb.open(os.path.join(root, "sparse"), "w") as A:
        A[x, y] = {"v": np.ma.masked_array(v, mask=~valid), "s": np.array([f"k{i % 7}" for i in range(n)], dtype=object),
                   "n": (x % 1000).astype(np.uint16)}
    return {"dense": os.path.join(root, "dense"), "sparse": os.path.join(root, "sparse")}


def load(spark, flightd, array, **opts):
    r = spark.read.format("tileflight").option("uri", flightd.url).option("array", array)
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load()


def plan(df):
    return df._jdf.queryExecution().executedPlan().toString()


def pushed(df):
    """The PushedFilters Spark's formatted explain reports for the scan."""
    import io
    from contextlib import redirect_stdout
    buf = io.StringIO()
    with redirect_stdout(buf):
        df.explain(mode="formatted")
    lines = [ln for ln in buf.getvalue().splitlines() if "PushedFilters" in ln]
    return lines[0] if lines else ""


def tiledb_dense(uri, rs=slice(None), cs=slice(None)):
    with tiledb.open(uri) as A:
        d = A[:]
    return d["a"][rs, cs].astype(np.int64), d["b"][rs, cs]


def tiledb_sparse(uri):
    with tiledb.open(uri) as A:
        d = A[:]
    v = d["v"]
    return {"x": d["x"], "y": d["y"], "v": np.ma.getdata(v), "valid": ~np.ma.getmaskarray(v)
            if isinstance(v, np.ma.MaskedArray) else np.ones(len(v), bool), "s": d["s"], "n": d["n"]}


def test_schema_and_partitions_per_endpoint(spark, flightd, client, arrays):
    df = load(spark, flightd, "spk/dense", partitions=4)
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields] == [
        ("r", "bigint", False), ("c", "bigint", False), ("a", "int", False), ("b", "double", False)]
    eps = client.flight_info("spk/dense", partitions=4).endpoints
    assert len(eps) > 1 and df.rdd.getNumPartitions() == len(eps)
    s = load(spark, flightd, "spk/sparse").schema
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in s.fields] == [
        ("x", "bigint", False), ("y", "double", False), ("v", "double", True), ("s", "string", False),
        ("n", "int", False)]


def test_dense_count_sum_equal_tiledb(spark, flightd, arrays):
    df = load(spark, flightd, "spk/dense", partitions=4)
    a, b = tiledb_dense(arrays["dense"])
    assert df.count() == R * C
    row = df.selectExpr("sum(a)", "sum(b)", "min(r)", "max(c)").collect()[0]
    assert row[0] == int(a.sum()) and row[1] == pytest.approx(float(b.sum()), rel=1e-12)
    assert (row[2], row[3]) == (0, C - 1)
    # rows in endpoint order are TileDB's row-major order
    got = np.array([x.a for x in df.select("a").collect()])
    np.testing.assert_array_equal(got, a.ravel())


def test_dense_pushed_filters(spark, flightd, arrays):
    df = load(spark, flightd, "spk/dense", partitions=4)
    q = df.where("r >= 10 and r < 60 and c in (1, 3, 5)")
    p = pushed(q)
    for f in ("GreaterThanOrEqual(r,10)", "LessThan(r,60)", "In(c, [1,3,5])"):
        assert f in p, p
    assert "Filter" not in plan(q).split("BatchScan")[0], plan(q)  # Spark filters nothing itself
    a, b = tiledb_dense(arrays["dense"], slice(10, 60), [1, 3, 5])
    row = q.selectExpr("count(*)", "sum(a)", "sum(b)").collect()[0]
    assert row[0] == a.size and row[1] == int(a.sum()) and row[2] == pytest.approx(float(b.sum()))
    # contradicting bounds: nothing to read
    assert df.where("r > 100 and r < 50").count() == 0
    # a filter on an attribute of a dense array stays with Spark, correctly
    q = df.where("a > 30000 and r < 350")
    assert "GreaterThan(a,30000)" not in pushed(q) and "LessThan(r,350)" in pushed(q)
    a, _ = tiledb_dense(arrays["dense"], slice(0, 350))
    assert q.count() == int((a > 30000).sum())


def test_without_pushdown_same_answer(spark, flightd, arrays):
    df = load(spark, flightd, "spk/dense")
    q = "r between 33 and 77 and c <= 7"
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        off = df.where(q)
        assert "LessThanOrEqual(c,7)" not in pushed(off) and "Filter" in plan(off)
        got_off = off.selectExpr("count(*)", "sum(a)").collect()[0]
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    on = load(spark, flightd, "spk/dense").where(q)
    assert "LessThanOrEqual(c,7)" in pushed(on)
    a, _ = tiledb_dense(arrays["dense"], slice(33, 78), slice(0, 8))
    assert tuple(got_off) == tuple(on.selectExpr("count(*)", "sum(a)").collect()[0]) == (a.size, int(a.sum()))


def test_sparse_filters(spark, flightd, client, arrays):
    ref = tiledb_sparse(arrays["sparse"])
    df = load(spark, flightd, "spk/sparse", partitions=3)
    assert df.count() == len(ref["x"])
    assert df.selectExpr("sum(n)").collect()[0][0] == int(ref["n"].astype(np.int64).sum())
    q = df.where("x >= 20000 and x < 70000 and y > 0.5 and v > 0.25 and s in ('k1', 'k2')")
    m = ((ref["x"] >= 20000) & (ref["x"] < 70000) & (ref["y"] > 0.5) & ref["valid"] & (ref["v"] > 0.25)
         & np.isin(ref["s"], ["k1", "k2"]))
    row = q.selectExpr("count(*)", "sum(v)", "sum(n)").collect()[0]
    assert row[0] == int(m.sum()) and row[1] == pytest.approx(float(ref["v"][m].sum()))
    assert row[2] == int(ref["n"][m].astype(np.int64).sum())
    p = pushed(q)
    for f in ("GreaterThanOrEqual(x,20000)", "LessThan(x,70000)", "GreaterThan(y,0.5)"):
        assert f in p, p
    # Attribute conditions go to the daemon's `filter`; Spark filters nothing itself.
    for f in ("GreaterThan(v,0.25)", "In(s, [k1,k2])"):
        assert f in p, p
    assert "Filter" not in plan(q).split("BatchScan")[0], plan(q)
    q = df.where("v is null")
    assert "IsNull(v)" in pushed(q) and q.count() == int((~ref["valid"]).sum())
    q = df.where("n <= 100 and s = 'k3'")
    m = (ref["n"] <= 100) & (ref["s"] == "k3")
    assert q.count() == int(m.sum()) and "LessThanOrEqual(n,100)" in pushed(q)


def test_columns_option_and_user_schema(spark, flightd, arrays):
    a, b = tiledb_dense(arrays["dense"])
    df = load(spark, flightd, "spk/dense", columns="b,r")
    assert df.columns == ["b", "r"]
    assert df.selectExpr("sum(b)").collect()[0][0] == pytest.approx(float(b.sum()))
    df = (spark.read.format("tileflight").schema("a int").option("uri", flightd.url)
          .option("array", "spk/dense").load())
    assert df.columns == ["a"] and df.selectExpr("sum(a)").collect()[0][0] == int(a.sum())


def test_errors_surface(spark, flightd, arrays):
    with pytest.raises(Exception, match="no such array"):
        load(spark, flightd, "spk/nope").count()
    with pytest.raises(Exception, match="uri"):
        spark.read.format("tileflight").option("array", "spk/dense").load()


# -- writes: one staged DoPut per task, committed together on the driver ---------------------


def sparse_target(client, name):
    client.create({"array": name, "type": "sparse", "capacity": 100000,
                   "dimensions": [{"name": "x", "type": "int64", "domain": [0, 9999999], "tile": 100000}],
                   "attributes": [{"name": "v", "type": "float64"}, {"name": "k", "type": "int32"}]})


def files_of(root):
    out = set()
    for d, _, fs in os.walk(root):
        out.update(os.path.relpath(os.path.join(d, f), root) for f in fs)
    return out


def save(df, flightd, array):
    (df.write.format("tileflight").option("uri", flightd.url).option("array", array)
     .mode("append").save())


def test_write_1m_rows_in_8_tasks(spark, flightd, client, arrays):
    sparse_target(client, "spk/w")
    df = spark.range(0, 1_000_000, numPartitions=8).selectExpr(
        "id as x", "cast(id as double) * 0.5 as v", "cast(id % 13 as int) as k")
    assert df.rdd.getNumPartitions() == 8
    save(df, flightd, "spk/w")
    uri = os.path.join(flightd.data, "spk", "w")
    with tiledb.open(uri) as A:
        d = A[:]
    order = np.argsort(d["x"])
    np.testing.assert_array_equal(d["x"][order], np.arange(1_000_000))
    np.testing.assert_array_equal(d["v"][order], np.arange(1_000_000) * 0.5)
    np.testing.assert_array_equal(d["k"][order], (np.arange(1_000_000) % 13).astype(np.int32))
    fi = tiledb.FragmentInfoList(uri)
    assert len(fi) == 8  # one fragment per task ...
    assert len({f.timestamp_range for f in fi}) == 1  # ... one timestamp, chosen on the driver
    commits = os.listdir(os.path.join(uri, "__commits"))
    assert len(commits) == 1 and commits[0].endswith(".con"), commits  # one commit object for all
    # and Spark reads back what it wrote
    back = load(spark, flightd, "spk/w").selectExpr("count(*)", "sum(x)", "sum(k)").collect()[0]
    assert tuple(back) == (1_000_000, 999_999 * 1_000_000 // 2, int((np.arange(1_000_000) % 13).sum()))


def test_write_with_a_failing_task_leaves_the_array_unchanged(spark, flightd, flightd_bin, client, arrays):
    sparse_target(client, "spk/wfail")
    client.write("spk/wfail", {"x": np.arange(5, dtype=np.int64), "v": np.zeros(5), "k": np.ones(5, np.int32)})
    uri = os.path.join(flightd.data, "spk", "wfail")
    before = files_of(uri)
    frags_before = [f.uri for f in tiledb.FragmentInfoList(uri)]
    # The last of 4 tasks fails half-way; the others' staged fragments are aborted.
    df = spark.range(100, 200_100, numPartitions=4).selectExpr(
        "id as x", "if(id = 190000, raise_error('task boom'), cast(id as double)) as v", "cast(1 as int) as k")
    with pytest.raises(Exception, match="task boom"):
        save(df, flightd, "spk/wfail")
    # TileDB sees the array exactly as before: no new fragment, commit or cell.
    assert [f.uri for f in tiledb.FragmentInfoList(uri)] == frags_before
    with tiledb.open(uri) as A:
        np.testing.assert_array_equal(np.sort(A[:]["x"]), np.arange(5))
    assert load(spark, flightd, "spk/wfail").count() == 5
    # The committed files are untouched. Spark ends a failed task's input
    # as if it were complete, so that task may still stage what it had
    # received, and its result never reaches the driver's abort: such a
    # fragment stays uncommitted (invisible), and vacuum removes it.
    extra = files_of(uri) - before
    assert before <= files_of(uri) and all(f.startswith("__fragments/") for f in extra), extra
    with running(flightd_bin, flightd.data, "-vacuum-grace", "1ms") as d:
        tileflight.connect(d.url).vacuum("spk/wfail")
    assert files_of(uri) == before


def test_write_refusals(spark, flightd, client, arrays):
    df = spark.range(0, 10).selectExpr("id as r")
    with pytest.raises(Exception, match="sparse arrays"):
        save(df, flightd, "spk/dense")
    with pytest.raises(Exception, match="overwrite"):
        (df.write.format("tileflight").option("uri", flightd.url).option("array", "spk/w")
         .mode("overwrite").save())


def wide_write_checked(spark, flightd_bin, tmp_path, fmt, n=20000, **opts):
    """Spark (format fmt) writes n rows of 1.1 KB strings (20,000: 22 MB) in
    2 tasks to a daemon with -max-message-bytes 4MiB and -max-put-bytes
    8MiB: each task's batches are cut by bytes and its rows staged in
    several DoPuts; the driver commits them all with one commit object.
    TileDB reads exactly what was written. Returns the fragment count."""
    with running(flightd_bin, tmp_path / "wide", "-max-message-bytes", "4MiB", "-max-put-bytes", "8MiB") as d:
        with tileflight.connect(d.url) as c:
            c.create({"type": "sparse", "capacity": 4096,
                      "dimensions": [{"name": "k", "type": "int64", "domain": [0, 1 << 40], "tile": 1 << 20}],
                      "attributes": [{"name": "s", "type": "string_utf8", "cell_val_num": "var"}]}, "wide")
        df = spark.range(0, n, numPartitions=2).selectExpr(
            "id as k", "concat(lpad(cast(id as string), 11, '0'), ':', repeat('x', 1088)) as s")
        w = df.write.format(fmt).option("uri", d.url).option("array", "wide")
        for k, v in opts.items():
            w = w.option(k, str(v))
        w.mode("append").save()
        uri = os.path.join(d.data, "wide")
        with tiledb.open(uri) as A:
            got = A[:]
        order = np.argsort(got["k"])
        np.testing.assert_array_equal(got["k"][order], np.arange(n))
        want = [f"{i:011d}:" + "x" * 1088 for i in range(n)]
        assert list(got["s"][order]) == want
        commits = os.listdir(os.path.join(uri, "__commits"))
        assert len(commits) == 1 and commits[0].endswith(".con"), commits
        return len(tiledb.FragmentInfoList(uri))


def test_write_wide_rows_cut_by_bytes_and_staged(spark, flightd_bin, tmp_path):
    # Kept small (Python workers are slow here): 6.6 MB with the options
    # cutting 1 MiB batches and staging above 2 MiB.
    n = wide_write_checked(spark, flightd_bin, tmp_path, "tileflight", n=6000,
                           max_batch_bytes=1 << 20, staged=2 << 20)
    assert n >= 4  # 2 tasks x 2+ DoPuts
