"""Flight SQL sessions through ADBC: closing a connection (CloseSession)
logs nothing at WARN and is not an error; the current schema set through
ADBC (SetSessionOptions) is where unqualified table names resolve, and
GetSessionOptions reads it back."""

import os
import time

import numpy as np
import pytest
import tiledb

from flightd_fixture import flightd_bin, running  # noqa: F401

flightsql = pytest.importorskip("adbc_driver_flightsql.dbapi")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("sessions")
    os.makedirs(os.path.join(d, "lab"))
    uri = os.path.join(d, "lab", "pts")
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 99), tile=10, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr("v", dtype=np.float64)]))
    with tiledb.open(uri, "w") as A:
        A[np.arange(7)] = {"v": np.arange(7) * 1.5}
    return d


def test_close_and_current_schema(flightd_bin, data):
    with running(flightd_bin, data) as d:
        for _ in range(3):
            with flightsql.connect(d.url) as conn:
                with conn.cursor() as cur:
                    cur.execute("SELECT count(*) FROM lab.pts")
                    assert cur.fetchall() == [(7,)]
        # ADBC keeps the session's cookie with its cookie middleware on.
        cookies = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}
        with flightsql.connect(d.url, db_kwargs=cookies) as conn:
            conn.adbc_connection.set_options(**{"adbc.connection.db_schema": "lab"})
            assert conn.adbc_current_db_schema == "lab"
            with conn.cursor() as cur:
                cur.execute("SELECT sum(v) FROM pts")
                assert cur.fetchall() == [(sum(np.arange(7) * 1.5),)]
        time.sleep(0.3)
        warns = [r for r in d.records() if r.get("level") in ("warn", "error")]
        assert not warns, warns[:3]
        closes = [r for r in d.records() if r.get("method", "").endswith("DoAction") and r.get("status") == "OK"]
        assert closes, "ADBC's close made no DoAction"
