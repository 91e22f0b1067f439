"""Reading a SQLSTATE from whatever raised it, and the package's own errors."""
from __future__ import annotations

from typing import Optional


def sqlstate(exc: Optional[BaseException]) -> Optional[str]:
    """The SQLSTATE of a driver's error: psycopg 3 (sqlstate), psycopg2
    (pgcode), or either wrapped by Django (its DatabaseError's cause)."""
    seen = 0
    while exc is not None and seen < 5:
        code = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
        if code:
            return str(code)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


class ClaimLost(Exception):
    """The claim was taken over (IK004) or is gone (IK002): stop, the key
    belongs to another worker now."""
