"""Building the query JSON of the tileflight protocol (docs/protocol.md).

The client takes Python conveniences and turns them into the wire form:
subarray values may be a scalar (one point), a ``(lo, hi)`` pair (one
inclusive range) or a list of pairs (several ranges); timestamps may be
milliseconds, a ``(start, end)`` pair or ``datetime`` objects; numpy scalars
are accepted wherever a number or string is.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

Subarray = Mapping[str, Any]
Timestamp = Union[int, _dt.datetime, Sequence[Union[int, _dt.datetime]]]


def _scalar(v: Any) -> Any:
    # numpy scalars (and 0-d arrays) become Python numbers and strings.
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, (_dt.datetime, _dt.date)):
        raise TypeError("subarray: give datetime dimensions as integers in the dimension's unit "
                        f"(got {v!r})")
    return v


def _is_range(v: Any) -> bool:
    return (isinstance(v, (tuple, list)) and len(v) == 2
            and not any(isinstance(x, (tuple, list)) for x in v))


def normalize_subarray(subarray: Optional[Subarray]) -> Optional[Dict[str, List[List[Any]]]]:
    """``{dim: ranges}`` in the wire form ``{dim: [[lo, hi], ...]}``."""
    if subarray is None:
        return None
    if not isinstance(subarray, Mapping):
        raise TypeError(f"subarray must be a mapping of dimension name to ranges, not {type(subarray).__name__}")
    out: Dict[str, List[List[Any]]] = {}
    for dim, v in subarray.items():
        if isinstance(v, slice):
            raise TypeError(f"subarray[{dim!r}]: use an inclusive (lo, hi) pair, not a slice")
        if _is_range(v):
            out[dim] = [[_scalar(v[0]), _scalar(v[1])]]
        elif isinstance(v, (tuple, list)):
            ranges = []
            for r in v:
                if not _is_range(r):
                    raise TypeError(f"subarray[{dim!r}]: each range must be a (lo, hi) pair, got {r!r}")
                ranges.append([_scalar(r[0]), _scalar(r[1])])
            out[dim] = ranges
        else:
            s = _scalar(v)
            out[dim] = [[s, s]]
    return out


def _ms(t: Any) -> int:
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return int(t.timestamp() * 1000)
    t = _scalar(t)
    if not isinstance(t, int) or isinstance(t, bool):
        raise TypeError(f"timestamp: milliseconds since the epoch as an int, or a datetime; got {t!r}")
    return t


def normalize_timestamp(ts: Optional[Timestamp]) -> Any:
    """A timestamp in the wire form: ``t`` or ``[start, end]`` (ms)."""
    if ts is None:
        return None
    if isinstance(ts, (tuple, list)):
        if len(ts) != 2:
            raise TypeError(f"timestamp: a (start, end) pair, got {ts!r}")
        return [_ms(ts[0]), _ms(ts[1])]
    return _ms(ts)


def build(array: str, **keys: Any) -> Dict[str, Any]:
    """A query object: ``array`` plus every key that is not None."""
    if not isinstance(array, str) or not array:
        raise TypeError("array: the array's name as a non-empty string")
    q: Dict[str, Any] = {"array": array}
    for k, v in keys.items():
        if v is None:
            continue
        if k == "subarray":
            v = normalize_subarray(v)
        elif k == "timestamp":
            v = normalize_timestamp(v)
        elif k == "columns":
            if isinstance(v, str):
                v = [v]
            v = list(v)
        q[k] = v
    return q


def _default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes, numpy values accepted."""
    return json.dumps(obj, separators=(",", ":"), default=_default).encode("utf-8")
