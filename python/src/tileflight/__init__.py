"""tileflight: TileDB arrays over Arrow Flight, for pyarrow, pandas, Spark and Dask.

>>> import tileflight
>>> client = tileflight.connect("grpc://127.0.0.1:8815")
>>> client.arrays()
['demo/dense', 'demo/points']
>>> table = client.read("demo/dense", columns=["v"], subarray={"x": (0, 9)})

``client.array(name)`` is the array with TileDB-Py's indexing and NumPy
results (:mod:`tileflight.array`); ``client.sql(text)`` runs Flight SQL.
``tileflight.local(path="./data")`` starts a daemon of its own (the one
``pip install "tileflight[server]"`` brings) and returns a client to it.

Submodules: :mod:`tileflight.spark` (a Spark 4 data source),
:mod:`tileflight.dask` (dask DataFrames, one partition per endpoint, and
dask arrays, one block per tile) and :mod:`tileflight.xarray_backend` (the
``engine="tileflight"`` xarray backend); they import pyspark, dask and
xarray only when used.
"""

from .client import Client, WriteResult, connect
from .errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, FailedPrecondition,
                     Internal, InvalidArgument, NotFound, PermissionDenied, ResourceExhausted,
                     TileflightError, Unauthenticated, Unavailable, Unimplemented)
from ._local import LocalClient, local

__version__ = "0.1.0"

__all__ = [
    "connect", "local", "LocalClient", "Client", "WriteResult", "TileflightError", "InvalidArgument", "NotFound",
    "AlreadyExists", "Unauthenticated", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted", "DataLoss", "Unimplemented", "Internal", "Unavailable", "Cancelled", "DeadlineExceeded",
]
