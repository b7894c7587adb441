"""Corruption campaign: random byte flips and truncations in every kind of
file of real arrays written by TileDB (data tiles, fragment metadata,
schema, commits, array metadata). After each, flightd answers describe,
a full read, get_metadata and list_fragments: never a crash or a hang
(every call has a deadline), an error (DataLoss above all) or the correct
data, and never wrong data from a data file covered by a checksum filter.
Wrong data from an array without checksums is counted, not failed: no
reader can tell."""

import os
import shutil
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import tiledb

from .lib import Daemon, action, get, grpc_code, rng

DEADLINE = 20.0  # seconds each call may take
KINDS = ["data", "fragment_metadata", "schema", "commits", "array_metadata"]


def _filters(checksum):
    if checksum == "sha256":
        return tiledb.FilterList([tiledb.ZstdFilter(level=3), tiledb.ChecksumSHA256Filter()])
    if checksum == "md5":
        return tiledb.FilterList([tiledb.ChecksumMD5Filter(), tiledb.LZ4Filter()])
    return tiledb.FilterList([tiledb.ByteShuffleFilter()])  # no integrity check at all


def make_arrays(pristine, seed=0):
    """Three arrays of several fragments and metadata: sparse with SHA-256,
    dense with MD5, sparse without checksums."""
    r = np.random.default_rng(seed)
    specs = {"sp_sha256": ("sparse", "sha256"), "dn_md5": ("dense", "md5"), "sp_plain": ("sparse", None)}
    for name, (kind, ck) in specs.items():
        uri = os.path.join(pristine, name)
        f = _filters(ck)
        if kind == "sparse":
            dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 9999), tile=1000, dtype=np.int64, filters=f),
                                tiledb.Dim("y", domain=(0, 9999), tile=1000, dtype=np.int64, filters=f))
            sch = tiledb.ArraySchema(domain=dom, sparse=True, capacity=500,
                                     attrs=[tiledb.Attr("a", dtype=np.int64, filters=f),
                                            tiledb.Attr("b", dtype=np.float64, filters=f),
                                            tiledb.Attr("s", dtype=str, var=True, filters=f)],
                                     offsets_filters=f)
        else:
            dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 199), tile=50, dtype=np.int64),
                                tiledb.Dim("y", domain=(0, 99), tile=50, dtype=np.int64))
            sch = tiledb.ArraySchema(domain=dom, sparse=False,
                                     attrs=[tiledb.Attr("a", dtype=np.int64, filters=f),
                                            tiledb.Attr("b", dtype=np.float64, filters=f)])
        tiledb.Array.create(uri, sch)
        for frag in range(3):
            with tiledb.open(uri, "w") as A:
                if kind == "sparse":
                    n = 2000
                    lin = np.unique(r.integers(0, 10000 * 10000, 2 * n))[:n]  # no duplicates
                    r.shuffle(lin)
                    x, y = lin // 10000, lin % 10000
                    A[x, y] = {"a": r.integers(-1 << 40, 1 << 40, n), "b": r.standard_normal(n),
                               "s": np.array([f"v{frag}-{i}-" + "z" * int(i % 7) for i in range(n)], dtype=object)}
                else:
                    lo = frag * 50
                    A[lo:lo + 100, 0:100] = {"a": r.integers(-1 << 40, 1 << 40, (100, 100)),
                                             "b": r.standard_normal((100, 100))}
                if frag < 2:
                    A.meta[f"k{frag}"] = frag * 10
                    A.meta["note"] = f"written by fragment {frag}"
    return list(specs)


def classify(rel):
    parts = rel.split(os.sep)
    if parts[0] == "__schema":
        return "schema"
    if parts[0] == "__commits":
        return "commits"
    if parts[0] == "__meta":
        return "array_metadata"
    if parts[0] == "__fragments":
        return "fragment_metadata" if parts[-1] == "__fragment_metadata.tdb" else "data"
    return None


def files_by_kind(arr):
    out = {k: [] for k in KINDS}
    for root, _, files in os.walk(arr):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), arr)
            k = classify(rel)
            if k:
                out[k].append(rel)
    for v in out.values():
        v.sort()
    return out


def mutate(path, r):
    """Flips bytes or truncates; an empty file (TileDB's .wrt commit
    markers) gets garbage instead. Returns a description."""
    b = bytearray(open(path, "rb").read())
    if not b:
        g = bytes(r.randrange(256) for _ in range(r.randint(1, 64)))
        open(path, "wb").write(g)
        return f"filled empty file with {len(g)} bytes"
    if r.random() < 0.6:
        n = r.randint(1, 8)
        where = []
        for _ in range(n):
            i = r.randrange(len(b))
            b[i] ^= r.randint(1, 255)
            where.append(i)
        open(path, "wb").write(bytes(b))
        return f"flipped {n} byte(s) at {sorted(where)} of {len(b)}"
    cut = r.randrange(len(b))
    open(path, "wb").write(bytes(b[:cut]))
    return f"truncated {len(b)} -> {cut} bytes"


def _sorted(t, dims):
    return t.sort_by([(d, "ascending") for d in dims]) if t.num_rows else t


def _calls(client, name):
    """Runs the four calls; returns {call: (outcome, value)}."""
    opts = fl.FlightCallOptions(timeout=DEADLINE)
    out = {}
    for call, fn in (("describe", lambda: action(client, "describe", {"array": name}, opts)),
                     ("read", lambda: get(client, opts, array=name)),
                     ("get_metadata", lambda: action(client, "get_metadata", {"array": name}, opts)),
                     ("list_fragments", lambda: action(client, "list_fragments", {"array": name}, opts))):
        t0 = time.monotonic()
        try:
            v = fn()
            out[call] = ("ok", v, time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001
            out[call] = (grpc_code(e), str(e)[:300], time.monotonic() - t0)
    return out


def run(exe, workdir, trials=500, seed=1, log=print):
    r = rng(seed)
    pristine = os.path.join(workdir, "pristine")
    data = os.path.join(workdir, "data")
    os.makedirs(pristine)
    os.makedirs(data)
    names = make_arrays(pristine, seed)
    d = Daemon(exe, data, args=["-memory-budget", "64MiB"])
    c = d.client()
    # The truth: what flightd reads from the pristine arrays (which the
    # test suites prove equal to TileDB's reads; checked once here too).
    truth = {}
    for n in names:
        shutil.copytree(os.path.join(pristine, n), os.path.join(data, "ref_" + n))
        t = get(c, array="ref_" + n)
        dims = [f.name for f in t.schema if f.metadata and f.metadata.get(b"tiledb.role") == b"dimension"]
        with tiledb.open(os.path.join(pristine, n)) as A:
            tl = A.query(attrs=["a"])[:]
            assert np.asarray(tl["a"]).size == t.num_rows, (n, np.asarray(tl["a"]).size, t.num_rows)
        truth[n] = (_sorted(t, dims), dims, action(c, "get_metadata", {"array": "ref_" + n}))
    files = {n: files_by_kind(os.path.join(pristine, n)) for n in names}
    failures = []
    outcomes = {}   # kind -> outcome -> count
    wrong_unprotected = 0
    crashes = hangs = 0
    slowest = 0.0
    t_start = time.monotonic()
    for trial in range(trials):
        n = names[trial % len(names)]
        kind = KINDS[(trial // len(names)) % len(KINDS)]
        cands = files[n][kind]
        if not cands:
            continue
        rel = r.choice(cands)
        tname = f"t{trial}_{n}"
        tdir = os.path.join(data, tname)
        shutil.copytree(os.path.join(pristine, n), tdir)
        what = mutate(os.path.join(tdir, rel), r)
        res = _calls(c, tname)
        checksummed = not n.endswith("plain")
        want, dims, want_meta = truth[n]
        summary = []
        for call, (code, v, secs) in res.items():
            slowest = max(slowest, secs)
            if code == "ok":
                good = True
                if call == "read":
                    good = _sorted(v, dims).equals(want)
                elif call == "get_metadata":
                    good = v == want_meta
                code = "correct" if good else "wrong"
            summary.append(f"{call}={code}")
            key = f"{call}:{code}"
            outcomes.setdefault(kind, {}).setdefault(key, 0)
            outcomes[kind][key] += 1
            where = f"trial {trial} {n} {kind} {rel} ({what}): {call}"
            if code == "DEADLINE_EXCEEDED" or secs > DEADLINE:
                hangs += 1
                failures.append(f"{where}: no answer within {DEADLINE}s")
            elif code in ("INTERNAL", "UNKNOWN"):
                failures.append(f"{where}: {code}: {v}")
            elif code == "wrong":
                if checksummed and kind == "data":
                    failures.append(f"{where}: wrong data although the tile has a checksum")
                else:
                    wrong_unprotected += 1
                    log(f"corrupt: wrong data, not covered by a checksum: {where}")
        if not d.alive():
            crashes += 1
            failures.append(f"trial {trial} {n} {kind} {rel} ({what}): the daemon died:\n" + "\n".join(d.log_lines[-20:]))
            d = Daemon(exe, data, args=["-memory-budget", "64MiB"])
            c = d.client()
        shutil.rmtree(tdir)
    c.close()
    d.stop()
    return {"trials": trials, "seconds": round(time.monotonic() - t_start, 1), "crashes": crashes, "hangs": hangs,
            "slowest_call_s": round(slowest, 3), "wrong_data_without_checksum": wrong_unprotected,
            "outcomes": outcomes, "failures": failures}
