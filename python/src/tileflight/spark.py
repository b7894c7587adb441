"""A Spark 4 data source for tileflight arrays (``pyspark.sql.datasource``).

>>> from tileflight.spark import TileflightDataSource
>>> spark.dataSource.register(TileflightDataSource)
>>> df = (spark.read.format("tileflight")
...       .option("uri", "grpc://flightd:8815").option("array", "climate/temp").load())
>>> df.where("x between 0 and 99 and temp > 20").groupBy("y").avg("temp")
>>> df.write.format("tileflight").option("uri", ...).option("array", "points").mode("append").save()

Reading: the driver asks the daemon for the query's FlightInfo; each
endpoint becomes one Spark partition (one task), and the task streams that
endpoint's Arrow record batches straight into Spark. The schema comes from
GetSchema. Options:

``uri`` (required), ``array`` (required), ``token``, ``tls_root_certs``
(a PEM file), ``columns`` (comma-separated: read only these), ``subarray``
(JSON ``{dim: [[lo, hi], ...]}``), ``filter`` (a TileDB QueryCondition),
``timestamp`` (ms, or JSON ``[start, end]``), ``layout``, ``batch_rows``,
``partitions`` (endpoints to ask for).

Column pruning: Spark's Python data source API (up to 4.3) does not tell
the source which columns a query uses; the source reads the columns of the
schema it is given, so ``.option("columns", "x,v")`` or a user schema
(``spark.read.schema("v double")``) reads only those.

Filter pushdown (with ``spark.sql.python.filterPushdown.enabled=true``;
without it the source reads without pushdown rather than failing):
comparisons and ``IN`` on numeric dimensions (and ``=``/``IN`` on string
dimensions) narrow the ``subarray``; on a sparse array, comparisons,
``IN``, ``IS [NOT] NULL`` on attributes become the daemon's ``filter``
(each condition is tried first with a one-cell DoGet: one the daemon does
not run stays with Spark). Pushed filters show in ``df.explain()`` as ``PushedFilters``.
Dense arrays keep attribute filters in Spark: a dense read returns every
cell of the subarray, the ones failing a condition included (as TileDB does).

Endpoint locations: an endpoint's locations travel with its partition and
the task reads from them. Spark's Python API cannot declare preferred
locations (4.3), so tasks are not scheduled by them.

Writing (``mode("append")``; sparse arrays: a column per dimension and
attribute): every task sends its rows staged (``"stage": true``): one
DoPut, or several above the daemon's ``-max-put-bytes``, its record
batches cut by bytes under ``-max-message-bytes`` (both learned from the
``server_info`` action; options ``max_batch_bytes`` and ``staged``, in
bytes, override them); the driver commits all tasks' fragments with one
``commit_fragments`` once every task succeeded, or deletes them with
``abort_fragments`` when any failed. The write is all or nothing. All
fragments carry one timestamp, chosen on the driver (option ``timestamp``
to choose it).

The JVM connector (``spark-connector/``, built by ``make sparkjar``) is the
fast path: a Spark DataSource V2 source in Java, format ``"tileflight-jvm"``,
with the same options. It reads endpoints as columnar Arrow batches without
a Python worker and pushes column pruning, filters, ``COUNT``/``SUM``/``MIN``/
``MAX`` (no GROUP BY) and ``LIMIT`` into the daemon's query:

>>> from tileflight.spark import JVM_FORMAT, jvm_jar
>>> spark = SparkSession.builder.config("spark.jars", jvm_jar()).getOrCreate()
>>> spark.read.format(JVM_FORMAT).option("uri", ...).option("array", "climate/temp").load()

``"tileflight"`` is this module's Python data source (after
``spark.dataSource.register``), ``"tileflight-jvm"`` the JVM connector; both
read and append. Both can be used in one session.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, EqualTo,
                                    Filter, GreaterThan, GreaterThanOrEqual, In, InputPartition,
                                    IsNotNull, IsNull, LessThan, LessThanOrEqual, Not,
                                    WriterCommitMessage)
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType,
                               DecimalType, DoubleType, FloatType, IntegerType, LongType, ShortType,
                               StringType, StructField, StructType, TimestampType)

from .client import Client, connect
from .errors import TileflightError

__all__ = ["JVM_FORMAT", "TileflightDataSource", "jvm_jar", "spark_schema"]

#: The JVM connector's format name (``spark.read.format(JVM_FORMAT)``).
JVM_FORMAT = "tileflight-jvm"


def jvm_jar() -> str:
    """The path of the JVM connector's jar, to put in ``spark.jars``.

    ``$TILEFLIGHT_SPARK_JAR`` if set, else the jar the wheel carries
    (``tileflight/jars/tileflight-spark.jar``, put there by ``make release``),
    else the jar ``make sparkjar`` builds in this checkout
    (``spark-connector/target/tileflight-spark.jar``).
    FileNotFoundError (saying how to build it) when there is none.
    """
    import os
    env = os.environ.get("TILEFLIGHT_SPARK_JAR")
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(f"TILEFLIGHT_SPARK_JAR={env}: no such file")
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "jars", "tileflight-spark.jar")
    if os.path.isfile(bundled):
        return bundled
    jar = os.path.normpath(os.path.join(here, "..", "..", "..", "spark-connector", "target", "tileflight-spark.jar"))
    if not os.path.isfile(jar):
        raise FileNotFoundError(f"{jar} is missing: build it with `make sparkjar` in the tileflight checkout "
                                "(or set TILEFLIGHT_SPARK_JAR to the jar's path)")
    return jar


# -- schema -------------------------------------------------------------------------

def _spark_type(t: pa.DataType, name: str) -> DataType:
    if pa.types.is_boolean(t):
        return BooleanType()
    if pa.types.is_int8(t):
        return ByteType()
    if pa.types.is_int16(t) or pa.types.is_uint8(t):
        return ShortType()
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return IntegerType()
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return LongType()
    if pa.types.is_uint64(t):
        return DecimalType(20, 0)  # Spark has no unsigned 64-bit type
    if pa.types.is_float32(t):
        return FloatType()
    if pa.types.is_float64(t):
        return DoubleType()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return StringType()
    if (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
            or pa.types.is_binary_view(t)):
        return BinaryType()
    if pa.types.is_timestamp(t):
        return TimestampType()
    if pa.types.is_date(t):
        return DateType()
    if pa.types.is_time(t):
        return LongType()  # Spark has no time-of-day type: the ticks of the unit
    if pa.types.is_dictionary(t):
        return _spark_type(t.value_type, name)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return ArrayType(_spark_type(t.value_type, name), containsNull=t.value_field.nullable)
    raise TileflightError(f"column {name!r}: Arrow type {t} has no Spark type", "UNIMPLEMENTED")


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema from the daemon."""
    return StructType([StructField(f.name, _spark_type(f.type, f.name), f.nullable) for f in schema])


def _arrow_target(schema: StructType) -> pa.Schema:
    # What Spark's Python worker checks each batch against (see
    # pyspark.sql.worker.plan_data_source_read).
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(schema, timezone="UTC")


def _conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    cols = []
    for f in target:
        col = batch.column(f.name)
        if pa.types.is_time(col.type):
            col = col.view(pa.int64()) if pa.types.is_time64(col.type) else col.cast(pa.int32()).cast(pa.int64())
        elif pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        if not col.type.equals(f.type):
            col = col.cast(f.type)
        cols.append(col)
    return pa.RecordBatch.from_arrays(cols, schema=target)


# -- options ------------------------------------------------------------------------

def _opt_json(options: Dict[str, str], key: str) -> Any:
    v = options.get(key)
    if v is None or v == "":
        return None
    try:
        return json.loads(v)
    except ValueError:
        if key == "timestamp":
            raise TileflightError(f"option timestamp: ms since the epoch or JSON [start, end], got {v!r}",
                                  "INVALID_ARGUMENT") from None
        raise TileflightError(f"option {key}: not JSON: {v!r}", "INVALID_ARGUMENT") from None


def _connect(options: Dict[str, str]) -> Client:
    uri = options.get("uri")
    if not uri:
        raise TileflightError('option "uri" is required (e.g. grpc://host:8815)', "INVALID_ARGUMENT")
    return connect(uri, token=options.get("token") or None,
                   tls_root_certs=options.get("tls_root_certs") or None)


def _array(options: Dict[str, str]) -> str:
    a = options.get("array") or options.get("path")
    if not a:
        raise TileflightError('option "array" is required (the array\'s name)', "INVALID_ARGUMENT")
    return a


def _columns(options: Dict[str, str]) -> Optional[List[str]]:
    c = options.get("columns")
    if not c:
        return None
    return [s.strip() for s in c.split(",") if s.strip()]


# -- the data source ----------------------------------------------------------------

class TileflightDataSource(DataSource):
    """``spark.read.format("tileflight")`` and ``df.write.format("tileflight")``."""

    @classmethod
    def name(cls) -> str:
        return "tileflight"

    def schema(self) -> StructType:
        opts = dict(self.options)
        with _connect(opts) as c:
            return spark_schema(c.schema(_array(opts), columns=_columns(opts), **_query_opts(opts)))

    def reader(self, schema: StructType) -> "TileflightReader":
        opts = dict(self.options)
        push = opts.get("pushFilters")
        if push is None:
            push = _spark_pushdown_enabled()
        elif isinstance(push, str):
            push = push.strip().lower() not in ("false", "0", "no")
        return (TileflightReader if push else TileflightScanReader)(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> "TileflightWriter":
        return TileflightWriter(dict(self.options), schema, overwrite)


def _query_opts(opts: Dict[str, str]) -> Dict[str, Any]:
    q: Dict[str, Any] = {}
    if opts.get("subarray"):
        q["subarray"] = _opt_json(opts, "subarray")
    if opts.get("filter"):
        q["filter"] = opts["filter"]
    if opts.get("timestamp"):
        q["timestamp"] = _opt_json(opts, "timestamp")
    if opts.get("layout"):
        q["layout"] = opts["layout"]
    return q


class EndpointPartition(InputPartition):
    """One Flight endpoint: its ticket and the locations to read it from
    (none: the daemon the driver asked)."""
    def __init__(self, index: int, ticket: bytes, locations: List[str]) -> None:
        super().__init__(index)
        self.index = index
        self.ticket = ticket
        self.locations = locations


def _spark_pushdown_enabled() -> bool:
    """Whether Spark will call pushFilters (spark.sql.python.filterPushdown.enabled).

    Spark refuses a reader that implements pushFilters while the setting is
    off (DATA_SOURCE_PUSHDOWN_DISABLED), and it does not tell the data
    source the setting. Its planner (pyspark.sql.worker.plan_data_source_read)
    holds it in a local named ``enable_pushdown`` of the frame that calls
    ``reader()``; reading it there lets the source work either way, with
    pushdown when it is on. If a Spark version stops having that local, the
    pushdown reader is used (Spark's own error then names the setting), and
    ``.option("pushFilters", "false")`` chooses the plain reader.
    """
    f = sys._getframe(1)
    for _ in range(8):
        if f is None:
            break
        if "enable_pushdown" in f.f_locals:
            return bool(f.f_locals["enable_pushdown"])
        f = f.f_back
    return True


class TileflightScanReader(DataSourceReader):
    """Plans one partition per endpoint and streams each endpoint's batches
    (no filter pushdown: the reader Spark gets when pushdown is off)."""

    def __init__(self, options: Dict[str, str], schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.array = _array(options)
        self.base = _query_opts(options)
        self.subarray: Dict[str, List[List[Any]]] = {}
        self.conditions: List[str] = []
        self.empty = False

    # Planning and reading --------------------------------------------------------

    def _query(self) -> Dict[str, Any]:
        q = dict(self.base)
        if self.subarray:
            q["subarray"] = {**(q.get("subarray") or {}), **self.subarray}
        if self.conditions:
            q["filter"] = " and ".join([*([q["filter"]] if "filter" in q else []), *self.conditions])
        return q

    def partitions(self) -> List[InputPartition]:
        if self.empty:
            return [InputPartition(None)]
        opts = self.options
        q = self._query()
        parts = int(opts["partitions"]) if opts.get("partitions") else None
        batch_rows = int(opts["batch_rows"]) if opts.get("batch_rows") else None
        with _connect(opts) as c:
            info = c.flight_info(self.array, columns=self.schema.fieldNames(), partitions=parts,
                                 batch_rows=batch_rows, **q)
        out: List[InputPartition] = []
        for i, ep in enumerate(info.endpoints):
            locs = [(loc.uri.decode() if isinstance(loc.uri, bytes) else str(loc.uri)) for loc in ep.locations]
            out.append(EndpointPartition(i, ep.ticket.ticket, locs))
        return out or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, EndpointPartition):
            return  # an empty result
        import pyarrow.flight as fl
        target = _arrow_target(self.schema)
        ep = fl.FlightEndpoint(partition.ticket, [fl.Location(u) for u in partition.locations])
        with _connect(self.options) as c:
            for b in c.endpoint_batches(ep):
                if b.num_rows:
                    yield _conform(b, target)


class TileflightReader(TileflightScanReader):
    """The scan reader, with filters pushed into the query's subarray and filter."""

    # Filter pushdown -----------------------------------------------------------

    def pushFilters(self, filters: List[Filter]) -> Iterator[Filter]:
        with _connect(self.options) as c:
            desc = c.describe(self.array, timestamp=self.base.get("timestamp"))
            dims = {d["name"]: d for d in desc["dimensions"]}
            attrs = {a["name"]: a for a in desc["attributes"]}
            sparse = desc.get("type") == "sparse"
            ned = _non_empty_domain(c, self.array, self.base.get("timestamp"), dims)
            given = (self.base.get("subarray") or {})
            remaining: List[Filter] = []
            conds: List[Tuple[Filter, str]] = []
            for f in filters:
                col = f.attribute[0] if len(f.attribute) == 1 else None
                if col in dims and col not in given and ned is not None and self._push_dim(f, dims[col], ned[col]):
                    continue
                cond = _condition(f, dims.get(col) or attrs.get(col)) if (sparse and col is not None) else None
                if cond is None:
                    remaining.append(f)
                else:
                    conds.append((f, cond))
            # A condition is pushed only if the daemon runs it: one it
            # refuses (or a daemon without `filter`) leaves it to Spark.
            for f, cond in conds:
                if _runs_filter(c, self.array, self.base.get("timestamp"), ned, cond):
                    self.conditions.append(cond)
                else:
                    remaining.append(f)
        for f in remaining:
            yield f

    def _push_dim(self, f: Filter, dim: Dict[str, Any], ned: List[Any]) -> bool:
        """Narrow the dimension's range by f; False when f cannot be said as ranges."""
        t = dim["type"]
        numeric = t.startswith(("int", "uint", "float"))
        cur = self.subarray.get(dim["name"], [[ned[0], ned[1]]])
        v = getattr(f, "value", None)
        if isinstance(f, In):
            vals = [x for x in f.value if x is not None]
            if not vals or not all(_fits(x, t) for x in vals):
                return False
            pts = sorted(set(vals))
            new = [[p, p] for p in pts if any(lo <= p <= hi for lo, hi in cur)]
        elif isinstance(f, EqualTo):
            if v is None or not _fits(v, t):
                return False
            new = [[v, v]] if any(lo <= v <= hi for lo, hi in cur) else []
        elif numeric and isinstance(f, (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
            if v is None or not _fits(v, t):
                return False
            lo_b, hi_b = -math.inf, math.inf
            integral = not t.startswith("float")
            if isinstance(f, GreaterThan):
                lo_b = math.floor(v) + 1 if integral else math.nextafter(v, math.inf)
            elif isinstance(f, GreaterThanOrEqual):
                lo_b = math.ceil(v) if integral else v
            elif isinstance(f, LessThan):
                hi_b = math.ceil(v) - 1 if integral else math.nextafter(v, -math.inf)
            else:
                hi_b = math.floor(v) if integral else v
            new = []
            for lo, hi in cur:
                nlo, nhi = max(lo, lo_b), min(hi, hi_b)
                if nlo <= nhi:
                    new.append([nlo, nhi])
        else:
            return False
        if not new:
            self.empty = True
            new = [[ned[0], ned[0]]]
        self.subarray[dim["name"]] = new
        return True


def _fits(v: Any, t: str) -> bool:
    if isinstance(v, bool):
        return False
    if t.startswith(("int", "uint")):
        return isinstance(v, int) or (isinstance(v, float) and math.isfinite(v))
    if t.startswith("float"):
        return isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))
    if t in ("string_ascii", "string_utf8", "char"):
        return isinstance(v, str)
    return False


def _runs_filter(c: Client, array: str, timestamp: Any, ned: Optional[Dict[str, List[Any]]],
                 cond: str) -> bool:
    """Whether the daemon runs the condition: a DoGet of one cell with it
    (a GetSchema would not do: a daemon may parse a filter it cannot run)."""
    if ned is None:
        return False
    try:
        c.read(array, columns=[next(iter(ned))], subarray={d: (lo, lo) for d, (lo, _) in ned.items()},
               filter=cond, timestamp=timestamp, progress=False)
    except TileflightError:
        return False
    return True


def _non_empty_domain(c: Client, array: str, timestamp: Any,
                      dims: Dict[str, Any]) -> Optional[Dict[str, List[Any]]]:
    """The union of the visible fragments' non-empty domains (None: no fragment)."""
    frags = c.fragments(array, timestamp=timestamp)
    if not frags:
        return None
    out: Dict[str, List[Any]] = {}
    for fr in frags:
        for d, (lo, hi) in fr["non_empty_domain"].items():
            if d in out:
                out[d] = [min(out[d][0], lo), max(out[d][1], hi)]
            else:
                out[d] = [lo, hi]
    return out if set(out) == set(dims) else None


def _literal(v: Any) -> Optional[str]:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else None
    if isinstance(v, str):
        return repr(v)
    return None


_OPS = {EqualTo: "==", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}


def _condition(f: Filter, field: Optional[Dict[str, Any]]) -> Optional[str]:
    """f in TileDB QueryCondition syntax, or None when it has no exact equivalent."""
    if field is None:
        return None
    t = field["type"]
    if not t.startswith(("int", "uint", "float", "string", "char")) or field.get("cell_val_num", 1) not in (1, "var"):
        return None
    if field.get("cell_val_num") == "var" and not t.startswith(("string", "char")):
        return None
    name = field["name"]
    if not name.isidentifier():
        return None
    nullable = bool(field.get("nullable"))
    if type(f) in _OPS:
        lit = _literal(f.value)  # type: ignore[attr-defined]
        return None if lit is None else f"{name} {_OPS[type(f)]} {lit}"
    if isinstance(f, In):
        lits = [_literal(v) for v in f.value if v is not None]
        if not lits or any(x is None for x in lits):
            return None
        return f"{name} in [{', '.join(lits)}]"  # type: ignore[arg-type]
    if isinstance(f, IsNull) and nullable:
        return f"{name} == None"
    if isinstance(f, IsNotNull):
        return f"{name} != None" if nullable else None
    if isinstance(f, Not) and isinstance(f.child, EqualTo) and not nullable and f.child.attribute == f.attribute:
        lit = _literal(f.child.value)
        return None if lit is None else f"{name} != {lit}"
    return None


# -- writes -------------------------------------------------------------------------

@dataclass
class TileflightCommit(WriterCommitMessage):
    """What one task staged: its fragments and row count."""
    fragments: List[str]
    rows: int


class TileflightWriter(DataSourceArrowWriter):
    """One staged DoPut per task; commit or abort on the driver."""

    def __init__(self, options: Dict[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise TileflightError("tileflight: mode overwrite is not supported (TileDB arrays are "
                                  "appended to; use mode(\"append\"))", "UNIMPLEMENTED")
        self.options = options
        self.array = _array(options)
        ts = options.get("timestamp")
        # One timestamp for every task's fragments, chosen here on the driver.
        self.timestamp = int(ts) if ts else int(time.time() * 1000)
        batch_rows = options.get("batch_rows")
        self.batch_rows = int(batch_rows) if batch_rows else 65536
        # Batches are cut by bytes under the daemon's -max-message-bytes,
        # and a task's write over -max-put-bytes is staged in pieces
        # (Client.write); these options override the sizes.
        mbb, staged = options.get("max_batch_bytes"), options.get("staged")
        self.max_batch_bytes = int(mbb) if mbb else None
        self.staged = int(staged) if staged else None
        with _connect(options) as c:
            desc = c.describe(self.array)
        if desc.get("type") != "sparse":
            raise TileflightError(f"array {self.array}: Spark writes go to sparse arrays (a dense DoPut "
                                  "needs its rows in subarray order, which Spark tasks do not have)",
                                  "UNIMPLEMENTED")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TileflightCommit:
        it = iter(iterator)
        first = next(it, None)
        if first is None:
            return TileflightCommit([], 0)

        def batches() -> Iterator[pa.RecordBatch]:
            yield first
            yield from it
        reader = pa.RecordBatchReader.from_batches(first.schema, batches())
        with _connect(self.options) as c:
            res = c.write(self.array, reader, timestamp=self.timestamp, stage=True,
                          batch_rows=self.batch_rows, max_batch_bytes=self.max_batch_bytes,
                          staged=self.staged, progress=False)
        return TileflightCommit(res.fragments, res.rows)

    def commit(self, messages: Sequence[Optional[WriterCommitMessage]]) -> None:
        frags = [f for m in messages if isinstance(m, TileflightCommit) for f in m.fragments]
        if not frags:
            return
        with _connect(self.options) as c:
            c.commit_fragments(self.array, frags)

    def abort(self, messages: Sequence[Optional[WriterCommitMessage]]) -> None:
        frags = [f for m in messages if isinstance(m, TileflightCommit) for f in m.fragments]
        if not frags:
            return
        with _connect(self.options) as c:
            c.abort_fragments(self.array, frags)
