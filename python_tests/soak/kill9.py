"""kill -9 campaign: the daemon is killed at a random moment during DoPut
(sparse and dense, one fragment or many), put_metadata, create_array,
drop_array, consolidate, vacuum and commit_fragments (of a staged DoPut). After each kill, TileDB (the tiledb package) and a restarted
flightd must both see exactly the committed operations: everything
acknowledged, and the interrupted one either whole or not at all. Files a
killed write left behind (fragments without a commit) are counted."""

import json
import os
import threading
import time

import numpy as np
import pyarrow as pa
import tiledb

from .lib import Daemon, action, get, grpc_code, put, rng

REGION = 200_000  # cells of the dense array each dense put owns
KINDS = ["put_sparse_small", "put_sparse_many", "put_dense_small", "put_dense_many",
         "put_metadata", "create_array", "drop_array", "consolidate", "vacuum", "put_sparse_staged_commit"]
# Small fragments so that large DoPuts are cut into several; a short vacuum
# grace so that vacuum removes what killed writes left (nothing else writes
# while a trial runs).
FLAGS = ["-max-fragment-bytes", "256KiB", "-vacuum-grace", "1s"]
MODES = ["commits", "fragment_meta", "array_meta", "fragments"]


def _create(data):
    ctx = tiledb.Ctx()
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 1 << 40), tile=1 << 20, dtype=np.int64))
    tiledb.Array.create(os.path.join(data, "sp"), tiledb.ArraySchema(
        domain=dom, sparse=True, capacity=10000,
        attrs=[tiledb.Attr("pid", dtype=np.int64), tiledb.Attr("v", dtype=np.float64)]), ctx=ctx)
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 10_000 * REGION - 1), tile=10_000, dtype=np.int64))
    tiledb.Array.create(os.path.join(data, "dn"), tiledb.ArraySchema(
        domain=dom, sparse=False,
        attrs=[tiledb.Attr("pid", dtype=np.int64, fill=-1), tiledb.Attr("v", dtype=np.float64)]), ctx=ctx)


def _sparse_table(pid, n):
    x = np.arange(n, dtype=np.int64) + pid * 10_000_000
    return pa.table({"x": x, "pid": np.full(n, pid, np.int64), "v": x.astype(np.float64) * 0.5})


def _dense_table(pid, n):
    return pa.table({"pid": np.full(n, pid, np.int64), "v": np.arange(n, dtype=np.float64) + pid})


CD_SCHEMA = {"type": "sparse", "dimensions": [{"name": "d", "type": "int32", "domain": [0, 999], "tile": 100}],
             "attributes": [{"name": "a", "type": "float64"}]}


class Model:
    """What must be visible: acknowledged operations."""

    def __init__(self):
        self.sparse = {}   # pid -> rows
        self.dense = {}    # pid -> rows (region pid)
        self.gen = 0       # metadata generation
        self.arrays = {}   # cd array name -> rows written


def _op(kind, k, r, m, client=None):
    """Returns (description, fn(client), commit(model)); client prepares
    what a kind needs beforehand (the staged DoPut of a commit)."""
    if kind == "put_sparse_staged_commit":
        n = r.randint(10, 100_000)
        res = put(client, "sp", _sparse_table(k, n), {"array": "sp", "stage": True})
        frags = res["fragments"]
        return {"pid": k, "rows": n, "fragments": len(frags)}, \
            (lambda c: action(c, "commit_fragments", {"array": "sp", "fragments": frags})), \
            (lambda: m.sparse.__setitem__(k, n))
    if kind in ("consolidate", "vacuum"):
        arr = r.choice(["sp", "dn"])
        mode = r.choice(MODES if arr == "dn" or kind == "vacuum" else MODES[:3])
        return {"array": arr, "mode": mode}, (lambda c: action(c, kind, {"array": arr, "mode": mode})), (lambda: None)
    if kind.startswith("put_sparse"):
        n = r.randint(10, 2000) if kind.endswith("small") else r.randint(150_000, 400_000)
        t = _sparse_table(k, n)
        return {"pid": k, "rows": n}, (lambda c: put(c, "sp", t)), (lambda: m.sparse.__setitem__(k, n))
    if kind.startswith("put_dense"):
        n = r.randint(10, 2000) if kind.endswith("small") else r.randint(REGION // 2, REGION)
        t = _dense_table(k, n)
        desc = {"array": "dn", "subarray": {"x": [[k * REGION, k * REGION + n - 1]]}}
        return {"pid": k, "rows": n}, (lambda c: put(c, "dn", t, desc)), (lambda: m.dense.__setitem__(k, n))
    if kind == "put_metadata":
        g = k
        md = {"gen": g, "blob": [g] * r.randint(1, 5000), "name": f"gen-{g}"}
        return {"gen": g}, (lambda c: action(c, "put_metadata", {"array": "sp", "metadata": md})), \
            (lambda: setattr(m, "gen", g))
    if kind == "create_array":
        name = f"cd/a{k}"
        return {"array": name}, (lambda c: action(c, "create_array", dict(CD_SCHEMA, array=name))), \
            (lambda: m.arrays.__setitem__(name, 0))
    if kind == "drop_array":
        name = sorted(m.arrays)[r.randrange(len(m.arrays))] if m.arrays else None
        return {"array": name}, (lambda c: action(c, "drop_array", {"array": name})), \
            (lambda: m.arrays.pop(name, None))
    raise ValueError(kind)


def _prepare_drop_target(client, m, k):
    """An array with a few fragments for drop_array to remove."""
    name = f"cd/a{k}"
    action(client, "create_array", dict(CD_SCHEMA, array=name))
    for i in range(3):
        put(client, name, pa.table({"d": np.arange(i * 100, i * 100 + 50, dtype=np.int32),
                                    "a": np.arange(50, dtype=np.float64)}))
    m.arrays[name] = 150


# ---- checks -------------------------------------------------------------

def _sparse_counts_tiledb(data):
    with tiledb.open(os.path.join(data, "sp")) as A:
        pid = A.query(attrs=["pid"], dims=[])[:]["pid"]
    u, c = np.unique(pid, return_counts=True)
    return dict(zip(u.tolist(), c.tolist()))


def _sparse_counts_flight(client):
    t = get(client, array="sp", columns=["pid"])
    u, c = np.unique(t.column("pid").to_numpy(), return_counts=True)
    return dict(zip(u.tolist(), c.tolist()))


def _dense_state(pid_col, n_expected):
    """'whole', 'none' or 'torn' for one region's pid column."""
    want = pid_col[:n_expected]
    if (want == want[0]).all() and want[0] != -1 and (pid_col[n_expected:] == -1).all():
        return "whole"
    if (pid_col == -1).all():
        return "none"
    return "torn"


def _check(data, client, m, inflight_kind, inflight, acked, sample=None):
    """Compares TileDB's and flightd's view with the model; returns
    (problems, inflight_committed)."""
    problems = []
    committed = None
    # sparse
    for who, counts in (("tiledb", _sparse_counts_tiledb(data)), ("flightd", _sparse_counts_flight(client))):
        extra = set(counts) - set(m.sparse)
        for pid, n in m.sparse.items():
            if counts.get(pid) != n:
                problems.append(f"{who}: sparse put {pid}: {counts.get(pid)} rows visible, {n} acknowledged")
        if inflight_kind.startswith("put_sparse"):
            p = inflight["pid"]
            if p in extra:
                extra.discard(p)
                if counts[p] != inflight["rows"]:
                    problems.append(f"{who}: interrupted sparse put {p} torn: {counts[p]} of {inflight['rows']} rows")
                c = True
            else:
                c = False
            if acked and not c:
                problems.append(f"{who}: acknowledged sparse put {p} is not visible")
            committed = c if committed is None else committed
            if committed != c:
                problems.append(f"tiledb and flightd disagree on sparse put {p}")
        if extra:
            problems.append(f"{who}: sparse puts never made visible: {sorted(extra)}")
    # dense: every region written so far, and the interrupted one
    regions = dict(m.dense) if sample is None else {p: m.dense[p] for p in sample if p in m.dense}
    if inflight_kind.startswith("put_dense"):
        regions[inflight["pid"]] = inflight["rows"]
    with tiledb.open(os.path.join(data, "dn")) as A:
        for pid, n in regions.items():
            lo, hi = pid * REGION, pid * REGION + REGION - 1
            tcol = A.query(attrs=["pid"])[lo:hi + 1]["pid"]
            fcol = get(client, array="dn", columns=["pid"], subarray={"x": [[lo, hi]]}).column("pid").to_numpy()
            for who, col in (("tiledb", tcol), ("flightd", fcol)):
                st = _dense_state(col, n)
                if pid in m.dense and st != "whole":
                    problems.append(f"{who}: dense put {pid}: {st}, acknowledged")
                elif pid not in m.dense:
                    if st == "torn" or (acked and st != "whole"):
                        problems.append(f"{who}: interrupted dense put {pid}: {st} (acknowledged={acked})")
                    c = st == "whole"
                    committed = c if committed is None else committed
                    if committed != c:
                        problems.append(f"tiledb and flightd disagree on dense put {pid}")
    # metadata
    with tiledb.open(os.path.join(data, "sp")) as A:
        tmeta = {k: A.meta[k] for k in A.meta.keys()}
    fmeta = action(client, "get_metadata", {"array": "sp"})
    for who, md in (("tiledb", tmeta), ("flightd", fmeta)):
        g = md.get("gen", 0)
        blob = md.get("blob")
        if blob is not None:
            blob = [blob] if not isinstance(blob, (list, tuple)) else list(blob)
        ok_gens = {m.gen} | ({inflight["gen"]} if inflight_kind == "put_metadata" and not acked else set())
        if acked and inflight_kind == "put_metadata":
            ok_gens = {inflight["gen"]}
        if g not in ok_gens:
            problems.append(f"{who}: metadata gen {g}, want one of {sorted(ok_gens)}")
        elif g != 0 and (md.get("name") != f"gen-{g}" or not blob or any(int(b) != g for b in blob)):
            problems.append(f"{who}: metadata gen {g} torn: name={md.get('name')!r}")
        if inflight_kind == "put_metadata":
            c = g == inflight["gen"]
            committed = c if committed is None else committed
            if committed != c:
                problems.append("tiledb and flightd disagree on put_metadata")
    # create / drop
    names = set(m.arrays)
    if inflight_kind in ("create_array", "drop_array") and inflight["array"]:
        names.add(inflight["array"])
    listed = {a["array"] if isinstance(a, dict) else a for a in _list_arrays(client)}
    for name in sorted(names):
        p = os.path.join(data, name)
        t_exists = tiledb.object_type(p) == "array"
        f_exists = name in listed
        rows_t = rows_f = None
        if t_exists:
            with tiledb.open(p) as A:
                rows_t = len(A.query(attrs=["a"])[:]["a"])
        if f_exists:
            rows_f = get(client, array=name, columns=["a"]).num_rows
        if t_exists != f_exists or rows_t != rows_f:
            problems.append(f"{name}: tiledb sees exists={t_exists} rows={rows_t}, flightd exists={f_exists} rows={rows_f}")
        interrupted = inflight_kind in ("create_array", "drop_array") and name == inflight["array"]
        if not interrupted:
            if not t_exists or rows_t != m.arrays[name]:
                problems.append(f"{name}: exists={t_exists} rows={rows_t}, want {m.arrays[name]} rows")
            continue
        if inflight_kind == "create_array":
            c = t_exists
            if acked and not t_exists:
                problems.append(f"{name}: acknowledged create_array, no array")
            if t_exists and rows_t != 0:
                problems.append(f"{name}: created with {rows_t} rows")
        else:
            was = m.arrays[name]
            c = not t_exists
            if acked and t_exists:
                problems.append(f"{name}: acknowledged drop_array, array still there")
            if t_exists and rows_t not in (0, was):
                # a drop deletes the commits first: an interrupted one may
                # leave some of them; reported, and a retried drop finishes.
                problems.append(f"{name}: interrupted drop left {rows_t} of {was} rows visible")
        committed = c if committed is None else committed
    return problems, bool(committed)


def _list_arrays(client):
    res = action(client, "list_arrays", {})
    if isinstance(res, dict):
        res = res.get("arrays", [])
    return res


def leftovers(data):
    """Fragment directories that no commit names (what a killed write
    leaves); TileDB and flightd ignore them, vacuum would delete them."""
    out = []
    for root, dirs, files in os.walk(data):
        if os.path.basename(root) != "__fragments":
            continue
        arr = os.path.dirname(root)
        commits = set(os.listdir(os.path.join(arr, "__commits"))) if os.path.isdir(os.path.join(arr, "__commits")) else set()
        names = {c.rsplit(".", 1)[0] for c in commits}
        # a multi-fragment commit (.con?) names its fragments inside
        text = ""
        for c in commits:
            if not c.endswith(".wrt"):
                try:
                    with open(os.path.join(arr, "__commits", c), "rb") as f:
                        text += f.read().decode("latin-1")
                except OSError:
                    pass
        for d in dirs:
            if d not in names and d not in text:
                out.append(os.path.relpath(os.path.join(root, d), data))
        dirs[:] = []
    return out


def run(exe, workdir, trials=100, seed=1, log=print):
    r = rng(seed)
    data = os.path.join(workdir, "kill9-data")
    os.makedirs(data, exist_ok=True)
    _create(data)
    m = Model()
    failures = []
    by_kind = {k: {"trials": 0, "acked": 0, "interrupted_committed": 0, "interrupted_absent": 0} for k in KINDS}
    k = 1
    d = Daemon(exe, data, args=FLAGS)
    # Calibration: how long each kind takes when not killed, from a new
    # client's first call (the connection is part of the window).
    dur = {}
    for kind in KINDS:
        if kind == "drop_array":
            c = d.client()
            _prepare_drop_target(c, m, k)
            c.close()
            k += 1
        c = d.client()
        desc, fn, commit = _op(kind, k, r, m, c)
        k += 1
        c.close()
        c = d.client()
        t0 = time.monotonic()
        fn(c)
        dur[kind] = time.monotonic() - t0
        c.close()
        commit()
    d.stop()
    t_start = time.monotonic()
    for trial in range(trials):
        kind = KINDS[trial % len(KINDS)]
        d = Daemon(exe, data, args=FLAGS)
        c = d.client()
        if kind == "drop_array":
            _prepare_drop_target(c, m, k)
            k += 1
        desc, fn, commit = _op(kind, k, r, m, c)
        k += 1
        if kind == "put_sparse_staged_commit":
            c.close()
            c = d.client()  # the commit starts on a new connection, as timed
        result = {}

        def go():
            try:
                result["ok"] = fn(c)
            except Exception as e:  # noqa: BLE001 (the kill makes any error possible)
                result["err"] = f"{grpc_code(e)}: {e}"

        th = threading.Thread(target=go)
        delay = r.uniform(0, dur[kind] * 1.3)
        th.start()
        time.sleep(delay)
        d.proc.kill()
        d.proc.wait()
        th.join(60)
        c.close()
        acked = "ok" in result
        d2 = Daemon(exe, data, args=FLAGS)
        c2 = d2.client()
        try:
            sample = None if kind in ("consolidate", "vacuum") else r.sample(sorted(m.dense), min(3, len(m.dense)))
            problems, committed = _check(data, c2, m, kind, desc, acked, sample)
        except Exception as e:  # noqa: BLE001
            problems, committed = [f"check failed: {type(e).__name__}: {e}"], False
        st = by_kind[kind]
        st["trials"] += 1
        if acked:
            st["acked"] += 1
        elif committed:
            st["interrupted_committed"] += 1
        else:
            st["interrupted_absent"] += 1
        if committed or acked:
            commit()
        if kind == "drop_array" and not committed and desc["array"]:
            # finish an interrupted drop, as a client retrying would
            try:
                action(c2, "drop_array", {"array": desc["array"]})
            except Exception as e:  # noqa: BLE001
                if grpc_code(e) != "NOT_FOUND":
                    problems.append(f"retried drop_array {desc['array']}: {e}")
            m.arrays.pop(desc["array"], None)
        c2.close()
        d2.stop()
        for p in problems:
            failures.append(f"trial {trial} ({kind}, killed after {delay * 1000:.1f} ms, acked={acked}): {p}")
        if problems:
            log(f"kill9 trial {trial}: {problems}")
    # Last, every region and array once more.
    d = Daemon(exe, data, args=FLAGS)
    c = d.client()
    try:
        final, _ = _check(data, c, m, "none", {}, False)
    except Exception as e:  # noqa: BLE001
        final = [f"final check failed: {type(e).__name__}: {e}"]
    c.close()
    d.stop()
    failures += [f"final: {p}" for p in final]
    left = leftovers(data)
    # What killed writes left behind, a fragments vacuum removes (their files
    # are older than -vacuum-grace by now); the data stay as they were.
    time.sleep(1.5)
    d = Daemon(exe, data, args=FLAGS)
    c = d.client()
    vac = {}
    for arr in ("sp", "dn"):
        vac[arr] = action(c, "vacuum", {"array": arr, "mode": "fragments"})
    try:
        final, _ = _check(data, c, m, "none", {}, False)
    except Exception as e:  # noqa: BLE001
        final = [f"check after vacuum failed: {type(e).__name__}: {e}"]
    failures += [f"after vacuum: {p}" for p in final]
    c.close()
    d.stop()
    after_vacuum = leftovers(data)
    if after_vacuum:
        failures.append(f"vacuum left {len(after_vacuum)} uncommitted fragments: {after_vacuum[:3]}")
    return {"trials": trials, "seconds": round(time.monotonic() - t_start, 1), "by_kind": by_kind,
            "calibration_ms": {k: round(v * 1000, 1) for k, v in dur.items()},
            "leftover_fragments": len(left), "leftover_examples": left[:5],
            "vacuum_removed_uncommitted": sum(len(v.get("uncommitted", [])) for v in vac.values()),
            "leftover_after_vacuum": len(after_vacuum), "failures": failures}
