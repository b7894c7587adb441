"""Writes python-blosc2 must read back identically: chunks compressed with
zstd dictionaries (python-blosc2's use_dict) and items wider than 255 bytes
(c-blosc2 stores typesize 1 in their chunk headers), into arrays we create
and arrays python-blosc2 made."""

import os
import struct

import blosc2
import numpy as np
import pyarrow as pa
import pytest

from flightd_fixture import action, cmd, flightd, flightd_bin, put, read  # noqa: F401


@pytest.fixture(scope="module")
def client(flightd):
    c = flightd.client()
    yield c
    c.close()


def chunk_headers(a):
    """(typesize byte, uses a dictionary) of every stored chunk."""
    out = []
    for i in range(a.schunk.nchunks):
        c = a.schunk.get_chunk(i)
        if len(c) > 32 and not (c[31] >> 4) & 7:  # not a special chunk
            out.append((c[3], bool(c[31] & 1)))
    return out


@pytest.mark.parametrize("contiguous", [True, False])
def test_use_dict_written_and_read_by_blosc2(client, flightd, contiguous):
    name = f"wd/dict_{int(contiguous)}.b2nd"
    d = action(client, "create_array", {"array": name, "type": "b2nd", "shape": [300, 1000], "chunks": [100, 500],
                                        "blocks": [10, 500], "dtype": "<f8", "use_dict": True, "contiguous": contiguous})
    assert d["use_dict"] is True and d["codec"] == "zstd"
    vals = (np.arange(300 * 1000) % 977).astype("<f8").reshape(300, 1000) / 7
    put(client, cmd(array=name), pa.table({"value": vals.reshape(-1)}))
    a = blosc2.open(os.path.join(flightd.data, name))
    assert a.schunk.cparams.use_dict
    assert a[...].tobytes() == vals.tobytes()
    hs = chunk_headers(a)
    assert len(hs) == 6 and all(dct for _, dct in hs), hs
    # A second, partial write re-encodes the chunks it touches, with a dictionary.
    vals[50:60, 100:900] = -1.5
    put(client, cmd(array=name, subarray={"dim0": [[50, 59]], "dim1": [[100, 899]]}),
        pa.table({"value": np.full(10 * 800, -1.5)}))
    a = blosc2.open(os.path.join(flightd.data, name))
    assert a[...].tobytes() == vals.tobytes()
    assert all(dct for _, dct in chunk_headers(a))
    t = read(client, array=name)
    assert t.column("value").to_numpy().tobytes() == vals.tobytes()


def test_use_dict_into_blosc2_made_array(client, flightd):
    name = "wd/py_dict.b2nd"
    p = os.path.join(flightd.data, name)
    base = (np.arange(200000) % 1000).astype("<i8")
    blosc2.asarray(base, urlpath=p, mode="w", chunks=(50000,), blocks=(1000,),
                   cparams=blosc2.CParams(codec=blosc2.Codec.ZSTD, use_dict=True))
    assert all(dct for _, dct in chunk_headers(blosc2.open(p)))
    new = -np.arange(30000, dtype="<i8")
    put(client, cmd(array=name, subarray={"dim0": [[60000, 89999]]}), pa.table({"value": new}))
    base[60000:90000] = new
    a = blosc2.open(p)
    assert a[...].tobytes() == base.tobytes()
    assert all(dct for _, dct in chunk_headers(a))


def test_use_dict_refusals(client):
    from flightd_fixture import expect_code
    expect_code("UNIMPLEMENTED", action, client, "create_array",
                {"array": "wd/lz4dict.b2nd", "type": "b2nd", "shape": [10], "codec": "lz4", "use_dict": True})


@pytest.mark.parametrize("dtype", ["S300", "V256", [("a", "<i4"), ("s", "S300")], "<U80"])
def test_wide_items_written_and_read_by_blosc2(client, flightd, dtype):
    dt = np.dtype(dtype)
    assert dt.itemsize > 255
    name = "wd/wide_%d_%s.b2nd" % (dt.itemsize, "s" if dt.names else dt.kind)
    action(client, "create_array", {"array": name, "type": "b2nd", "shape": [37, 5], "chunks": [16, 4],
                                    "blocks": [4, 2], "dtype": str(dt.descr) if dt.names else dt.str})
    n = 37 * 5
    if dt.names:
        want = np.zeros(n, dtype=dt)
        want["a"] = np.arange(n) - 90
        want["s"] = [b"x" * (i % 300) + b"!" for i in range(n)]
        tbl = pa.table({"a": want["a"], "s": pa.array([bytes(v) for v in want["s"]], pa.binary())})
    elif dt.kind == "U":
        want = np.array(["\u00e9" * (i % 80) for i in range(n)], dtype=dt)
        tbl = pa.table({"value": want.tolist()})
    else:
        want = np.array([bytes([i % 251]) * (i % 256) + b"\x01" for i in range(n)], dtype=dt)
        tbl = pa.table({"value": pa.array([bytes(v) for v in want], pa.binary())})
    put(client, cmd(array=name), tbl)
    a = blosc2.open(os.path.join(flightd.data, name))
    assert a.dtype == dt and a.schunk.typesize == dt.itemsize
    assert a[...].tobytes() == want.reshape(37, 5).tobytes()
    hs = chunk_headers(a)
    assert hs and all(ts == 1 for ts, _ in hs), hs  # typesize 1 in the chunk header, as c-blosc2 writes
    t = read(client, array=name, subarray={"dim0": [[3, 20]], "dim1": [[1, 3]]})
    assert t.num_rows == 18 * 3


def test_wide_items_into_blosc2_made_array(client, flightd):
    name = "wd/py_wide.b2nd"
    p = os.path.join(flightd.data, name)
    base = np.array([b"%d" % i * 30 for i in range(100)], dtype="S300")
    blosc2.asarray(base, urlpath=p, mode="w", chunks=(40,), blocks=(10,))
    new = np.array([b"new%d" % i for i in range(25)], dtype="S300")
    put(client, cmd(array=name, subarray={"dim0": [[30, 54]]}), pa.table({"value": pa.array([bytes(v) for v in new], pa.binary())}))
    base[30:55] = new
    a = blosc2.open(p)
    assert a[...].tobytes() == base.tobytes()
    assert all(ts == 1 for ts, _ in chunk_headers(a))
