"""Spark over tileflight vs Spark over Parquet: count() and sum(v) of the
256 MiB dense float64 array of flight_read.py (4096 x 8192 cells).

The array is written by the tiledb package and served by flightd; the same
data (x, y, v) is exported to Parquet through the tileflight client. One
SparkSession (local[2]) then times, in interleaved rounds:

  tileflight      spark.read.format("tileflight") ... .load()   (the Python
                  data source; x, y and v)
  tileflight v    the same with .option("columns", "v")
  tileflight-jvm  spark.read.format("tileflight-jvm") ... .load() (the JVM
                  connector, spark-connector/: columns, filters and
                  aggregates pushed by Spark itself)
  parquet         spark.read.parquet(...)

each with .count(), .agg(sum("v")) and .agg(sum(v + 0)) (an expression no
source can push: every value of v is read into Spark). Ratios are parquet
time / tileflight time per round (>= 1 means tileflight is at least as
fast), medians.

Usage: python benchmarks/spark_read.py --flightd bin/flightd [--rounds 5] [--out benchmarks/RESULTS.md]
"""

import argparse
import datetime
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python", "src"))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import tileflight  # noqa: E402
from flight_read import COLS, NAME, ROWS, make_array, start_flightd  # noqa: E402

import resultsfile  # noqa: E402 (benchmarks/ is the script directory)


def export_parquet(client, path):
    """The array's x, y, v into one Parquet file (snappy, 1 Mi-row groups), streamed."""
    r = client.reader(NAME, progress=False)
    with pq.ParquetWriter(path, r.schema.remove_metadata()) as w:
        for b in r:
            w.write_batch(b.replace_schema_metadata(None), row_group_size=1 << 20)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flightd", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data")
    ap.add_argument("--out")
    args = ap.parse_args()

    root = args.data or tempfile.mkdtemp(prefix="tileflight-spark-bench-")
    make_array(root)
    fd, url = start_flightd(args.flightd, root)  # its log is drained for the whole run
    try:
        client = tileflight.connect(url)
        parquet = os.path.join(root, "dense.parquet")
        if not os.path.exists(parquet):
            export_parquet(client, parquet)

        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.path.join(os.path.dirname(HERE), "python", "src"), os.environ.get("PYTHONPATH")) if p)
        from pyspark.sql import SparkSession, functions as F
        from tileflight.spark import JVM_FORMAT, TileflightDataSource, jvm_jar
        spark = (SparkSession.builder.master("local[2]").appName("tileflight-bench")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
                 .config("spark.jars", jvm_jar())
                 .config("spark.sql.python.filterPushdown.enabled", "true").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(TileflightDataSource)

        def tf(cols=None):
            r = spark.read.format("tileflight").option("uri", url).option("array", NAME)
            if cols:
                r = r.option("columns", cols)
            return r.load()

        frames = {"tileflight": lambda: tf(), "tileflight v": lambda: tf("v"),
                  "tileflight-jvm": lambda: spark.read.format(JVM_FORMAT).option("uri", url).option("array", NAME).load(),
                  "parquet": lambda: spark.read.parquet(parquet)}
        n = ROWS * COLS
        want_sum = float(n * (n - 1) // 2)  # v = x * COLS + y
        ops = {
            "count()": lambda df: df.count(),
            "sum(v)": lambda df: df.agg(F.sum("v")).collect()[0][0],
            "sum(v + 0)": lambda df: df.agg(F.sum(F.col("v") + 0)).collect()[0][0],
        }
        # One warm-up of each (JIT, Python workers, page cache).
        for make in frames.values():
            for op in ops.values():
                op(make())
        times = {(f, o): [] for f in frames for o in ops}
        for rnd in range(args.rounds):
            for o, op in ops.items():
                for f, make in frames.items():
                    t, got = timed(lambda: op(make()))
                    want = n if o == "count()" else want_sum
                    assert got == want, (f, o, got, want)
                    times[(f, o)].append(t)
            print(f"round {rnd + 1}: " + ", ".join(f"{f} {o} {times[(f, o)][-1]:.2f}s"
                                                   for o in ops for f in frames), flush=True)
        spark.stop()
    finally:
        fd.send_signal(signal.SIGTERM)
        fd.wait(30)
        if not args.data:
            shutil.rmtree(root, ignore_errors=True)

    import pyspark
    lines = [
        "",
        "## Spark over tileflight vs Spark over Parquet (`make bench-spark`)",
        "",
        f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared), Spark {pyspark.__version__} local[2], pyarrow {pa.__version__}.",
        "The 256 MiB dense float64 array above (4096 x 8192; columns x, y, v = 768 MiB as rows), "
        "read from flightd by `tileflight.spark` (the Python data source, format `tileflight`) and by "
        "the JVM connector (`spark-connector/`, format `tileflight-jvm`), and the same x, y, v exported to one Parquet file "
        "(snappy, 1 Mi-row groups). "
        f"{args.rounds} interleaved rounds after a warm-up; medians. Ratio = Parquet time / tileflight "
        "time in the same round (>= 1: tileflight at least as fast). `sum(v + 0)` is an expression no "
        "source can push: every value of v is read into Spark.",
        "",
        "| operation | source | seconds (median) | ratio vs Parquet (median) |",
        "| --- | --- | ---: | ---: |",
    ]
    for o in ops:
        for f in frames:
            med = statistics.median(times[(f, o)])
            if f == "parquet":
                lines.append(f"| {o} | {f} | {med:.2f} | 1.00x |")
            else:
                ratio = statistics.median(p / t for p, t in zip(times[("parquet", o)], times[(f, o)]))
                lines.append(f"| {o} | {f} | {med:.2f} | {ratio:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with resultsfile.section(args.out, "spark") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
