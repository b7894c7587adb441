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
