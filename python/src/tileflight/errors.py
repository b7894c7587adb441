"""Exceptions raised by the tileflight client.

Every error the daemon answers with is a gRPC status; the client raises it as
a :class:`TileflightError` subclass chosen by the status code, keeping the
code (``err.code``, e.g. ``"NOT_FOUND"``) and the server's message
(``err.message``, which names the array, field and problem). The classes
also derive from the matching built-in exception where one fits, so
``except LookupError`` or ``except ValueError`` keep working.

pyarrow's Flight client reports a status as text ("Flight returned not found
error, with message: ...", with a "gRPC client debug context: CODE:" tail
on streaming calls); :func:`from_arrow` reads the code and the message back
out of it.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Type

__all__ = [
    "TileflightError", "InvalidArgument", "NotFound", "AlreadyExists", "Unauthenticated",
    "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "DataLoss",
    "Unimplemented", "Internal", "Unavailable", "Cancelled", "DeadlineExceeded", "from_arrow",
]


class TileflightError(Exception):
    """A call to the daemon failed.

    Attributes:
        code: the gRPC status code name (``"INVALID_ARGUMENT"``, ``"NOT_FOUND"``, ...).
        message: the server's message, without pyarrow's decorations.
    """

    code: str = "UNKNOWN"

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidArgument(TileflightError, ValueError):
    """Bad request: bad JSON, unknown key or column, range outside the domain, wrong write schema or row count."""
    code = "INVALID_ARGUMENT"


class NotFound(TileflightError, LookupError):
    """No such array (or fragment)."""
    code = "NOT_FOUND"


class AlreadyExists(TileflightError):
    """``create`` on an array that exists."""
    code = "ALREADY_EXISTS"


class Unauthenticated(TileflightError):
    """The daemon wants a token and the call had none, or an unknown one."""
    code = "UNAUTHENTICATED"


class PermissionDenied(TileflightError):
    """A read-only token tried to write."""
    code = "PERMISSION_DENIED"


class ResourceExhausted(TileflightError):
    """A limit of the daemon was reached (concurrent queries, bytes, memory)."""
    code = "RESOURCE_EXHAUSTED"


class FailedPrecondition(TileflightError):
    """The request cannot run in the daemon's state (e.g. an encrypted array without the key)."""
    code = "FAILED_PRECONDITION"


class Aborted(TileflightError):
    """The operation was aborted (e.g. a conflicting concurrent change)."""
    code = "ABORTED"


class DataLoss(TileflightError):
    """A corrupt or truncated file, a failed checksum."""
    code = "DATA_LOSS"


class Unimplemented(TileflightError, NotImplementedError):
    """A feature the daemon does not support (yet)."""
    code = "UNIMPLEMENTED"


class Internal(TileflightError):
    """A bug in the daemon."""
    code = "INTERNAL"


class Unavailable(TileflightError, ConnectionError):
    """The daemon cannot be reached."""
    code = "UNAVAILABLE"


class Cancelled(TileflightError):
    """The call was cancelled."""
    code = "CANCELLED"


class DeadlineExceeded(TileflightError, TimeoutError):
    """The call timed out."""
    code = "DEADLINE_EXCEEDED"


_BY_CODE: Dict[str, Type[TileflightError]] = {
    c.code: c for c in (InvalidArgument, NotFound, AlreadyExists, Unauthenticated, PermissionDenied,
                        ResourceExhausted, FailedPrecondition, Aborted, DataLoss, Unimplemented,
                        Internal, Unavailable, Cancelled, DeadlineExceeded)
}

# pyarrow words a status "Flight returned <words> error" (or "gRPC returned"
# for codes Flight has no status of its own for).
_WORDS = {
    "invalid argument": "INVALID_ARGUMENT", "not found": "NOT_FOUND", "already exists": "ALREADY_EXISTS",
    "unauthenticated": "UNAUTHENTICATED", "unauthorized": "PERMISSION_DENIED",
    "unimplemented": "UNIMPLEMENTED", "internal": "INTERNAL", "data loss": "DATA_LOSS",
    "resource exhausted": "RESOURCE_EXHAUSTED", "cancelled": "CANCELLED",
    "precondition failed": "FAILED_PRECONDITION", "aborted": "ABORTED", "out-of-range": "OUT_OF_RANGE",
    "timeout": "DEADLINE_EXCEEDED", "unavailable": "UNAVAILABLE",
}
_DEBUG_RE = re.compile(r"gRPC client debug context: ([A-Z_]+):")
_RETURNED_RE = re.compile(r"(?:Flight|gRPC) returned (.+?) error(?:, with message: )?")
_TAIL_RE = re.compile(r"\. gRPC client debug context: |\. Client context: | Detail: ")


def _code_of(exc: BaseException, text: str) -> str:
    m = _DEBUG_RE.search(text)
    if m:
        return m.group(1)
    m = _RETURNED_RE.search(text)
    if m and m.group(1) in _WORDS:
        return _WORDS[m.group(1)]
    try:
        import pyarrow.flight as fl
    except ImportError:  # pragma: no cover - pyarrow always has flight here
        return "UNKNOWN"
    for cls, code in ((fl.FlightUnauthenticatedError, "UNAUTHENTICATED"),
                      (fl.FlightUnauthorizedError, "PERMISSION_DENIED"),
                      (fl.FlightUnavailableError, "UNAVAILABLE"),
                      (fl.FlightTimedOutError, "DEADLINE_EXCEEDED"),
                      (fl.FlightCancelledError, "CANCELLED"),
                      (fl.FlightInternalError, "INTERNAL")):
        if isinstance(exc, cls):
            return code
    return "UNKNOWN"


def _message_of(text: str) -> str:
    m = _RETURNED_RE.search(text)
    if m:
        text = text[m.end():]
    t = _TAIL_RE.search(text)
    if t:
        text = text[:t.start()]
    return text.strip()


def from_arrow(exc: BaseException) -> TileflightError:
    """The :class:`TileflightError` that a pyarrow Flight exception stands for."""
    if isinstance(exc, TileflightError):
        return exc
    text = str(exc)
    code = _code_of(exc, text)
    cls = _BY_CODE.get(code, TileflightError)
    err = cls(_message_of(text), code if cls is TileflightError else None)
    return err
