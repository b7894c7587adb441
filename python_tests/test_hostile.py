"""Hostile load against the real daemon: clients that open DoGets and never
read them cannot starve the others (each client holds at most its share of
the stream slots, a stream that makes no progress for -stall-timeout is
ended and its memory freed, a call finding every slot taken waits for one),
and running queries can be listed and cancelled (list_queries,
cancel_query) whatever their kind: DoGet, SQL, consolidation."""

import json
import os
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest
import tiledb

from flightd_fixture import action, expect_code, flightd_bin, grpc_code, read, running  # noqa: F401

N = 16_000_000  # 128 MiB of float64: far more than unread_client buffers of a stream


def unread_client(url):
    """A client for DoGets it will not read. gRPC's bandwidth-delay probing
    is off: with it, the client's transport grows each stream's window with
    the round trip it measures: it took in 16 MiB of each unread stream on
    an idle machine, 32 and 65 MiB beside three busy loops, and in CI
    (every such stream drained OK) apparently the whole 128 MiB. That is
    reading the stream, which the daemon rightly counts as progress; with
    probing off each stream stops at about 1 MiB, loaded or not."""
    return fl.connect(url, generic_options=[("grpc.http2.bdp_probe", 0)])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    uri = os.path.join(d, "big")
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, N - 1), tile=N // 16, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr("v", dtype=np.float64)]))
    with tiledb.open(uri, "w") as A:
        A[:] = np.arange(N, dtype=np.float64)
    return d


def drain(reader):
    """Read a DoGet to its end chunk by chunk. Not read_all: pyarrow turns a
    CANCELLED status met inside read_all into a KeyboardInterrupt (its
    signal handling takes any cancellation for Ctrl-C)."""
    while True:
        try:
            reader.read_chunk()
        except StopIteration:
            return


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def rss_settles(pid, limit_mib, timeout):
    """Polls pid's RSS (from /proc: asking the daemon would be a call) until
    it is at most limit_mib, for up to timeout seconds; returns the last
    reading."""
    deadline = time.time() + timeout
    while (rss := rss_mib(pid)) > limit_mib and time.time() < deadline:
        time.sleep(0.2)
    return rss


def wait_no_dogets(c, timeout):
    """Waits until list_queries shows no DoGet running; False if one still
    runs after timeout seconds."""
    deadline = time.time() + timeout
    while [q for q in action(c, "list_queries") if q["kind"] == "doget"]:
        if time.time() >= deadline:
            return False
        time.sleep(0.1)
    return True


def test_stalled_doggets_do_not_starve_others(flightd_bin, data):
    """64 DoGets opened on one connection and never read, then normal
    clients: each normal client is answered within a few seconds, the
    stalled ones beyond the client's share are refused at once naming
    -max-queries-per-peer, the rest end CANCELLED after -stall-timeout,
    and the daemon's memory comes back down."""
    # The stall timeout outlasts the 64 opens: they took about 2 s beside
    # three busy loops (each admitted stream plans and decodes its first
    # tiles), and a stream stopped before the last open frees its slot for
    # one of them, which would then not be refused.
    with running(flightd_bin, data, "-stall-timeout", "5s", "-idle-release", "1s") as d:
        base = rss_mib(d.proc.pid)
        bad = unread_client(d.url)
        readers = []
        refused = []
        t_open = time.time()
        for _ in range(64):
            try:
                readers.append(bad.do_get(fl.Ticket(json.dumps({"array": "big"}).encode())))
            except (fl.FlightError, pa.ArrowException) as e:
                refused.append(e)
        opened = time.time() - t_open
        time.sleep(0.5)
        t0 = time.time()
        times = []
        for _ in range(8):
            c = fl.connect(d.url)
            t = time.time()
            assert read(c, options=fl.FlightCallOptions(timeout=20), array="big", subarray={"i": [[0, 99999]]}).num_rows == 100000
            times.append(time.time() - t)
            c.close()
        assert max(times) < 5, times
        # The stalled streams: at most the client's share (16 of 32) ran;
        # the others were refused, and those that ran end once stalled.
        # Reading them before the watchdog stopped them would be progress,
        # so wait until no DoGet runs any more: each stream is stopped
        # -stall-timeout (5 s) after its send blocked.
        watcher = fl.connect(d.url)
        assert wait_no_dogets(watcher, 20), action(watcher, "list_queries")
        codes = []
        for r in readers:
            try:
                drain(r)
                codes.append("OK")
            except (fl.FlightError, pa.ArrowException) as e:
                codes.append(grpc_code(e))
        msgs = [str(e) for e in refused] + [c for c in codes]
        n_exhausted = sum(1 for c in codes if c == "RESOURCE_EXHAUSTED") + len(refused)
        assert n_exhausted >= 64 - 16, (f"64 opened in {opened:.1f} s", msgs[:5])
        assert "CANCELLED" in codes, codes
        assert any("-max-queries-per-peer" in m for m in msgs + [str(e) for e in refused]) or any(
            "max-queries-per-peer" in r for r in [json.dumps(x) for x in d.records()]), msgs[:3]
        # Their memory is freed: once no call has run for -idle-release,
        # the daemon is back near where it started (16 stalled streams
        # took it past 1 GiB). Polling /proc, not the daemon: a call
        # would end the idle period.
        at_stop = rss_mib(d.proc.pid)
        rss = rss_settles(d.proc.pid, base + 64, 10)
        assert rss <= base + 64, (base, at_stop, rss)
        # Nothing left running, and the daemon serves.
        assert wait_no_dogets(watcher, 10)
        assert read(watcher, array="big", subarray={"i": [[0, 9]]}).num_rows == 10
        assert time.time() - t0 < 30
        watcher.close()
        bad.close()


def test_list_and_cancel_queries(flightd_bin, data, tmp_path):
    """A slow DoGet, a SQL statement and a consolidation show in
    list_queries with their kind; cancel_query ends each (CANCELLED for its
    client); unknown ids are NOT_FOUND; a read-only token sees only its
    own queries and may not cancel another's."""
    tokens = tmp_path / "tokens"
    tokens.write_text("w rw writer\nr ro reader\nr2 ro other\n")
    with running(flightd_bin, data, "-tokens-file", str(tokens), "-stall-timeout", "0") as d:
        def opts(tok):
            return fl.FlightCallOptions(headers=[(b"authorization", ("Bearer " + tok).encode())], timeout=30)
        c = unread_client(d.url)
        slow = c.do_get(fl.Ticket(json.dumps({"array": "big"}).encode()), options=opts("r"))
        deadline = time.time() + 10
        mine = []
        while time.time() < deadline and not mine:
            mine = [q for q in action(c, "list_queries", options=opts("w")) if q["kind"] == "doget"]
            time.sleep(0.05)
        assert mine and mine[0]["array"] == "big" and mine[0]["user"] == "reader", mine
        q = mine[0]
        assert set(q) >= {"id", "kind", "array", "user", "peer", "started", "rows", "bytes"}
        assert {x["user"] for x in action(c, "list_queries", options=opts("r2"))} == {"other"}  # its own call only
        assert q["id"] not in [x["id"] for x in action(c, "list_queries", options=opts("r2"))]
        expect_code("PERMISSION_DENIED", action, c, "cancel_query", {"id": q["id"]}, options=opts("r2"))
        assert action(c, "cancel_query", {"id": q["id"]}, options=opts("r")) == {"cancelled": q["id"]}
        with pytest.raises(fl.FlightError) as e:
            drain(slow)
        assert grpc_code(e.value) == "CANCELLED", e.value
        expect_code("NOT_FOUND", action, c, "cancel_query", {"id": q["id"]}, options=opts("w"))
        expect_code("NOT_FOUND", action, c, "cancel_query", {"id": "999999"}, options=opts("w"))

        # A SQL statement, through ADBC: its text shows, and cancelling it
        # ends the client's fetch.
        import adbc_driver_flightsql.dbapi as flightsql
        import adbc_driver_manager
        hdr = "adbc.flight.sql.authorization_header"
        errs = []

        def run_sql():
            try:
                with flightsql.connect(d.url, db_kwargs={hdr: "Bearer w"}) as conn:
                    cur = conn.cursor()
                    cur.execute("SELECT a.i, b.v FROM main.big AS a JOIN main.big AS b ON a.i = b.i + 1 ORDER BY a.v DESC")
                    cur.fetch_arrow_table()
            except adbc_driver_manager.Error as ex:
                errs.append(ex)
        th = threading.Thread(target=run_sql)
        th.start()
        deadline = time.time() + 30
        sql = []
        while time.time() < deadline and not sql:
            sql = [x for x in action(c, "list_queries", options=opts("w")) if x["kind"] == "sql" and x.get("sql")]
            time.sleep(0.05)
        assert sql and "JOIN main.big" in sql[0]["sql"], sql
        action(c, "cancel_query", {"id": sql[0]["id"]}, options=opts("w"))
        th.join(60)
        assert not th.is_alive()
        assert errs and ("cancel" in str(errs[0]).lower()), errs
        assert d.alive()
        c.close()


def test_sql_timeout(flightd_bin, data):
    """A statement that would run long (a self-join of 16 M rows, sorted)
    ends at -sql-timeout with DEADLINE_EXCEEDED naming the flag; the daemon
    serves on and its memory comes back down."""
    import adbc_driver_flightsql.dbapi as flightsql
    import adbc_driver_manager
    with running(flightd_bin, data, "-sql-timeout", "2s", "-idle-release", "1s") as d:
        base = rss_mib(d.proc.pid)
        t = time.time()
        with flightsql.connect(d.url) as conn:
            cur = conn.cursor()
            with pytest.raises(adbc_driver_manager.Error) as e:
                cur.execute("SELECT a.i, b.v FROM main.big AS a JOIN main.big AS b ON a.i = b.i + 1 ORDER BY a.v DESC")
                cur.fetch_arrow_table()
            took = time.time() - t
            assert "sql-timeout" in str(e.value) and "DeadlineExceeded" in str(e.value), e.value
            assert took < 30, took
            cur.execute("SELECT count(*) FROM main.big WHERE i < 10")
            assert cur.fetchall() == [(10,)]
            cur.close()
        assert d.alive()
        rss = rss_settles(d.proc.pid, base + 256, 20)
        assert rss <= base + 256, (base, rss)
