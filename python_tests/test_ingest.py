"""Ingest at scale: the server_info action, writes cut by bytes under
-max-message-bytes, writes over -max-put-bytes staged in pieces and
committed at once (checked by TileDB), size errors that name the flag and
the client option, and a client killed half way through a staged write.

The put limit is made small (-max-put-bytes 8 MiB, -max-message-bytes
4 MiB) so that a few tens of MiB stand for a multi-GiB write; set
TILEFLIGHT_INGEST_GIB=N for a real N GiB write (make ingest-gib)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest
import tiledb

import tileflight
from flightd_fixture import REPO, Daemon, flightd_bin  # noqa: F401 (fixture)

MiB = 1 << 20
SPARSE = {"type": "sparse", "capacity": 4096,
          "dimensions": [{"name": "k", "type": "int64", "domain": [0, 1 << 40], "tile": 1 << 20}],
          "attributes": [{"name": "s", "type": "string_utf8", "cell_val_num": "var"}]}


def wide(n, width=1100, start=0):
    """n rows of width-byte strings, each naming its key."""
    k = np.arange(start, start + n, dtype=np.int64)
    pad = "x" * (width - 12)
    return pa.table({"k": k, "s": pa.array([f"{i:011d}:{pad}" for i in range(start, start + n)])})


def tiledb_rows(path):
    with tiledb.open(path) as A:
        r = A.query(attrs=["s"])[:]
    order = np.argsort(r["k"])
    return r["k"][order], r["s"][order]


def fragment_dirs(path):
    d = os.path.join(path, "__fragments")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def raw_put_error(url, array, table, chunk):
    """The error a plain pyarrow DoPut of table in chunk-row batches gets."""
    raw = fl.connect(url)
    w, r = raw.do_put(fl.FlightDescriptor.for_command(json.dumps({"array": array})), table.schema)
    msg = ""
    try:
        w.write_table(table, max_chunksize=chunk)
        w.done_writing()
        r.read()
    except (pa.ArrowException, fl.FlightError) as e:
        msg = str(e)
    try:
        w.close()
    except (pa.ArrowException, fl.FlightError) as e:
        msg = str(e)  # the daemon's status
    raw.close()
    return msg


@pytest.fixture(scope="module")
def default_daemon(flightd_bin, tmp_path_factory):  # noqa: F811
    d = Daemon(flightd_bin, tmp_path_factory.mktemp("ingest-default"))
    yield d
    d.stop()


@pytest.fixture(scope="module")
def small(flightd_bin, tmp_path_factory):  # noqa: F811
    d = Daemon(flightd_bin, tmp_path_factory.mktemp("ingest-small"),
               args=["-max-put-bytes", "8MiB", "-max-message-bytes", "4MiB", "-max-fragment-bytes", "4MiB",
                     "-vacuum-grace", "2s"])
    yield d
    d.stop()


def test_server_info(default_daemon, small):
    with tileflight.connect(default_daemon.url) as c:
        info = c.server_info()
        assert info["limits"]["max_message_bytes"] == 64 * MiB
        assert info["limits"]["max_put_bytes"] == 1 << 30
        assert info["limits"]["max_fragment_bytes"] == 64 * MiB
        assert info["limits"]["max_ticket_bytes"] == 1 << 20
        assert info["limits"]["max_ranges_per_dimension"] == 65536
        assert info["limits"]["max_batch_rows"] == 1 << 24
        assert info["protocol"] == 1 and info["version"]
        for f in ("staged_writes", "sql", "b2nd", "aggregates", "conditions"):
            assert f in info["features"], info["features"]
        assert "encryption" not in info["features"]
        assert c.server_info() is info  # cached
    with tileflight.connect(small.url) as c:
        lim = c.server_info()["limits"]
        assert (lim["max_message_bytes"], lim["max_put_bytes"], lim["max_fragment_bytes"]) == (4 * MiB, 8 * MiB, 4 * MiB)


def test_wide_rows_default_daemon(default_daemon):
    """65,536 rows of 1.1 KB strings (~70 MiB): one gRPC message over the
    default 64 MiB when sent as one batch; client.write cuts it."""
    t = wide(65536)
    assert pa.ipc.get_record_batch_size(t.combine_chunks().to_batches()[0]) > 64 * MiB
    with tileflight.connect(default_daemon.url) as c:
        c.create(SPARSE, "wide")
        # The raw batch, as a naive client sends it: the daemon's error
        # names its flag and the client option.
        msg = raw_put_error(default_daemon.url, "wide", t, 65536)
        assert "RESOURCE_EXHAUSTED" in msg and "exceeds -max-message-bytes (64 MiB)" in msg and "max_batch_bytes" in msg, msg
        assert fragment_dirs(os.path.join(default_daemon.data, "wide")) == []

        res = c.write("wide", t)
        assert res.rows == 65536 and "puts" not in res
    k, s = tiledb_rows(os.path.join(default_daemon.data, "wide"))
    assert np.array_equal(k, np.arange(65536))
    assert list(s[:3]) == t.column("s").to_pylist()[:3] and list(s) == t.column("s").to_pylist()


def test_put_limit_error_text(small):
    with tileflight.connect(small.url) as c:
        c.create(SPARSE, "refused")
    # 11 MB in 1.1 MB batches: each message fits, the DoPut does not.
    msg = raw_put_error(small.url, "refused", wide(10000), 1000)
    assert "RESOURCE_EXHAUSTED" in msg and "exceeds -max-put-bytes" in msg and "stage writes above this size automatically" in msg, msg
    assert "8.0 MiB" in msg, msg


def test_one_row_over_the_message_limit(small):
    with tileflight.connect(small.url) as c:
        c.create(SPARSE, "onerow")
        with pytest.raises(tileflight.TileflightError) as ei:
            c.write("onerow", wide(3, width=5 * MiB))
        assert ei.value.code == "RESOURCE_EXHAUSTED"
        assert "-max-message-bytes" in str(ei.value) and "max_batch_bytes=" in str(ei.value), ei.value
        # A byte cut chosen by the caller.
        res = c.write("onerow", wide(3000), max_batch_bytes=256 << 10)
        assert res.rows == 3000
    assert len(tiledb_rows(os.path.join(small.data, "onerow"))[0]) == 3000


def test_staged_write_is_atomic(small):
    """24 MiB against an 8 MiB put limit: several staged DoPuts, visible to
    TileDB all at once; a failure in a late piece leaves nothing."""
    path = os.path.join(small.data, "big")
    t = wide(22000)
    with tileflight.connect(small.url) as c:
        c.create(SPARSE, "big")
        # stage=True: the caller commits; TileDB sees none of it before.
        res = c.write("big", t, stage=True)
        assert res["puts"] >= 3 and res.rows == 22000, res
        assert len(res.fragments) >= 3 and len(fragment_dirs(path)) == len(res.fragments)
        assert len(tiledb_rows(path)[0]) == 0
        c.commit_fragments("big", res.fragments)
        k, s = tiledb_rows(path)
        assert np.array_equal(k, np.arange(22000)) and list(s) == t.column("s").to_pylist()

        # Automatic: one call, committed.
        res = c.write("big", wide(22000, start=22000))
        assert res["puts"] >= 3
        assert len(tiledb_rows(path)[0]) == 44000
        ts = {f["timestamps"][0] for f in c.fragments("big")[-len(res.fragments):]}
        assert len(ts) == 1  # one timestamp for every piece

        # A key outside the domain in the last piece: refused, the staged
        # pieces aborted, nothing new visible or left on disk.
        before = fragment_dirs(path)
        bad = pa.concat_tables([wide(21000, start=100000), wide(1, start=-1)])
        with pytest.raises(tileflight.TileflightError) as ei:
            c.write("big", bad)
        assert "domain" in str(ei.value).lower(), ei.value
        assert fragment_dirs(path) == before
        assert len(tiledb_rows(path)[0]) == 44000


def test_dense_staged_write_splits_the_first_dimension(small):
    path = os.path.join(small.data, "grid")
    with tileflight.connect(small.url) as c:
        c.create({"type": "dense",
                  "dimensions": [{"name": "r", "type": "int32", "domain": [0, 9999], "tile": 100},
                                 {"name": "c", "type": "int32", "domain": [0, 99], "tile": 100}],
                  "attributes": [{"name": "s", "type": "string_ascii", "cell_val_num": "var"}]}, "grid")
        rows, cols = 1000, 100  # 100,000 cells of ~210 bytes: 21 MB
        vals = [f"{i:08d}" + "y" * 200 for i in range(rows * cols)]
        res = c.write("grid", {"s": vals}, subarray={"r": (500, 500 + rows - 1), "c": (0, cols - 1)})
        assert res["puts"] >= 3 and res.rows == rows * cols, res
        neds = sorted(f["non_empty_domain"]["r"] for f in c.fragments("grid"))
        assert neds[0][0] == 500 and neds[-1][1] == 1499
        assert all(a[1] + 1 == b[0] for a, b in zip(neds, neds[1:])), neds
        with pytest.raises(tileflight.TileflightError, match="cells"):
            c.write("grid", {"s": vals[:-cols]}, subarray={"r": (2000, 2000 + rows - 1), "c": (0, cols - 1)})
    with tiledb.open(path) as A:
        got = A[500:1500, 0:100]["s"]
    assert got.shape == (rows, cols)
    assert [x.decode() if isinstance(x, bytes) else x for x in got.ravel()] == vals
    assert len(fragment_dirs(path)) == len(neds)  # the refused write left nothing


KILLED = textwrap.dedent("""
    import sys, time
    import numpy as np
    import pyarrow as pa
    import tileflight

    def wide(n, start=0):
        pad = "x" * 1088
        return pa.table({"k": np.arange(start, start + n, dtype=np.int64),
                         "s": pa.array([f"{i:011d}:{pad}" for i in range(start, start + n)])})

    def batches():
        for i in range(60):
            yield from wide(1000, start=i * 1000).to_batches()
            if i == 30:  # 33 MB sent: some 8 MiB pieces are staged
                print("staged", flush=True)
                time.sleep(600)

    c = tileflight.connect(sys.argv[1])
    c.write(sys.argv[2], pa.RecordBatchReader.from_batches(wide(1).schema, batches()))
""")


def test_killed_client_leaves_nothing_and_vacuum_cleans(small, tmp_path):
    path = os.path.join(small.data, "killed")
    with tileflight.connect(small.url) as c:
        c.create(SPARSE, "killed")
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO, "python", "src"), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, str(script), small.url, "killed"],
                         stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert p.stdout.readline().strip() == "staged"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    def complete(f):
        return os.path.exists(os.path.join(path, "__fragments", f, "__fragment_metadata.tdb"))
    staged = []
    for _ in range(100):  # the daemon deletes the piece in flight once it sees the hang-up
        staged = fragment_dirs(path)
        if staged and all(complete(f) for f in staged):
            break
        time.sleep(0.1)
    assert len(staged) >= 3, staged
    assert len(tiledb_rows(path)[0]) == 0
    with tileflight.connect(small.url) as c:
        assert c.fragments("killed") == []
        time.sleep(2.5)  # -vacuum-grace 2s
        out = c.vacuum("killed")
    assert sorted(out["uncommitted"]) == staged
    assert fragment_dirs(path) == []
    assert len(tiledb_rows(path)[0]) == 0


def test_adbc_ingest_size_errors_name_the_flags(small):
    """Flight SQL bulk ingest sends the batches its caller gives: over the
    limits, the errors name the flags; batches cut by the caller go in."""
    adbc = pytest.importorskip("adbc_driver_flightsql.dbapi")
    with tileflight.connect(small.url) as c:
        c.create(SPARSE, "adbc")
    with adbc.connect(small.url) as conn, conn.cursor() as cur:
        with pytest.raises(Exception) as ei:
            cur.adbc_ingest("adbc", wide(5000), mode="append")  # one 5.5 MB batch
        assert "exceeds -max-message-bytes (4.0 MiB)" in str(ei.value), ei.value
        with pytest.raises(Exception) as ei:
            cur.adbc_ingest("adbc", pa.Table.from_batches(wide(9000).to_batches(max_chunksize=2000)), mode="append")
        assert "exceeds -max-put-bytes" in str(ei.value), ei.value
        n = cur.adbc_ingest("adbc", pa.Table.from_batches(wide(5000).to_batches(max_chunksize=2000)), mode="append")
        assert n in (5000, -1)
    assert len(tiledb_rows(os.path.join(small.data, "adbc"))[0]) == 5000


@pytest.mark.skipif(not os.environ.get("TILEFLIGHT_INGEST_GIB"), reason="set TILEFLIGHT_INGEST_GIB=N for a real N GiB write")
def test_multi_gib_write(flightd_bin, tmp_path):  # noqa: F811
    gib = float(os.environ["TILEFLIGHT_INGEST_GIB"])
    d = Daemon(flightd_bin, tmp_path / "data")
    try:
        with tileflight.connect(d.url) as c:
            c.create(SPARSE, "huge")
            per = 65536
            n = int(gib * (1 << 30) / 1100 / per) + 1

            def batches():
                for i in range(n):
                    yield from wide(per, start=i * per).to_batches()
            t0 = time.monotonic()
            res = c.write("huge", pa.RecordBatchReader.from_batches(wide(1).schema, batches()))
            dt = time.monotonic() - t0
            print(f"\n{n * per:,} rows, {n * per * 1100 / (1 << 30):.2f} GiB in {dt:.1f} s "
                  f"({n * per * 1100 / MiB / dt:.0f} MiB/s), {res['puts']} staged DoPuts, {len(res.fragments)} fragments")
        with tiledb.open(os.path.join(d.data, "huge")) as A:
            got = A.query(attrs=[], dims=["k"]).multi_index[:]["k"]
        assert len(got) == n * per
    finally:
        d.stop()


class _OldServer(fl.FlightServerBase):
    """A daemon older than server_info: INVALID_ARGUMENT, unknown action."""

    def do_action(self, context, action):
        raise pa.ArrowInvalid(f'unknown action "{action.type}" (actions: describe, ...)')


class _NoAction(fl.FlightServerBase):
    """A Flight server without actions: UNIMPLEMENTED."""

    def do_action(self, context, action):
        raise pa.ArrowNotImplementedError(action.type)


@pytest.mark.parametrize("server", [_OldServer, _NoAction])
def test_server_info_of_an_older_daemon_is_the_defaults(server):
    srv = server("grpc://127.0.0.1:0")
    try:
        with tileflight.connect(f"grpc://127.0.0.1:{srv.port}") as c:
            info = c.server_info()
            assert info["limits"] == {"max_message_bytes": 64 * MiB, "max_put_bytes": 1 << 30}
            assert info["features"] == [] and info["version"] is None
    finally:
        srv.shutdown()


def test_dense_stream_that_fits_is_one_doput(small):
    """A streamed dense write over the 4 MiB look-ahead whose cells (known
    from the box) fit one DoPut streams through one, rather than being held
    in memory for staging; over the threshold it is staged."""
    R = 6250  # x 100 columns of float64: 5 MB
    with tileflight.connect(small.url) as c:
        c.create({"type": "dense",
                  "dimensions": [{"name": "r", "type": "int32", "domain": [0, R - 1], "tile": 250},
                                 {"name": "c", "type": "int32", "domain": [0, 99], "tile": 100}],
                  "attributes": [{"name": "v", "type": "float64"}]}, "dstream")
        vals = np.arange(R * 100, dtype=np.float64) * 0.5
        t = pa.table({"v": vals})

        def stream():
            return pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=10000))
        res = c.write("dstream", stream(), subarray={"r": (0, R - 1), "c": (0, 99)})
        assert "puts" not in res and res.rows == R * 100  # 5 MB of the 8 MiB a DoPut may carry
        res = c.write("dstream", stream(), subarray={"r": (0, R - 1), "c": (0, 99)}, staged=2 << 20)
        assert res["puts"] >= 3 and res.rows == R * 100
    with tiledb.open(os.path.join(small.data, "dstream")) as A:
        np.testing.assert_array_equal(A[:, :]["v"].ravel(), vals)
