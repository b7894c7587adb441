"""The JVM Spark connector (spark-connector/, format "tileflight-jvm") in
local mode against the real daemon, checked against TileDB (the tiledb
package): results, what explain() says was pushed, partitions = endpoints.

Shares conftest.py's SparkSession with test_spark.py (the connector's jar is
on its spark.jars: `make test` builds it with `make sparkjar`)."""

import datetime
import os
import socket

import numpy as np
import pyarrow as pa
import pytest
import tiledb

import tileflight
from tileflight.spark import JVM_FORMAT, jvm_jar
from flightd_fixture import flightd, flightd_bin, running  # noqa: F401

R, C = 300, 40


@pytest.fixture(scope="module")
def client(flightd):
    c = tileflight.connect(flightd.url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def arrays(flightd, client):
    """A 300 x 40 dense array (tiles 50 x 20), a sparse array of 4000 points,
    both written by TileDB, a sparse array with nulls written through the
    daemon, and a sparse array of many types written by TileDB."""
    root = os.path.join(flightd.data, "jvm")
    os.makedirs(root, exist_ok=True)
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, R - 1), tile=50, dtype=np.int64),
                        tiledb.Dim("c", domain=(0, C - 1), tile=20, dtype=np.int64))
    tiledb.Array.create(os.path.join(root, "dense"), tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("a", dtype=np.int32), tiledb.Attr("b", dtype=np.float64, filters=[tiledb.ZstdFilter()])]))
    r = np.arange(R)[:, None]
    c = np.arange(C)[None, :]
    with tiledb.open(os.path.join(root, "dense"), "w") as A:
        A[:] = {"a": (r * 100 - c * 7).astype(np.int32), "b": (r * 0.25 + c * 0.5)}

    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99999), tile=1000, dtype=np.int64),
                        tiledb.Dim("y", domain=(-1000.0, 1000.0), tile=100.0, dtype=np.float64))
    tiledb.Array.create(os.path.join(root, "sparse"), tiledb.ArraySchema(domain=dom, sparse=True, capacity=400, attrs=[
        tiledb.Attr("v", dtype=np.float64), tiledb.Attr("s", dtype=str), tiledb.Attr("n", dtype=np.uint16)]))
    rng = np.random.default_rng(7)
    n = 4000
    x = rng.choice(100000, n, replace=False).astype(np.int64)
    y = rng.uniform(-1000, 1000, n)
    with tiledb.open(os.path.join(root, "sparse"), "w") as A:
        A[x, y] = {"v": rng.normal(size=n), "s": np.array([f"k{i % 7}" for i in range(n)], dtype=object),
                   "n": (x % 1000).astype(np.uint16)}

    client.create({"array": "jvm/nulls", "type": "sparse", "capacity": 100,
                   "dimensions": [{"name": "k", "type": "int64", "domain": [0, 9999], "tile": 100}],
                   "attributes": [{"name": "w", "type": "float64", "nullable": True},
                                  {"name": "i", "type": "int32", "nullable": True}]})
    k = np.arange(0, 3000, 3, dtype=np.int64)
    w = pa.array([None if j % 4 == 0 else float(j) / 8 for j in range(len(k))], pa.float64())
    i = pa.array([None if j < 500 else j - 700 for j in range(len(k))], pa.int32())  # k < 1500: all null
    client.write("jvm/nulls", pa.table({"k": k, "w": w, "i": i}))

    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 999), tile=100, dtype=np.int64))
    tiledb.Array.create(os.path.join(root, "types"), tiledb.ArraySchema(domain=dom, sparse=True, capacity=50, attrs=[
        tiledb.Attr("u8", dtype=np.uint8), tiledb.Attr("u32", dtype=np.uint32), tiledb.Attr("u64", dtype=np.uint64),
        tiledb.Attr("i8", dtype=np.int8), tiledb.Attr("f4", dtype=np.float32),
        tiledb.Attr("t", dtype="datetime64[ns]"), tiledb.Attr("day", dtype="datetime64[D]"),
        tiledb.Attr("fx", dtype="S3")]))
    m = 200
    d = np.arange(0, 5 * m, 5, dtype=np.int64)
    with tiledb.open(os.path.join(root, "types"), "w") as A:
        A[d] = {"u8": (d % 256).astype(np.uint8), "u32": (d * 10_000_000 + 3).astype(np.uint32),
                "u64": (np.uint64(2**63) + d.astype(np.uint64)), "i8": (d % 200 - 100).astype(np.int8),
                "f4": (d / 3).astype(np.float32),
                "t": (np.datetime64("2026-01-02T03:04:05", "ns") + d * 1_234_567_891).astype("datetime64[ns]"),
                "day": (np.datetime64("2000-01-01", "D") + d).astype("datetime64[D]"),
                "fx": np.array([f"{j % 1000:03d}".encode() for j in d], dtype="S3")}
    return root


def load(spark, flightd, array, url=None, **opts):
    r = spark.read.format(JVM_FORMAT).option("uri", url or flightd.url).option("array", array)
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load()


def plan(df):
    return df._jdf.queryExecution().executedPlan().toString()


def scan_line(df):
    """The BatchScan line of the physical plan: what the connector reports pushed."""
    lines = [ln for ln in plan(df).splitlines() if "BatchScan" in ln]
    assert len(lines) == 1, plan(df)
    return lines[0]


def spark_filters_itself(df):
    return "Filter" in plan(df).split("BatchScan")[0]


def dense_ref(root):
    with tiledb.open(os.path.join(root, "dense")) as A:
        d = A[:]
    return d["a"].astype(np.int64), d["b"]


def sparse_ref(root):
    with tiledb.open(os.path.join(root, "sparse")) as A:
        return A[:]


def test_jar_helper():
    assert jvm_jar().endswith("tileflight-spark.jar") and os.path.isfile(jvm_jar())


def test_schema_partitions_and_columnar_scan(spark, flightd, client, arrays):
    df = load(spark, flightd, "jvm/dense", partitions=4)
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields] == [
        ("r", "bigint", False), ("c", "bigint", False), ("a", "int", False), ("b", "double", False)]
    eps = client.flight_info("jvm/dense", columns=["r", "c", "a", "b"], partitions=4).endpoints
    assert len(eps) > 1
    assert df.rdd.getNumPartitions() == len(eps)
    # Arrow batches go to Spark as columns: ColumnarToRow over the scan, no row conversion in the source.
    assert "ColumnarToRow" in plan(df)
    got = df.toPandas().sort_values(["r", "c"])
    a, b = dense_ref(arrays)
    assert np.array_equal(got["a"].to_numpy(), a.ravel()) and np.array_equal(got["b"].to_numpy(), b.ravel())
    assert np.array_equal(got["r"].to_numpy(), np.repeat(np.arange(R), C))


def test_column_pruning(spark, flightd, arrays):
    df = load(spark, flightd, "jvm/dense").select("b")
    assert 'PushedColumns: ["b"]' in scan_line(df)
    _, b = dense_ref(arrays)
    assert sorted(r[0] for r in df.collect()) == sorted(b.ravel().tolist())
    df = load(spark, flightd, "jvm/dense", columns="b,r")
    assert df.columns == ["b", "r"]
    df = spark.read.format(JVM_FORMAT).schema("a int").option("uri", flightd.url).option("array", "jvm/dense").load()
    assert df.columns == ["a"] and df.selectExpr("sum(a + 0)").collect()[0][0] == int(dense_ref(arrays)[0].sum())
    bad = spark.read.format(JVM_FORMAT).schema("a string").option("uri", flightd.url).option("array", "jvm/dense").load()
    with pytest.raises(Exception, match="column a: the schema says string"):
        bad.collect()


def test_dense_dimension_filters_become_subarray(spark, flightd, arrays):
    df = load(spark, flightd, "jvm/dense", partitions=3)
    q = df.where("r >= 10 and r < 60 and c in (1, 3, 5)")
    line = scan_line(q)
    assert "PushedSubarray: {r: [[10, 59]], c: [[1, 1], [3, 3], [5, 5]]}" in line, line
    assert not spark_filters_itself(q)
    a, b = dense_ref(arrays)
    sa, sb = a[10:60, [1, 3, 5]], b[10:60, [1, 3, 5]]
    got = q.select("a", "b", "c").collect()
    assert sorted(r.a for r in got) == sorted(sa.ravel().tolist())
    assert sum(r.b for r in got) == pytest.approx(float(sb.sum()))
    # strict bounds on integers, a float literal on an integer dimension, contradictions
    q = df.where("r > 2.5 and r <= 4 and c = 7")
    assert "PushedSubarray: {r: [[3, 4]], c: [[7, 7]]}" in scan_line(q)
    assert sorted(r.a for r in q.collect()) == sorted(a[3:5, 7].tolist())
    assert df.where("r > 100 and r < 50").count() == 0
    assert df.where("r > 100 and r < 50").selectExpr("sum(a)").collect()[0][0] is None
    # an attribute filter on a dense array stays with Spark (a dense read keeps every cell)
    q = df.where("a > 20000 and r < 250")
    assert spark_filters_itself(q) and "GreaterThan(a,20000)" not in scan_line(q)
    assert q.count() == int((a[:250] > 20000).sum())


def test_sparse_filters_become_condition(spark, flightd, arrays):
    ref = sparse_ref(arrays)
    df = load(spark, flightd, "jvm/sparse", partitions=3)
    assert df.count() == len(ref["x"])
    q = df.where("x >= 20000 and x < 70000 and y > 0.5 and v > 0.25 and s in ('k1', 'k2') and n != 17")
    line = scan_line(q)
    assert "PushedSubarray: {x: [[20000, 69999]], y: [[0.5000000000000001," in line, line
    assert "PushedCondition: v > 0.25 and s in ['k1', 'k2'] and n != 17" in line, line
    assert not spark_filters_itself(q)
    m = ((ref["x"] >= 20000) & (ref["x"] < 70000) & (ref["y"] > 0.5) & (ref["v"] > 0.25)
         & np.isin(ref["s"], ["k1", "k2"]) & (ref["n"] != 17))
    got = q.select("x", "v").collect()
    assert sorted(r.x for r in got) == sorted(ref["x"][m].tolist())
    assert sum(r.v for r in got) == pytest.approx(float(ref["v"][m].sum()))
    # what has no exact condition stays with Spark, and the answer is still right
    q = df.where("n % 7 = 3 and s like 'k%'")
    assert spark_filters_itself(q)
    assert q.count() == int((ref["n"] % 7 == 3).sum())


def test_nulls_and_null_filters(spark, flightd, arrays):
    df = load(spark, flightd, "jvm/nulls")
    t = df.toPandas()
    assert len(t) == 1000 and int(t["w"].isna().sum()) == 250 and int(t["i"].isna().sum()) == 500
    q = df.where("w is null")
    assert "PushedCondition: w == None" in scan_line(q) and q.count() == 250
    q = df.where("i is not null and i < 0")
    assert "i != None and i < 0" in scan_line(q) and q.count() == 200


def test_aggregates_pushed(spark, flightd, arrays):
    from pyspark.sql import functions as F
    a, b = dense_ref(arrays)
    df = load(spark, flightd, "jvm/dense")
    # (COUNT(b) of a column that cannot be null is COUNT(*) to Spark's optimizer)
    q = df.agg(F.count("*"), F.sum("a"), F.sum("b"), F.min("a"), F.max("a"), F.count("b"), F.min("r"), F.max("c"))
    line = scan_line(q)
    assert "PushedAggregates: [COUNT(*), SUM(a), SUM(b), MIN(a), MAX(a), MIN(r), MAX(c)]" in line, line
    assert "ColumnarToRow" not in plan(q) and "HashAggregate" not in plan(q)
    row = q.collect()[0]
    assert tuple(row[:2]) == (a.size, int(a.sum())) and row[2] == pytest.approx(float(b.sum()))
    assert tuple(row[3:]) == (int(a.min()), int(a.max()), b.size, 0, C - 1)
    assert df.count() == R * C  # count() itself
    # with pushed filters: subarray narrowed first, then aggregated by the daemon
    q = df.where("r between 100 and 149 and c < 10").agg(F.sum("a"), F.count("*"))
    assert "PushedAggregates: [SUM(a), COUNT(*)]" in scan_line(q)
    assert tuple(q.collect()[0]) == (int(a[100:150, :10].sum()), 500)
    ref = sparse_ref(arrays)
    sp = load(spark, flightd, "jvm/sparse")
    q = sp.where("v > 0 and s = 'k4'").agg(F.count("*"), F.sum("n"), F.max("n"), F.min("x"), F.sum("v"))
    line = scan_line(q)
    assert "PushedAggregates: [COUNT(*), SUM(n), MAX(n), MIN(x), SUM(v)]" in line and "PushedCondition" in line, line
    m = (ref["v"] > 0) & (ref["s"] == "k4")
    row = q.collect()[0]
    assert tuple(row[:4]) == (int(m.sum()), int(ref["n"][m].astype(np.int64).sum()), int(ref["n"][m].max()),
                              int(ref["x"][m].min()))
    assert row[4] == pytest.approx(float(ref["v"][m].sum()))


def test_aggregates_nulls_and_empty(spark, flightd, arrays):
    from pyspark.sql import functions as F
    df = load(spark, flightd, "jvm/nulls")
    q = df.agg(F.count("w"), F.count("*"), F.sum("i"), F.min("i"), F.max("i"))
    assert "PushedAggregates: [COUNT(w), COUNT(*), SUM(i), MIN(i), MAX(i)]" in scan_line(q)
    j = np.arange(1000)
    iv = (j - 700)[j >= 500]
    assert tuple(q.collect()[0]) == (750, 1000, int(iv.sum()), int(iv.min()), int(iv.max()))
    # only nulls: SUM/MIN/MAX are null, COUNT(col) 0, as Spark computes them itself
    q = df.where("k < 1500").agg(F.count("i"), F.sum("i"), F.min("i"), F.max("i"), F.count("*"))
    assert "PushedAggregates" in scan_line(q)
    assert tuple(q.collect()[0]) == (0, None, None, None, 500)
    # no cell at all (k is in range of the domain, no point there)
    q = df.where("k = 1").agg(F.count("*"), F.sum("i"))
    assert tuple(q.collect()[0]) == (0, None)


def test_aggregates_not_pushed_stay_correct(spark, flightd, arrays):
    from pyspark.sql import functions as F
    ref = sparse_ref(arrays)
    sp = load(spark, flightd, "jvm/sparse")
    # MAX of a float (TileDB skips NaN, Spark orders it last), GROUP BY, DISTINCT, an expression
    for q, want in [
        (sp.agg(F.max("v")), float(ref["v"].max())),
        (sp.agg(F.sum(F.col("v") * 2)), float(ref["v"].sum() * 2)),
        (sp.agg(F.countDistinct("s")), 7),
    ]:
        assert "PushedAggregates" not in scan_line(q)
        assert q.collect()[0][0] == pytest.approx(want)
    g = {r.s: r[1] for r in sp.groupBy("s").agg(F.count("*")).collect()}
    assert g == {k: int((ref["s"] == k).sum()) for k in set(ref["s"])}
    # AVG: Spark splits it into SUM and COUNT, which are pushed
    q = sp.agg(F.avg("n"))
    assert "PushedAggregates: [SUM(n), COUNT(n)]" in scan_line(q)
    assert q.collect()[0][0] == pytest.approx(float(ref["n"].astype(np.int64).mean()))


def test_limit_pushed(spark, flightd, arrays):
    q = load(spark, flightd, "jvm/sparse").where("x < 50000").limit(7)
    assert "PushedLimit: 7" in scan_line(q)
    rows = q.collect()
    assert len(rows) == 7 and all(r.x < 50000 for r in rows)


def test_types(spark, flightd, arrays):
    df = load(spark, flightd, "jvm/types")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("d", "bigint"), ("u8", "smallint"), ("u32", "bigint"), ("u64", "decimal(20,0)"), ("i8", "tinyint"),
        ("f4", "float"), ("t", "timestamp"), ("day", "date"), ("fx", "binary")]
    with tiledb.open(os.path.join(arrays, "types")) as A:
        ref = A[:]
    got = sorted(df.collect(), key=lambda r: r.d)
    o = np.argsort(ref["d"])
    assert [r.d for r in got] == ref["d"][o].tolist()
    assert [r.u8 for r in got] == ref["u8"][o].astype(int).tolist()
    assert [r.u32 for r in got] == ref["u32"][o].astype(int).tolist()
    assert [int(r.u64) for r in got] == [int(v) for v in ref["u64"][o]]
    assert [r.i8 for r in got] == ref["i8"][o].astype(int).tolist()
    assert np.array_equal(np.array([r.f4 for r in got], np.float32), ref["f4"][o])
    us = ref["t"][o].astype("datetime64[us]").astype(np.int64)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    assert [int((r.t.astimezone(datetime.timezone.utc) - epoch) / datetime.timedelta(microseconds=1)) for r in got] == us.tolist()
    assert [r.day for r in got] == [datetime.date.fromisoformat(str(v)) for v in ref["day"][o]]
    assert [bytes(r.fx) for r in got] == ref["fx"][o].tolist()
    q = df.agg({"u8": "max", "u32": "sum", "i8": "min", "day": "max"})
    assert "PushedAggregates" in scan_line(q)
    row = q.collect()[0].asDict()
    assert row["max(u8)"] == int(ref["u8"].max()) and row["sum(u32)"] == int(ref["u32"].astype(np.int64).sum())
    assert row["min(i8)"] == int(ref["i8"].min())
    assert row["max(day)"] == datetime.date.fromisoformat(str(ref["day"].max()))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_preferred_locations_from_endpoints(spark, flightd_bin, flightd, arrays):
    port = free_port()
    url = f"grpc://localhost:{port}"
    with running(flightd_bin, flightd.data, "-listen", f"127.0.0.1:{port}", "-advertise", url) as d:
        df = load(spark, flightd, "jvm/dense", url=d.url, partitions=3)
        leaf = df._jdf.queryExecution().executedPlan().collectLeaves().head()
        rdd = leaf.inputRDD()
        parts = rdd.partitions()
        assert len(parts) == 3
        assert [rdd.preferredLocations(p).mkString(",") for p in parts] == ["localhost"] * 3
        a, _ = dense_ref(arrays)
        assert df.selectExpr("sum(a + 0)").collect()[0][0] == int(a.sum())


def test_errors(spark, flightd, arrays):
    with pytest.raises(Exception, match="NOT_FOUND"):
        load(spark, flightd, "jvm/nope").count()
    with pytest.raises(Exception, match='option "uri" is required'):
        spark.read.format(JVM_FORMAT).option("array", "jvm/dense").load()
    with pytest.raises(Exception, match="option subarray: not JSON"):
        load(spark, flightd, "jvm/dense", subarray="{nope").count()
    with pytest.raises(Exception, match="INVALID_ARGUMENT"):
        load(spark, flightd, "jvm/dense", subarray='{"r": [[0, 99999]]}').count()


def test_options_like_the_python_source(spark, flightd, arrays):
    a, b = dense_ref(arrays)
    df = load(spark, flightd, "jvm/dense", subarray='{"r": [[5, 9]]}', batch_rows=7)
    assert df.count() == 5 * C
    assert sorted(r.a for r in df.select("a").collect()) == sorted(a[5:10].ravel().tolist())
    # the same answers as the Python data source, same options
    py = (spark.read.format("tileflight").option("uri", flightd.url).option("array", "jvm/dense")
          .option("subarray", '{"r": [[5, 9]]}').load())
    assert sorted(map(tuple, py.collect())) == sorted(map(tuple, df.collect()))


# -- writes: one staged DoPut per task, committed together on the driver ---------------------


def sparse_target(client, name):
    client.create({"array": name, "type": "sparse", "capacity": 100000,
                   "dimensions": [{"name": "x", "type": "int64", "domain": [0, 9999999], "tile": 100000}],
                   "attributes": [{"name": "v", "type": "float64"}, {"name": "k", "type": "int32"},
                                  {"name": "s", "type": "string_utf8", "cell_val_num": "var", "nullable": True}]})


def save(df, flightd, array, mode="append"):
    df.write.format(JVM_FORMAT).option("uri", flightd.url).option("array", array).mode(mode).save()


def test_write_in_4_tasks(spark, flightd, client, arrays):
    sparse_target(client, "jvm/w")
    n = 200_000
    df = spark.range(0, n, numPartitions=4).selectExpr(
        "id as x", "cast(id as double) * 0.5 as v", "cast(id % 13 as int) as k",
        "if(id % 5 = 0, null, concat('s', cast(id % 11 as string))) as s")
    save(df, flightd, "jvm/w")
    uri = os.path.join(flightd.data, "jvm", "w")
    with tiledb.open(uri) as A:
        d = A[:]
    o = np.argsort(d["x"])
    ids = np.arange(n)
    np.testing.assert_array_equal(d["x"][o], ids)
    np.testing.assert_array_equal(d["v"][o], ids * 0.5)
    np.testing.assert_array_equal(d["k"][o], (ids % 13).astype(np.int32))
    s = d["s"][o]
    want = [None if i % 5 == 0 else f"s{i % 11}" for i in ids]
    got = [None if (np.ma.is_masked(v) or v is None) else (v.decode() if isinstance(v, bytes) else v) for v in s]
    assert got == want
    fi = tiledb.FragmentInfoList(uri)
    assert len(fi) == 4 and len({f.timestamp_range for f in fi}) == 1  # a fragment per task, one timestamp
    commits = os.listdir(os.path.join(uri, "__commits"))
    assert len(commits) == 1 and commits[0].endswith(".con"), commits  # one commit for all
    back = load(spark, flightd, "jvm/w").selectExpr("count(*)", "sum(x)", "sum(k)").collect()[0]
    assert tuple(back) == (n, (n - 1) * n // 2, int((ids % 13).sum()))


def test_write_with_a_failing_task_leaves_the_array_unchanged(spark, flightd, client, arrays):
    sparse_target(client, "jvm/wfail")
    client.write("jvm/wfail", {"x": np.arange(5, dtype=np.int64), "v": np.zeros(5), "k": np.ones(5, np.int32),
                               "s": pa.array(["a"] * 5)})
    uri = os.path.join(flightd.data, "jvm", "wfail")
    frags_before = [f.uri for f in tiledb.FragmentInfoList(uri)]
    df = spark.range(100, 100_100, numPartitions=4).selectExpr(
        "id as x", "if(id = 90000, raise_error('task boom'), cast(id as double)) as v", "cast(1 as int) as k",
        "cast(null as string) as s")
    with pytest.raises(Exception, match="task boom"):
        save(df, flightd, "jvm/wfail")
    assert [f.uri for f in tiledb.FragmentInfoList(uri)] == frags_before
    with tiledb.open(uri) as A:
        np.testing.assert_array_equal(np.sort(A[:]["x"]), np.arange(5))


def test_write_refusals(spark, flightd, client, arrays):
    df = spark.range(0, 10).selectExpr("id as r", "cast(id as bigint) as c", "cast(1 as int) as a", "0.5 as b")
    with pytest.raises(Exception, match="sparse arrays"):
        save(df, flightd, "jvm/dense")
    with pytest.raises(Exception, match="(?i)overwrite|truncat"):
        save(spark.range(0, 3).selectExpr("id as x", "0.5 as v", "1 as k", "'a' as s"), flightd, "jvm/w", mode="overwrite")


def test_token(spark, flightd_bin, flightd, arrays):
    """The token option goes on every call (planning, DoGet on the executors, DoPut, actions)."""
    from flightd_fixture import Daemon
    d = Daemon(flightd_bin, flightd.data, env={"TILEFLIGHT_TOKENS": "tok-rw:rw,tok-ro:ro"})
    try:
        with pytest.raises(Exception, match="UNAUTHENTICATED"):
            load(spark, flightd, "jvm/dense", url=d.url).count()
        df = load(spark, flightd, "jvm/sparse", url=d.url, token="tok-ro", partitions=2)
        ref = sparse_ref(arrays)
        assert df.where("v > 0").count() == int((ref["v"] > 0).sum())
        assert df.selectExpr("sum(n + 0)").collect()[0][0] == int(ref["n"].astype(np.int64).sum())
        src = spark.range(1_000_000, 1_000_010).selectExpr("id as x", "cast(0.5 as double) as v", "cast(2 as int) as k", "'t' as s")
        with pytest.raises(Exception, match="PERMISSION_DENIED"):
            (src.write.format(JVM_FORMAT).option("uri", d.url).option("array", "jvm/w").option("token", "tok-ro")
             .mode("append").save())
        (src.write.format(JVM_FORMAT).option("uri", d.url).option("array", "jvm/w").option("token", "tok-rw")
         .mode("append").save())
        assert load(spark, flightd, "jvm/w", url=d.url, token="tok-ro").where("x >= 1000000").count() == 10
    finally:
        d.stop()


def test_tls(spark, flightd_bin, flightd, arrays, tmp_path):
    import subprocess
    crt, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    with running(flightd_bin, flightd.data, "-tls-cert", str(crt), "-tls-key", str(key)) as d:
        assert d.url.startswith("grpc+tls://")
        df = load(spark, flightd, "jvm/dense", url=d.url, tls_root_certs=str(crt), partitions=2)
        a, _ = dense_ref(arrays)
        assert df.selectExpr("sum(a + 0)").collect()[0][0] == int(a.sum())
        assert df.where("r < 10").count() == 10 * C
        with pytest.raises(Exception, match="tls_root_certs: cannot read"):
            load(spark, flightd, "jvm/dense", url=d.url, tls_root_certs=str(tmp_path / "nope.pem")).count()


def test_write_wide_rows_cut_by_bytes_and_staged(spark, flightd_bin, tmp_path):
    from test_spark import wide_write_checked
    assert wide_write_checked(spark, flightd_bin, tmp_path, JVM_FORMAT) >= 4  # 2 tasks x 2+ DoPuts
