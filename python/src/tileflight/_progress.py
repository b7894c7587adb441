"""Progress bars for long reads and writes.

A bar is shown when tqdm is installed and the caller asked for one
(``progress=True``), or by default (``progress=None``) when stderr is a
terminal or the code runs in a Jupyter kernel. tqdm's ``delay`` keeps short
calls silent: the bar appears only once a call has run for a second.
Without tqdm, or when no bar is wanted, the no-op :class:`_Null` stands in.
"""

from __future__ import annotations

import sys
from typing import Any, Optional


class _Null:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "_Null":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def _interactive() -> bool:
    try:
        if sys.stderr is not None and sys.stderr.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    ip = sys.modules.get("IPython")
    if ip is not None:
        try:
            shell = ip.get_ipython()  # type: ignore[attr-defined]
            return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"
        except Exception:
            return False
    return False


def bar(progress: Optional[bool], total: Optional[int], desc: str, unit: str = "rows") -> Any:
    """A tqdm bar counting ``unit``, or a no-op when none is wanted or possible."""
    if progress is False or (progress is None and not _interactive()):
        return _Null()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _Null()
    return tqdm(total=total if total is not None and total >= 0 else None, desc=desc, unit=unit,
                unit_scale=True, delay=0 if progress else 1.0, leave=False)
