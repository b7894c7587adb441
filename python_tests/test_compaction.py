"""Automatic compaction (-compact-after) against the real daemon: fragment
counts drop while writers and readers (flightd DoGet and TileDB itself)
run, every read seeing exactly whole acknowledged writes; kill -9 at
random moments of a compacting daemon loses no acknowledged row and leaves
an array TileDB opens; two daemons on one S3 bucket never compact one
array at once (the lease); a full disk fails the compaction cleanly while
reads go on. Longer kill -9 campaigns: COMPACT_KILL_TRIALS=300."""

import json
import os
import random
import re
import shutil
import signal
import threading
import time
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest
import tiledb

from flightd_fixture import Daemon, action, flightd_bin, put, read  # noqa: F401 (fixture)
from s3_fixture import S3_ENV, free_port, moto, s3_flags, tiledb_ctx  # noqa: F401 (fixture)
from test_reliability_disk import fill, tmpfs  # noqa: F401 (fixture)

# No duplicates: a cell is one row however many fragments hold it (a
# compaction killed between its commit and its .vac file leaves the old
# fragments visible beside the new one, with the same cells).
SCHEMA = {"type": "sparse", "allows_duplicates": False, "capacity": 64,
          "dimensions": [{"name": "x", "type": "int64", "domain": [0, 10**9], "tile": 10**6}],
          "attributes": [{"name": "v", "type": "int64"}]}
ROWS = 40  # rows per write


def batch(k):
    """Write k: cells x = k*ROWS .. k*ROWS+ROWS-1, v = 7x+1 (unique x)."""
    x = np.arange(k * ROWS, (k + 1) * ROWS, dtype=np.int64)
    return pa.table({"x": pa.array(x), "v": pa.array(7 * x + 1)})


def writes_in(xs, vs, what):
    """The set of writes a read holds; fails unless every row is right,
    no cell appears twice and every write is whole."""
    xs, vs = np.asarray(xs, dtype=np.int64), np.asarray(vs, dtype=np.int64)
    assert len(np.unique(xs)) == len(xs), f"{what}: a cell read twice"
    assert np.array_equal(vs, 7 * xs + 1), f"{what}: wrong values"
    ks, counts = np.unique(xs // ROWS, return_counts=True)
    assert (counts == ROWS).all(), f"{what}: partial writes {ks[counts != ROWS].tolist()}"
    return set(ks.tolist())


def flightd_writes(c, name="a"):
    t = read(c, array=name)
    return writes_in(t.column("x").to_numpy(), t.column("v").to_numpy(), "flightd")


RACED = {"opens": 0, "reads": 0}


def read_again(read_once, raced, kind):
    """read_once() until it does not fail with a race against a vacuum
    (raced(e) says whether e is one), ten tries at most, counting the
    retries in RACED[kind]. A vacuum removes its files one by one, so each
    retry waits a little longer (at once, it can land inside the same
    vacuum again). What any read returns is checked in full."""
    for attempt in range(10):
        try:
            return read_once()
        except Exception as e:  # noqa: BLE001 (re-raised unless raced)
            if not raced(e) or attempt == 9:
                raise
            RACED[kind] += 1
            time.sleep(0.05 * (attempt + 1))


def flightd_writes_under_vacuum(c, name="a"):
    """flightd_writes for a daemon run with -vacuum-grace 0s: a vacuum may
    remove a superseded fragment under a read that opened before the
    compaction (the grace is what prevents that, and the test turns it
    off to kill vacuums too). Such a read fails with UNAVAILABLE saying
    so; reading again sees the state after the vacuum."""
    return read_again(lambda: flightd_writes(c, name),
                      lambda e: isinstance(e, fl.FlightUnavailableError) and "vacuumed during the read" in str(e),
                      "reads")


def tiledb_writes(uri, ctx=None):
    # TileDB's open lists __commits and then reads each file's size: a
    # vacuum (TileDB's own as well) removing a commit in between fails
    # that open with "No such file or directory". Opening again sees the
    # state after the vacuum.
    def once():
        with tiledb.open(uri, ctx=ctx) as A:
            r = A[:]
        return writes_in(r["x"], r["v"], "TileDB")
    return read_again(once, lambda e: isinstance(e, tiledb.TileDBError) and "No such file or directory" in str(e),
                      "opens")


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_for(pred, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def compacted(c, name, after):
    """True once array name is as compaction leaves it with -compact-after
    `after`: fewer than `after` fragments newer than its last
    consolidation (writes, one instant each), and at most one more
    visible fragment (that consolidation, which covers the ones before)."""
    frags = action(c, "list_fragments", {"array": name})
    newer = [f for f in frags if f["timestamps"][0] == f["timestamps"][1]]
    return len(newer) < after and len(frags) <= after


def logged(d, msg, array=None):
    return [r for r in d.records() if r.get("message") == msg and (array is None or r.get("array") == array)]


def compactions_running(d):
    """Compactions d's log shows started and not yet done or failed."""
    failed = [r for r in d.records() if r.get("message", "").startswith("compaction failed")]
    return len(logged(d, "compaction started")) - len(logged(d, "compaction done")) - len(failed)


def test_compaction_under_readers_and_writers(flightd_bin, tmp_path):  # noqa: F811
    data = tmp_path / "data"
    mport = free_port()
    d = Daemon(flightd_bin, data, args=["-compact-after", "8", "-vacuum-grace", "1s", "-metrics-listen", f"127.0.0.1:{mport}"])
    stop = threading.Event()
    try:
        c = d.client()
        action(c, "create_array", dict(SCHEMA, array="a"))
        acked, started = set(), set()
        lock = threading.Lock()
        errors, reads = [], {"flightd": 0, "tiledb": 0}

        def writer(first, n):
            wc = d.client()
            try:
                for k in range(first, first + n):
                    with lock:
                        started.add(k)
                    put(wc, "a", batch(k))
                    with lock:
                        acked.add(k)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)
            finally:
                wc.close()

        def reader(kind):
            rc = d.client()
            try:
                while not stop.is_set():
                    with lock:
                        before = set(acked)
                    got = flightd_writes(rc) if kind == "flightd" else tiledb_writes(str(data / "a"))
                    with lock:
                        after = set(started)
                    assert before <= got, f"{kind} lost acknowledged writes {sorted(before - got)}"
                    assert got <= after, f"{kind} read writes never made {sorted(got - after)}"
                    reads[kind] += 1
            except Exception as e:  # noqa: BLE001
                errors.append(e)
            finally:
                rc.close()

        # Daemon threads, stopped in `finally` as well: the TileDB reader
        # reads the files directly and would outlive a failed assertion.
        writers = [threading.Thread(target=writer, args=(i * 1000, 30), daemon=True) for i in range(2)]
        readers = [threading.Thread(target=reader, args=(k,), daemon=True) for k in ("flightd", "tiledb")]
        for t in writers + readers:
            t.start()
        for t in writers:
            t.join(120)
        # Let the last compaction and its vacuum run under the readers.
        assert wait_for(lambda: compacted(c, "a", 8), 30), action(c, "list_fragments", {"array": "a"})
        assert wait_for(lambda: metric(mport, "tileflight_compaction_vacuums_total") >= 1, 30)
        stop.set()
        for t in readers:
            t.join(60)
        assert not errors, errors
        assert reads["flightd"] > 0 and reads["tiledb"] > 0, reads
        assert flightd_writes(c) == acked == tiledb_writes(str(data / "a"))
        assert compacted(c, "a", 8)
        desc = action(c, "describe", {"array": "a"})
        assert desc["fragment_count"] <= 8
        lc = desc["last_compaction"]
        assert lc and lc["timestamps"][0] < lc["timestamps"][1] and lc["fragment"], desc
        # describe's output still creates an array like it.
        action(c, "create_array", dict(desc, array="copy"))
        runs = metric(mport, 'tileflight_compactions_total{result="done"}')
        merged = metric(mport, "tileflight_compaction_fragments_merged_total")
        assert runs >= 5 and merged >= 8 * runs, (runs, merged)
        assert metric(mport, "tileflight_compaction_seconds_count") >= runs
        assert metric(mport, 'tileflight_compactions_total{result="failed"}') == 0
        assert len(logged(d, "compaction done", "a")) == runs
        print(f"\n60 writes, {reads['flightd']} flightd and {reads['tiledb']} TileDB reads "
              f"({RACED['opens']} TileDB opens raced a vacuum and were retried), "
              f"{runs:.0f} compactions merged {merged:.0f} fragments")
    finally:
        stop.set()
        d.stop()


def put_quietly(*a):
    try:
        put(*a)
    except Exception:  # noqa: BLE001 (killed under it: never acknowledged)
        pass


def test_kill9_during_compaction(flightd_bin, tmp_path):  # noqa: F811
    """Trials of: start, write fragments with compaction (and an immediate
    vacuum) on, kill -9 at a random moment; after each, TileDB opens the
    array as the kill left it and both engines hold every acknowledged
    write."""
    trials = int(os.environ.get("COMPACT_KILL_TRIALS", "30"))
    rnd = random.Random(int(os.environ.get("COMPACT_KILL_SEED", "25")))
    data = tmp_path / "data"
    args = ["-compact-after", "4", "-vacuum-grace", "0s", "-compact-lease", "3s"]
    acked, k = set(), 0
    in_compaction = 0
    d = Daemon(flightd_bin, data, args=args)
    action(d.client(), "create_array", dict(SCHEMA, array="a"))
    t0 = time.time()
    for trial in range(trials):
        c = d.client()
        deadline = time.time() + rnd.uniform(0.05, 0.35)
        while time.time() < deadline:
            try:
                put(c, "a", batch(k))
                acked.add(k)
            except Exception:  # noqa: BLE001 (the daemon may be busy; nothing acknowledged)
                pass
            k += 1
        # Kill in the middle of whatever runs now (a write, a compaction,
        # a vacuum or nothing). Every third trial waits (3 s at most)
        # for a compaction to be running, so that kills land inside
        # compactions however fast the machine runs them.
        if trial % 3 == 0:
            end = time.time() + 3.0
            while time.time() < end:
                if compactions_running(d) > 0:
                    time.sleep(rnd.uniform(0, 0.05))
                    break
                try:
                    put(c, "a", batch(k))
                    acked.add(k)
                except Exception:  # noqa: BLE001
                    pass
                k += 1
        elif rnd.random() < 0.5:
            threading.Thread(target=put_quietly, args=(c, "a", batch(k)), daemon=True).start()
            k += 1
            time.sleep(rnd.uniform(0, 0.02))
        running = compactions_running(d)
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait()
        c.close()
        if running > 0:
            in_compaction += 1
        got = tiledb_writes(str(data / "a"))
        assert acked <= got, f"trial {trial}: TileDB lost acknowledged writes {sorted(acked - got)[:10]}"
        d = Daemon(flightd_bin, data, args=args)
        got = flightd_writes_under_vacuum(d.client())
        assert acked <= got, f"trial {trial}: flightd lost acknowledged writes {sorted(acked - got)[:10]}"
        acked = got  # writes that committed without an answer count from now on
    try:
        c = d.client()
        assert wait_for(lambda: compacted(c, "a", 4), 30), action(c, "list_fragments", {"array": "a"})
        assert flightd_writes_under_vacuum(c) == tiledb_writes(str(data / "a")) == acked
    finally:
        d.stop()
    print(f"\n{trials} kill -9 trials in {time.time() - t0:.1f}s, {len(acked)} writes kept, "
          f"{in_compaction} kills during a compaction, {RACED['reads']} flightd reads met a vacuum "
          f"(-vacuum-grace 0s) and were read again")
    assert in_compaction >= min(5, trials // 6), f"only {in_compaction} of {trials} kills hit a compaction"


def test_cluster_one_compactor_per_array(flightd_bin, moto):  # noqa: F811
    bucket = moto.new_bucket()
    ports = [free_port() for _ in range(2)]
    urls = [f"grpc://127.0.0.1:{p}" for p in ports]
    nodes = [Daemon(flightd_bin, f"s3://{bucket}/c", env=S3_ENV, args=s3_flags(moto.url) + [
        "-listen", f"127.0.0.1:{p}", "-advertise", u, "-peers", ",".join(urls),
        "-compact-after", "4", "-vacuum-grace", "1s", "-compact-lease", "5s"]) for p, u in zip(ports, urls)]
    try:
        cs = [n.client() for n in nodes]
        action(cs[0], "create_array", dict(SCHEMA, array="a"))
        action(cs[0], "create_array", dict(SCHEMA, array="held"))
        # Another node (long gone, its lease unexpired) holds "held".
        lease = json.dumps({"owner": "elsewhere", "expires": int(time.time() * 1000) + 600_000}).encode()
        moto.client().put_object(Bucket=bucket, Key="c/held/__tileflight_compact.lease/00000000000000000001", Body=lease)
        acked = set()

        def writer(i):
            for k in range(i * 1000, i * 1000 + 10):
                put(cs[i], "a", batch(k))
                acked.add(k)

        ts = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(2)]
        for t in ts:
            t.start()
        for k in range(8):
            put(cs[k % 2], "held", batch(k))
        for t in ts:
            t.join(120)
        # Quiet: the last compaction has finished (no node's log shows one
        # started and not ended) and the fragments are few.
        def settled():
            n_started = sum(len(logged(n, "compaction started", "a")) for n in nodes)
            n_ended = sum(len(logged(n, "compaction done", "a")) for n in nodes)
            return n_started == n_ended and compacted(cs[0], "a", 4)
        assert wait_for(settled, 60)
        # Each node's compactions of "a", as intervals: none overlap.
        spans = []
        for i, n in enumerate(nodes):
            s = [r["at_ms"] for r in logged(n, "compaction started", "a")]
            e = [r["at_ms"] for r in logged(n, "compaction done", "a")]
            assert len(s) == len(e), (s, e, [r for r in n.records() if r.get("array") == "a" and "compaction" in r.get("message", "")])
            spans += [(a, b, i) for a, b in zip(s, e)]
        spans.sort()
        for (a1, b1, n1), (a2, b2, n2) in zip(spans, spans[1:]):
            assert b1 <= a2, f"node {n1} and node {n2} compacted at once: {(a1, b1)} {(a2, b2)}"
        assert spans, "no compaction"
        assert flightd_writes(cs[1]) == acked
        ctx = tiledb_ctx(moto.url)
        assert tiledb_writes(f"s3://{bucket}/c/a", ctx=ctx) == acked
        # The lease another node holds is respected: "held" keeps its 8.
        time.sleep(1)
        assert action(cs[1], "describe", {"array": "held"})["fragment_count"] == 8
        assert not logged(nodes[0], "compaction started", "held") and not logged(nodes[1], "compaction started", "held")
        assert tiledb_writes(f"s3://{bucket}/c/held", ctx=ctx) == set(range(8))
        print(f"\ncompactions of one array by node: {[sum(1 for s in spans if s[2] == i) for i in range(2)]}")
    finally:
        for n in nodes:
            n.stop()


def test_full_disk_during_compaction(flightd_bin, tmpfs):  # noqa: F811
    d = Daemon(flightd_bin, tmpfs)
    c = d.client()
    action(c, "create_array", dict(SCHEMA, array="a"))
    for k in range(8):
        put(c, "a", batch(2000 * k))
    d.stop()
    before = tiledb_writes(str(tmpfs / "a"))
    frags = sorted(os.listdir(tmpfs / "a" / "__fragments"))
    commits = sorted(os.listdir(tmpfs / "a" / "__commits"))
    filler = fill(tmpfs)
    # Room for the lease (a page), not for the consolidated fragment.
    os.truncate(filler, os.path.getsize(filler) - 8192)
    mport = free_port()
    d = Daemon(flightd_bin, tmpfs, args=["-compact-after", "4", "-vacuum-grace", "0s", "-metrics-listen", f"127.0.0.1:{mport}"])
    try:
        c = d.client()
        # The scan at start compacts "a": the disk is full.
        assert wait_for(lambda: metric(mport, 'tileflight_compactions_total{result="failed"}') == 1, 30)
        failed = [r for r in d.records() if r.get("message", "").startswith("compaction failed")]
        assert len(failed) == 1 and "storage is full" in failed[0]["error"], failed
        assert logged(d, "compaction started", "a"), "the lease, not the compaction, failed"
        # Nothing partial is visible, reads go on, TileDB opens the array.
        assert flightd_writes(c) == before == tiledb_writes(str(tmpfs / "a"))
        assert sorted(os.listdir(tmpfs / "a" / "__fragments")) == frags
        assert sorted(os.listdir(tmpfs / "a" / "__commits")) == commits
        assert action(c, "describe", {"array": "a"})["fragment_count"] == 8
        # Space again: -compact-after more writes bring a compaction that
        # succeeds.
        os.remove(filler)
        for k in range(4):
            put(c, "a", batch(99_990 + k))
        assert wait_for(lambda: action(c, "describe", {"array": "a"})["fragment_count"] == 1, 30)
        assert flightd_writes(c) == before | set(range(99_990, 99_994)) == tiledb_writes(str(tmpfs / "a"))
        assert metric(mport, 'tileflight_compactions_total{result="done"}') == 1
    finally:
        d.stop()
