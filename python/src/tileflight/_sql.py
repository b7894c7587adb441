"""SQL through the daemon's Flight SQL service, with pyarrow alone.

Flight SQL commands are protobuf messages wrapped in ``google.protobuf.Any``
(docs/protocol.md, "Flight SQL"). The few this client sends have only
string and bytes fields, so they are encoded here by hand rather than
pulling in a protobuf runtime: a statement is ``CommandStatementQuery``; a
statement with parameters is a prepared statement (``CreatePreparedStatement``,
a DoPut of the parameter rows, ``CommandPreparedStatementQuery``,
``ClosePreparedStatement``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.flight as fl

from .errors import from_arrow

__all__ = ["run"]

_PREFIX = "type.googleapis.com/arrow.flight.protocol.sql."
_ARROW_ERRORS = (pa.ArrowException, fl.FlightError)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, data: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def _any(message: str, body: bytes) -> bytes:
    return _field(1, (_PREFIX + message).encode()) + _field(2, body)


def _parse(buf: bytes) -> Dict[int, bytes]:
    """The length-delimited fields of a message (the only kind we read)."""
    out: Dict[int, bytes] = {}
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 2:
            n, i = _read_varint(buf, i)
            out[num] = buf[i:i + n]
            i += n
        elif wire == 0:
            _, i = _read_varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"Flight SQL: unexpected protobuf wire type {wire}")
    return out


def _read_varint(buf: bytes, i: int) -> Tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def _unany(buf: bytes) -> bytes:
    return _parse(buf).get(2, b"")


def _rows(params: Sequence[Any]) -> List[Sequence[Any]]:
    if params and all(isinstance(p, (list, tuple)) for p in params):
        return list(params)  # several rows
    return [list(params)]


def run(client: Any, text: str, params: Optional[Sequence[Any]] = None, *,
        timeout: Optional[float] = None) -> pa.Table:
    """Run one statement; returns its rows as a table."""
    opts = client._opts(timeout)
    flight = client._flight
    try:
        if params is None:
            cmd = _any("CommandStatementQuery", _field(1, text.encode()))
            info = flight.get_flight_info(fl.FlightDescriptor.for_command(cmd), options=opts)
            return client.read_info(info, progress=False, timeout=timeout)
        req = _any("ActionCreatePreparedStatementRequest", _field(1, text.encode()))
        res = list(flight.do_action(fl.Action("CreatePreparedStatement", req), options=opts))
        prepared = _parse(_unany(res[0].body.to_pybytes()))
        handle = prepared.get(1, b"")
        try:
            pschema = pa.ipc.read_schema(pa.py_buffer(prepared[3])) if prepared.get(3) else None
            rows = _rows(params)
            width = len(rows[0])
            if pschema is not None and len(pschema) == width:
                cols = [pa.array([r[i] for r in rows], type=pschema.field(i).type) for i in range(width)]
                names = pschema.names
            else:
                cols = [pa.array([r[i] for r in rows]) for i in range(width)]
                names = [f"p{i}" for i in range(width)]
            table = pa.table(cols, names=names)
            put = _any("CommandPreparedStatementQuery", _field(1, handle))
            writer, reader = flight.do_put(fl.FlightDescriptor.for_command(put), table.schema, options=opts)
            writer.write_table(table)
            writer.done_writing()
            meta = reader.read()
            writer.close()
            if meta is not None and meta.size:
                # DoPutPreparedStatementResult: the handle with the parameters bound.
                new = _parse(_unany(meta.to_pybytes()) or meta.to_pybytes()).get(1)
                if new:
                    handle = new
            cmd = _any("CommandPreparedStatementQuery", _field(1, handle))
            info = flight.get_flight_info(fl.FlightDescriptor.for_command(cmd), options=opts)
            return client.read_info(info, progress=False, timeout=timeout)
        finally:
            close = _any("ActionClosePreparedStatementRequest", _field(1, handle))
            try:
                list(flight.do_action(fl.Action("ClosePreparedStatement", close), options=opts))
            except _ARROW_ERRORS:
                pass
    except _ARROW_ERRORS as e:
        raise from_arrow(e) from e
