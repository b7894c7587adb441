"""Flight SQL governance against the real daemon: -sql-memory bounds what one
statement's engine holds (an ORDER BY over far more rows than the bound ends
RESOURCE_EXHAUSTED naming the flag, the daemon's RSS stays bounded and it
answers the next query), through ADBC and JDBC; CancelFlightInfo (Flight
SQL's cancel, sent as the action) and ADBC's cancel stop a running
statement; list_queries and cancel_query stop a running consolidation and
leave the array as TileDB read it before."""

import json
import os
import subprocess
import threading
import time

import numpy as np
import pyarrow.flight as fl
import pytest
import tiledb

from flightd_fixture import action, expect_code, flightd_bin, grpc_code, running  # noqa: F401

flightsql = pytest.importorskip("adbc_driver_flightsql.dbapi")
import adbc_driver_manager  # noqa: E402

N = 4_000_000  # rows of (i int64, v float64): about 300 MB held by the engine when sorted whole
BOUND_MIB = 64


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("sqlgov")
    uri = os.path.join(d, "big")
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, N - 1), tile=N // 8, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr("v", dtype=np.float64)]))
    with tiledb.open(uri, "w") as A:
        A[:] = np.random.default_rng(1).random(N)
    return d


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Peak:
    """The highest RSS of a process, sampled every 20 ms while in use."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            time.sleep(0.02)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def test_memory_bound_adbc(flightd_bin, data):
    """ORDER BY of 4 M rows (about 300 MB in the engine) under -sql-memory
    64MiB: RESOURCE_EXHAUSTED naming the flag; the daemon's RSS never rises
    more than the bound plus 256 MiB of stated overhead (the reader's tiles,
    -memory-budget's default 128 MiB, the garbage collector's headroom) over
    what it used before; it comes back down at once and the next query is
    answered.
    A GROUP BY of 4 M groups fails the same way; an ORDER BY
    with LIMIT (keeps its LIMIT rows) and a streaming scan do not."""
    with running(flightd_bin, data, "-sql-memory", f"{BOUND_MIB}MiB", "-sql-timeout", "60s") as d:
        with flightsql.connect(d.url) as conn:
            cur = conn.cursor()
            cur.execute("SELECT count(*) FROM main.big WHERE i < 10")
            assert cur.fetchall() == [(10,)]
            base = rss_mib(d.proc.pid)
            t = time.time()
            with Peak(d.proc.pid) as p:
                with pytest.raises(adbc_driver_manager.Error) as e:
                    cur.execute("SELECT i, v FROM main.big ORDER BY v DESC")
                    cur.fetch_arrow_table()
            took = time.time() - t
            msg = str(e.value)
            assert "ResourceExhausted" in msg and f"-sql-memory ({BOUND_MIB}MiB)" in msg and "ORDER BY" in msg, msg
            print(f"ORDER BY of {N} rows under -sql-memory {BOUND_MIB}MiB: RESOURCE_EXHAUSTED after {took:.1f}s; "
                  f"RSS before {base:.0f} MiB, peak {p.peak:.0f} MiB (+{p.peak - base:.0f})")
            assert p.peak <= base + BOUND_MIB + 256, (base, p.peak)
            # What the statement held is given back at once.
            deadline = time.time() + 10
            while time.time() < deadline and rss_mib(d.proc.pid) > base + 32:
                time.sleep(0.2)
            assert rss_mib(d.proc.pid) <= base + 32, (base, rss_mib(d.proc.pid))
            # (the Go tests of sqlsvc cover joins and DISTINCT on a small array)
            for sql in ["SELECT v % 1000000, count(*) FROM main.big GROUP BY 1"]:
                t = time.time()
                with pytest.raises(adbc_driver_manager.Error) as e:
                    cur.execute(sql)
                    cur.fetch_arrow_table()
                assert "ResourceExhausted" in str(e.value) and "-sql-memory" in str(e.value), (sql, e.value)
                print(f"{sql}: RESOURCE_EXHAUSTED after {time.time() - t:.1f}s")
            cur.execute("SELECT i, v FROM main.big WHERE i < 200000 ORDER BY v DESC LIMIT 3")
            assert len(cur.fetchall()) == 3
            cur.execute("SELECT count(*) FROM main.big WHERE v > 0.5 AND i < 200000")
            assert 80_000 < cur.fetchall()[0][0] < 120_000
            cur.close()
        assert d.alive()


def test_memory_and_timeout_jdbc(flightd_bin, data, jdbc_jars):
    """The same bounds through the Flight SQL JDBC driver: the ORDER BY past
    -sql-memory and a cross join past -sql-timeout each fail with a message
    naming the flag, and the statement after them is answered."""
    from conftest import JAVA_OPTS
    with running(flightd_bin, data, "-sql-memory", f"{BOUND_MIB}MiB", "-sql-timeout", "3s") as d:
        url = "jdbc:arrow-flight-sql://%s?useEncryption=false" % d.url.replace("grpc://", "")
        queries = ["SELECT i, v FROM main.big ORDER BY v",
                   "SELECT count(*) FROM main.big a CROSS JOIN main.big b",
                   "SELECT count(*) FROM main.big WHERE i < 7"]
        out = subprocess.run(["java", *JAVA_OPTS, "-cp", os.pathsep.join(jdbc_jars), "JdbcCheck", url, "main", "big", *queries],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        facts = dict(line.split("\t", 1) for line in out.stdout.splitlines() if "\t" in line)
        assert facts["query0"].startswith("ERROR") and "-sql-memory" in facts["query0"], facts["query0"]
        assert facts["query1"].startswith("ERROR") and "sql-timeout" in facts["query1"], facts["query1"]
        assert facts["query2"] == "7", facts["query2"]
        assert d.alive()


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num, payload):
    """A length-delimited protobuf field."""
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def statement_descriptor(sql):
    """Flight SQL's CommandStatementQuery in an Any, as a CMD descriptor."""
    cmd = _field(1, sql.encode())
    url = b"type.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"
    return fl.FlightDescriptor.for_command(_field(1, url) + _field(2, cmd))


def cancel_flight_info(client, info):
    """Sends the CancelFlightInfo action; returns the CancelStatus number
    (0 unspecified, 1 cancelled, 2 cancelling, 3 not cancellable)."""
    res = list(client.do_action(fl.Action("CancelFlightInfo", _field(1, info.serialize()))))
    assert len(res) == 1, res
    body = res[0].body.to_pybytes()
    return body[1] if body[:1] == b"\x08" else 0


def test_cancel_flight_info(flightd_bin, data):
    """A statement streaming a cross join (16 M million rows) is stopped
    by CancelFlightInfo: status CANCELLED, its reader ends CANCELLED naming
    it, the statement leaves list_queries; a second cancel is NOT_FOUND; the
    daemon answers on. ADBC's own cancel (adbc_cancel) stops a fetch too."""
    with running(flightd_bin, data, "-sql-timeout", "120s") as d:
        c = fl.connect(d.url)
        info = c.get_flight_info(statement_descriptor("SELECT a.i, b.v FROM main.big a CROSS JOIN main.big b"))
        reader = c.do_get(info.endpoints[0].ticket)
        reader.read_chunk()
        running_sql = [q for q in action(c, "list_queries") if q["kind"] == "sql"]
        assert running_sql and "CROSS JOIN" in running_sql[0]["sql"], running_sql
        assert cancel_flight_info(c, info) == 1
        with pytest.raises(fl.FlightError) as e:
            while True:
                reader.read_chunk()
        assert grpc_code(e.value) == "CANCELLED" and "CancelFlightInfo" in str(e.value), e.value
        deadline = time.time() + 10
        while time.time() < deadline and [q for q in action(c, "list_queries") if q["kind"] == "sql"]:
            time.sleep(0.05)
        assert not [q for q in action(c, "list_queries") if q["kind"] == "sql"]
        expect_code("NOT_FOUND", cancel_flight_info, c, info)

        # ADBC's cancel, from another thread, ends the fetch.
        with flightsql.connect(d.url) as conn:
            cur = conn.cursor()
            errs = []

            def fetch():
                try:
                    cur.execute("SELECT a.i, b.v FROM main.big a CROSS JOIN main.big b")
                    cur.fetch_arrow_table()
                except adbc_driver_manager.Error as ex:
                    errs.append(ex)
            th = threading.Thread(target=fetch)
            th.start()
            deadline = time.time() + 30
            while time.time() < deadline and not [q for q in action(c, "list_queries") if q["kind"] == "sql"]:
                time.sleep(0.05)
            cur.adbc_cancel()
            th.join(60)
            assert not th.is_alive()
            assert errs and "cancel" in str(errs[0]).lower(), errs
            deadline = time.time() + 10
            while time.time() < deadline and [q for q in action(c, "list_queries") if q["kind"] == "sql"]:
                time.sleep(0.05)
            assert not [q for q in action(c, "list_queries") if q["kind"] == "sql"]
            cur2 = conn.cursor()
            cur2.execute("SELECT count(*) FROM main.big WHERE i < 5")
            assert cur2.fetchall() == [(5,)]
            cur2.close()
        c.close()


FRAGS = 30
CELLS = 10_000


@pytest.fixture(scope="module")
def fragmented(tmp_path_factory):
    d = tmp_path_factory.mktemp("sqlgov_frag")
    uri = os.path.join(d, "frag")
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 2**40), tile=10_000, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, allows_duplicates=True,
                                                attrs=[tiledb.Attr("v", dtype=np.float64)]))
    rng = np.random.default_rng(2)
    for f in range(FRAGS):
        with tiledb.open(uri, "w") as A:
            k = rng.integers(0, 2**40, CELLS)
            A[k] = {"v": rng.random(CELLS)}
    return d


def test_cancel_consolidation(flightd_bin, fragmented):
    """A consolidation of 30 fragments shows in list_queries as an action
    and cancel_query stops it (CANCELLED for its client); TileDB then reads
    the array exactly as before, with the same fragments."""
    uri = os.path.join(fragmented, "frag")
    with tiledb.open(uri) as A:
        before = A.query(order="U")[:]
    frags_before = sorted(f.uri for f in tiledb.array_fragments(uri))
    assert len(frags_before) == FRAGS
    with running(flightd_bin, fragmented, "-stall-timeout", "0") as d:
        c = fl.connect(d.url)
        errs, done = [], []

        def consolidate():
            try:
                done.append(action(fl.connect(d.url), "consolidate", {"array": "frag"}))
            except fl.FlightError as ex:
                errs.append(ex)
        th = threading.Thread(target=consolidate)
        t = time.time()
        th.start()
        mine = []
        while time.time() - t < 30 and not mine and th.is_alive():
            mine = [q for q in action(c, "list_queries") if q["kind"] == "action"
                    and q["id"] != "" and q.get("array") == "frag"]
            time.sleep(0.01)
        assert mine, ("the consolidation was not listed", done, errs)
        assert action(c, "cancel_query", {"id": mine[0]["id"]}) == {"cancelled": mine[0]["id"]}
        th.join(60)
        assert not done, f"the consolidation finished before the cancel ({time.time() - t:.1f}s)"
        assert errs and isinstance(errs[0], fl.FlightCancelledError) and "canceled" in str(errs[0]), errs
        print(f"consolidation of {FRAGS} fragments cancelled after {time.time() - t:.2f}s")
        expect_code("NOT_FOUND", action, c, "cancel_query", {"id": mine[0]["id"]})
        c.close()
    assert sorted(f.uri for f in tiledb.array_fragments(uri)) == frags_before
    with tiledb.open(uri) as A:
        after = A.query(order="U")[:]
    ob, oa = np.lexsort((before["v"], before["k"])), np.lexsort((after["v"], after["k"]))
    assert len(oa) == FRAGS * CELLS
    for name in ("k", "v"):
        np.testing.assert_array_equal(after[name][oa], before[name][ob])
