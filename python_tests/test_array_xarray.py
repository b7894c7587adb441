"""The xarray backend and tileflight.dask.read_array against TileDB-Py.

Each dense array of the fixture matrix opened with ``engine="tileflight"``
must equal the ``xarray.Dataset`` built from TileDB-Py's read of the whole
domain (coordinates over the schema domain, nullable attributes as floats
with NaN for null); indexing a variable reads only the box asked for;
``chunks={}`` and ``read_array`` give blocks that are the space tiles.

The xarray entry point is what ``pip install`` of the package registers
(python/pyproject.toml, ``xarray.backends``). The shared venv installs
tileflight from another checkout, so every test calls the backend class
itself as ``engine=``; the by-name engine is tested when the installed
package has registered it."""

import os
import shutil

import numpy as np
import pytest
import tiledb

import dask.array as da
import xarray as xr

import tileflight  # noqa: E402
import tileflight.dask  # noqa: E402
from tileflight.xarray_backend import TileflightArray, TileflightBackendEntrypoint, split_uri  # noqa: E402
from flightd_fixture import Daemon, flightd_bin  # noqa: E402,F401

DENSE = ["dense_1d", "dense_2d_col", "dense_3d", "dense_datetime_dim", "dense_nullable_fill",
         "consolidated", "metadata"]


@pytest.fixture(scope="module")
def served(flightd_bin, fixtures_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("xarray-data")
    for n in DENSE:
        shutil.copytree(os.path.join(fixtures_dir, "arrays", n), os.path.join(data, n))
    d = Daemon(flightd_bin, data)
    try:
        yield d
    finally:
        d.stop()


def expected_dataset(path):
    """The Dataset a TileDB-Py user builds by hand from A[:]."""
    with tiledb.open(path) as T:
        sch = T.schema
        res = T[:]
        coords = {}
        for i in range(sch.ndim):
            d = sch.domain.dim(i)
            lo, hi = d.domain
            if d.dtype.kind == "M":
                coords[d.name] = np.arange(lo, hi + np.timedelta64(1, np.datetime_data(d.dtype)[0]))
            else:
                coords[d.name] = np.arange(int(lo), int(hi) + 1).astype(d.dtype)
        dims = list(coords)
        variables = {}
        for i in range(sch.nattr):
            a = sch.attr(i)
            if a.isvar or a.dtype.kind in "OSUV":
                continue
            v = res[a.name]
            if isinstance(v, np.ma.MaskedArray):
                v = v.astype(np.float64 if v.dtype.kind in "iub" else v.dtype).filled(np.nan)
            variables[a.name] = (dims, np.asarray(v))
        return xr.Dataset(variables, coords=coords)


def _engines():
    return xr.backends.list_engines()


@pytest.mark.parametrize("name", DENSE)
def test_dataset_equals_tiledb_read(served, name):
    url = f"{served.url}/{name}"
    ds = xr.open_dataset(url, engine=TileflightBackendEntrypoint)
    want = expected_dataset(os.path.join(served.data, name))
    xr.testing.assert_equal(ds.load(), want)
    for k in want.data_vars:
        assert ds[k].dtype == want[k].dtype, k
    if "tileflight" in _engines():
        xr.testing.assert_equal(xr.open_dataset(url, engine="tileflight").load(), want)


def test_entry_point_is_declared():
    import tomllib
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "python", "pyproject.toml"), "rb") as f:
        eps = tomllib.load(f)["project"]["entry-points"]["xarray.backends"]
    assert eps == {"tileflight": "tileflight.xarray_backend:TileflightBackendEntrypoint"}
    assert TileflightBackendEntrypoint().guess_can_open("grpc://127.0.0.1:1/a/b")
    assert split_uri("grpc://127.0.0.1:8815/climate/temp") == ("grpc://127.0.0.1:8815", "climate/temp")
    with pytest.raises(ValueError):
        split_uri("grpc://127.0.0.1:8815")


def test_metadata_becomes_attrs(served):
    ds = xr.open_dataset(f"{served.url}/metadata", engine=TileflightBackendEntrypoint)
    with tiledb.open(os.path.join(served.data, "metadata")) as T:
        assert ds.attrs["str"] == T.meta["str"] and ds.attrs["int"] == T.meta["int"]
        assert ds.attrs["ints"] == list(T.meta["ints"])


def test_indexing_reads_only_what_is_asked(served):
    ds = xr.open_dataset(f"{served.url}/dense_2d_col", engine=TileflightBackendEntrypoint)
    backend = ds["v"].variable._data.array
    while not isinstance(backend, TileflightArray):
        backend = backend.array
    assert backend.reads == 0  # opening reads nothing
    got = ds["v"].isel(r=slice(1, 4), c=2).values
    assert backend.reads == 1
    with tiledb.open(os.path.join(served.data, "dense_2d_col")) as T:
        lo = T.schema.domain.dim(1).domain[0]
        want = T[1:4, lo + 2]["v"]
    np.testing.assert_array_equal(got, want)
    got = ds["v"].sel(r=[2, 5]).isel(c=slice(0, 3)).values  # outer indexing: one read per box
    assert got.shape == (2, 3)


def test_chunks_are_tiles(served):
    with tileflight.connect(served.url) as c:
        ds = c.read_xarray("dense_2d_col", chunks={})
        with tiledb.open(os.path.join(served.data, "dense_2d_col")) as T:
            tiles = [T.schema.domain.dim(i) for i in range(T.schema.ndim)]
            want_chunks = []
            for d in tiles:
                n = int(d.domain[1]) - int(d.domain[0]) + 1
                t = int(d.tile)
                want_chunks.append(tuple(min(t, n - i) for i in range(0, n, t)))
        assert ds["v"].chunks == tuple(want_chunks)
        xr.testing.assert_equal(ds.compute(), expected_dataset(os.path.join(served.data, "dense_2d_col")))


@pytest.mark.parametrize("name,attr", [("dense_2d_col", "v"), ("dense_3d", None),
                                       ("dense_nullable_fill", "n_f64_fill"), ("dense_1d", "f")])
def test_dask_read_array_blocks_are_tiles(served, name, attr):
    path = os.path.join(served.data, name)
    with tiledb.open(path) as T:
        attr = attr or T.schema.attr(0).name
        want = T[:][attr]
        if isinstance(want, np.ma.MaskedArray):
            want = want.astype(np.float64).filled(np.nan)
        tiles = []
        for i in range(T.schema.ndim):
            d = T.schema.domain.dim(i)
            n = int(d.domain[1]) - int(d.domain[0]) + 1
            tiles.append(tuple(min(int(d.tile), n - j) for j in range(0, n, int(d.tile))))
    arr = tileflight.dask.read_array(served.url, name, attr)
    assert isinstance(arr, da.Array) and arr.chunks == tuple(tiles) and arr.dtype == want.dtype
    np.testing.assert_array_equal(arr.compute(), want)


def test_dask_read_array_subarray_clips_to_the_tile_grid(served):
    with tiledb.open(os.path.join(served.data, "dense_2d_col")) as T:
        c0 = int(T.schema.domain.dim(1).domain[0])
        want = T[1:6, c0 + 1:c0 + 7]["v"]
    arr = tileflight.dask.read_array(served.url, "dense_2d_col", "v",
                                     subarray={"r": (1, 5), "c": (c0 + 1, c0 + 6)})
    assert arr.chunks == ((2, 3), (2, 3, 1))  # tiles of 3 from the domain's lower bounds
    np.testing.assert_array_equal(arr.compute(), want)
    with pytest.raises(IndexError):
        tileflight.dask.read_array(served.url, "dense_2d_col", "v", subarray={"r": (-1, 5)})


def test_b2nd_as_xarray_and_dask(flightd_bin, tmp_path):
    import blosc2
    a = np.arange(30 * 20, dtype="f4").reshape(30, 20)
    blosc2.asarray(a, urlpath=str(tmp_path / "g.b2nd"), mode="w", chunks=(10, 8), blocks=(5, 4))
    d = Daemon(flightd_bin, tmp_path)
    try:
        ds = xr.open_dataset(f"{d.url}/g.b2nd", engine=TileflightBackendEntrypoint)
        np.testing.assert_array_equal(ds["value"].values, a)
        np.testing.assert_array_equal(ds["value"].isel(dim0=slice(3, 7), dim1=5).values, a[3:7, 5])
        arr = tileflight.dask.read_array(d.url, "g.b2nd")
        assert arr.chunks == ((10, 10, 10), (8, 8, 4))
        np.testing.assert_array_equal(arr.compute(), a)
    finally:
        d.stop()


def test_sparse_arrays_are_refused(served, fixtures_dir, flightd_bin, tmp_path):
    shutil.copytree(os.path.join(fixtures_dir, "arrays", "sparse_1d"), tmp_path / "sparse_1d")
    d = Daemon(flightd_bin, tmp_path)
    try:
        with pytest.raises(ValueError, match="sparse"):
            xr.open_dataset(f"{d.url}/sparse_1d", engine=TileflightBackendEntrypoint)
        with pytest.raises(ValueError, match="sparse"):
            tileflight.dask.read_array(d.url, "sparse_1d")
    finally:
        d.stop()
