"""Crash safety and schema creation, checked by TileDB: a writing process
killed at random moments leaves an array TileDB opens, showing exactly the
writes whose commit object exists; and schemas created from JSON by the
writer open in TileDB equal to the tiledb-py equivalent."""

import json
import os
import random
import signal
import subprocess
import time

import numpy as np
import pyarrow as pa
import tiledb

from test_writer import run, tfwrite, write_ipc  # noqa: F401 (fixture)

SCHEMA = {"type": "sparse", "capacity": 50, "allows_duplicates": True,
          "dimensions": [{"name": "x", "type": "int64", "domain": [0, 10**6], "tile": 1000}],
          "attributes": [{"name": "v", "type": "float64", "filters": [{"name": "zstd", "level": 1}]},
                         {"name": "s", "type": "string_ascii", "cell_val_num": "var"}]}


def test_crash_kills(tfwrite, tmp_path):
    arr = str(tmp_path / "crash")
    sp = tmp_path / "schema.json"
    sp.write_text(json.dumps(SCHEMA))
    run(tfwrite, "create", arr, sp)
    n = 3000
    rng = np.random.default_rng(1)
    write_ipc(tmp_path / "in.arrow", pa.table({
        "x": pa.array(rng.integers(0, 10**6, n)),
        "v": pa.array(rng.standard_normal(n)),
        "s": pa.array([f"row{i}" for i in range(n)], pa.large_utf8())}))
    rnd = random.Random(7)
    for trial in range(50):
        # Small -max-bytes: every write is several fragments and a .con.
        p = subprocess.Popen([tfwrite, "write", arr, str(tmp_path / "in.arrow"), "-repeat", "1000",
                              "-max-bytes", str(rnd.choice([20000, 40000, 10**9]))],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(0.0, 0.08))
        p.send_signal(signal.SIGKILL)
        out, _ = p.communicate()
        done = len(out.splitlines())
        commits = [c for c in os.listdir(os.path.join(arr, "__commits"))
                   if c.endswith((".wrt", ".con"))] if os.path.isdir(os.path.join(arr, "__commits")) else []
        with tiledb.open(arr) as A:
            got = len(A.query(attrs=["v"], dims=[])[:]["v"])
        assert got == n * len(commits), (trial, got, len(commits))
        assert len(commits) >= done
    assert len(commits) > 0


def test_create_from_json_matches_tiledb(tfwrite, tmp_path):
    js = {"type": "dense", "cell_order": "col-major", "tile_order": "row-major",
          "dimensions": [{"name": "r", "type": "int32", "domain": [1, 100], "tile": 10,
                          "filters": [{"name": "gzip", "level": 3}]},
                         {"name": "c", "type": "int32", "domain": [1, 50], "tile": 5,
                          "filters": [{"name": "zstd", "level": 5}]}],
          "attributes": [{"name": "a", "type": "float64", "nullable": True,
                          "filters": [{"name": "byteshuffle"}, {"name": "lz4"}]},
                         {"name": "s", "type": "string_utf8", "cell_val_num": "var",
                          "filters": [{"name": "dictionary"}]}]}
    sp = tmp_path / "s.json"
    sp.write_text(json.dumps(js))
    ours = str(tmp_path / "ours")
    run(tfwrite, "create", ours, sp)
    dom = tiledb.Domain(tiledb.Dim("r", domain=(1, 100), tile=10, dtype=np.int32, filters=[tiledb.GzipFilter(level=3)]),
                        tiledb.Dim("c", domain=(1, 50), tile=5, dtype=np.int32,
                                   filters=[tiledb.ZstdFilter(level=5)]))
    want = tiledb.ArraySchema(domain=dom, sparse=False, cell_order="col-major", tile_order="row-major",
                              attrs=[tiledb.Attr("a", dtype=np.float64, nullable=True,
                                                 filters=[tiledb.ByteShuffleFilter(), tiledb.LZ4Filter()]),
                                     tiledb.Attr("s", dtype=str, var=True, filters=[tiledb.DictionaryFilter()])])
    with tiledb.open(ours) as A:
        assert A.schema == want
    # The array is usable by TileDB without the empty directories it
    # would have made itself.
    with tiledb.open(ours, "w") as A:
        A[1:3, 1:3] = {"a": np.ones((2, 2)), "s": np.array([["p", "q"], ["r", "s"]], dtype=object)}
    with tiledb.open(ours) as A:
        assert A.multi_index[1:2, 1:2]["s"].tolist() == [["p", "q"], ["r", "s"]]
    with tiledb.open(ours) as A:
        assert A.nonempty_domain() == ((1, 2), (1, 2))
    run(tfwrite, "meta", ours, json.dumps({"k": 5, "name": "x"}))
    with tiledb.open(ours) as A:
        assert A.meta["k"] == 5 and A.meta["name"] == "x"
    run(tfwrite, "drop", ours)
    assert not os.path.exists(os.path.join(ours, "__schema"))
