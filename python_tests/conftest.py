"""Shared pytest fixtures for python_tests."""

import os
import shutil
import subprocess
import sys
import tempfile

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


JDBC_DIR = os.path.join(HERE, "jdbc")
JDBC_JAR = os.path.join(JDBC_DIR, "target", "jdbccheck.jar")
JDBC_DRIVER = os.path.join(JDBC_DIR, "target", "dependency", "flight-sql-jdbc-driver-18.3.0.jar")
# The Flight SQL JDBC driver needs this on Java 17 (Arrow's memory access).
JAVA_OPTS = ["--add-opens=java.base/java.nio=ALL-UNNAMED"]


@pytest.fixture(scope="session")
def jdbc_jars():
    """The JdbcCheck program and the Flight SQL JDBC driver (`make jdbc`
    builds them; built here with Maven when missing, fetching the driver
    from Maven Central)."""
    if not (os.path.exists(JDBC_JAR) and os.path.exists(JDBC_DRIVER)):
        subprocess.run(["mvn", "-q", "-B", "package"], cwd=JDBC_DIR, check=True, timeout=900)
    return JDBC_JAR, JDBC_DRIVER


@pytest.fixture(scope="session")
def spark(jdbc_jars):
    """One local[2] SparkSession for every Spark test (test_spark.py,
    test_spark_jvm.py, test_flightsql.py's JDBC source): starting one costs
    10-40 s on the shared machine, and the first one fixes the driver's
    classpath for the whole Python process (a later session's spark.jars
    would not reach Spark's data source lookup). It has the Python data
    source registered ("tileflight"), the JVM connector's jar
    ("tileflight-jvm") when `make sparkjar` has built it (test_spark_jvm.py
    fails without it) and the Flight SQL JDBC driver."""
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
    jars = [jdbc_jars[1]]
    try:
        # A copy: the JVM keeps the jar open for the whole session, and
        # test_release.py rebuilds spark-connector/target in place (for
        # another version), which would corrupt the open zip under it.
        copy = os.path.join(tempfile.mkdtemp(prefix="tileflight-spark-"), "tileflight-spark.jar")
        shutil.copyfile(jvm_jar(), copy)
        jars.insert(0, copy)
    except FileNotFoundError:
        pass
    b = b.config("spark.jars", ",".join(jars)).config("spark.driver.extraJavaOptions", " ".join(JAVA_OPTS))
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    s.dataSource.register(TileflightDataSource)
    yield s
    s.stop()


# -- a session that ends, whatever a test left running ------------------------
#
# A test thread that outlives its test (a reader looping until an event a
# failed assertion never set) would keep the interpreter from exiting after
# the summary: CI would wait for it until its own timeout and report
# nothing. Once pytest is done, a watchdog gives the interpreter's own exit
# (which joins every non-daemon thread, idle thread pools included) a
# minute; past it, the threads still running are named on stderr with
# every thread's stack, and the process exits with the session's status.
# Hung tests themselves are stopped by pytest-timeout (`timeout` in
# pytest.ini).

_SESSION = {"status": 0}
EXIT_WATCHDOG_S = 60


def pytest_sessionfinish(session, exitstatus):
    _SESSION["status"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    import faulthandler
    import threading

    def watchdog():
        threading.Event().wait(EXIT_WATCHDOG_S)
        left = [t for t in threading.enumerate()
                if t is not threading.main_thread() and not t.daemon and t.is_alive()]
        names = ", ".join(f"{t.name} ({getattr(t, '_target', None)})" for t in left) or "none found"
        sys.stderr.write(f"\nthe interpreter did not exit {EXIT_WATCHDOG_S} s after the tests; threads left "
                         f"running by tests: {names}; exiting without them\n")
        faulthandler.dump_traceback(all_threads=True)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(_SESSION["status"])

    threading.Thread(target=watchdog, name="exit-watchdog", daemon=True).start()
