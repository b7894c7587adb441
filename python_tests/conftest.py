"""Shared pytest fixtures for python_tests."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

# The tileflight package's tests run this checkout's python/src, whatever
# copy of the package the (possibly shared) venv has installed; Spark's
# Python workers get it through PYTHONPATH (see test_spark.py).
PYCLIENT_SRC = os.path.join(os.path.dirname(HERE), "python", "src")
sys.path.insert(0, PYCLIENT_SRC)


@pytest.fixture(scope="session")
def fixtures_dir(tmp_path_factory):
    """The directory of the fixture matrix (holding arrays/ and index.json).

    With TILEFLIGHT_FIXTURES set (make test) it is
    $TILEFLIGHT_FIXTURES/fixtures; otherwise the matrix is generated once per
    session into a temporary directory."""
    env = os.environ.get("TILEFLIGHT_FIXTURES")
    if env:
        d = os.path.join(env, "fixtures")
        if not os.path.isfile(os.path.join(d, "index.json")):
            pytest.fail(f"TILEFLIGHT_FIXTURES={env} but {d}/index.json is missing "
                        "(run `make fixtures`)")
        return d
    d = str(tmp_path_factory.mktemp("fixtures"))
    subprocess.run([sys.executable, os.path.join(HERE, "gen_fixtures.py"), d], check=True)
    return d


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for test_spark.py and test_spark_jvm.py: starting
    one costs 10-40 s on the shared machine. It has the Python data source
    registered ("tileflight") and the JVM connector's jar ("tileflight-jvm")
    when `make sparkjar` has built it (test_spark_jvm.py fails without it)."""
    # Spark's Python workers must be this interpreter (the venv), which has tileflight.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (PYCLIENT_SRC, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession
    from tileflight.spark import TileflightDataSource, jvm_jar
    b = (SparkSession.builder.master("local[2]").appName("tileflight-tests")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.python.filterPushdown.enabled", "true")
         .config("spark.driver.memory", "1g"))
    try:
        b = b.config("spark.jars", jvm_jar())
    except FileNotFoundError:
        pass
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    s.dataSource.register(TileflightDataSource)
    yield s
    s.stop()
