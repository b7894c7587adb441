"""Dask DataFrames over tileflight: one partition per Flight endpoint.

>>> import tileflight.dask
>>> ddf = tileflight.dask.read("grpc://flightd:8815", "climate/temp",
...                            columns=["x", "temp"], subarray={"x": (0, 999)})
>>> ddf.temp.mean().compute()

The FlightInfo is taken when :func:`read` is called (its tickets pin the
array's timestamp, so every partition reads the same snapshot); each
partition fetches its endpoint when computed, from any worker.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import pyarrow as pa
import pyarrow.flight as fl

from . import _query
from .client import Client, connect

__all__ = ["read"]


def _fetch(ticket: bytes, locations: Sequence[str], conn: Dict[str, Any], schema: pa.Schema) -> Any:
    ep = fl.FlightEndpoint(ticket, [fl.Location(u) for u in locations])
    with connect(**conn) as c:
        batches = list(c.endpoint_batches(ep))
    return pa.Table.from_batches(batches, schema=schema).to_pandas()


def read(client_or_uri: Any, name: str, columns: Optional[Sequence[str]] = None,
         subarray: Optional[_query.Subarray] = None, filter: Optional[str] = None,
         timestamp: Optional[_query.Timestamp] = None, layout: Optional[str] = None, *,
         partitions: Optional[int] = None, batch_rows: Optional[int] = None,
         token: Optional[str] = None) -> Any:
    """A dask DataFrame of a read, one partition per endpoint, in endpoint order.

    ``client_or_uri`` is a :class:`tileflight.Client` or a URI (then
    ``token`` may be given). The other arguments are :meth:`Client.read`'s.
    """
    import dask.dataframe as dd

    own = not isinstance(client_or_uri, Client)
    client = connect(client_or_uri, token=token) if own else client_or_uri
    try:
        info = client.flight_info(name, columns=columns, partitions=partitions, subarray=subarray,
                                  filter=filter, timestamp=timestamp, layout=layout,
                                  batch_rows=batch_rows)
        conn = client.connection_args()
    finally:
        if own:
            client.close()
    schema = info.schema
    meta = schema.empty_table().to_pandas()
    eps = [(ep.ticket.ticket, [(loc.uri.decode() if isinstance(loc.uri, bytes) else str(loc.uri))
                               for loc in ep.locations]) for ep in info.endpoints]
    if not eps:
        return dd.from_pandas(meta, npartitions=1)
    return dd.from_map(_fetch, [t for t, _ in eps], [loc for _, loc in eps],
                       conn=conn, schema=schema, meta=meta, enforce_metadata=False,
                       label="tileflight-read")
