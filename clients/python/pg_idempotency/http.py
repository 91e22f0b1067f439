"""The IETF Idempotency-Key draft on the idempotency extension, without a
framework: what the ASGI and Django middleware share.

The statements take only text, integers, bytes and NULL, and read JSON back as
text, so that they run unchanged on psycopg 3 and on whatever driver Django's
connection uses (psycopg2 on Django 3.2, which hands jsonb back undecoded).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Iterable, Optional, Sequence

from .errors import sqlstate

BEGIN = """SELECT outcome, attempt, status_code, headers::text, body, retry_after
             FROM idempotency.idempotent_begin(%s, %s, %s::jsonb, ttl => %s,
                                               wait => %s, max_wait => %s)"""
FINISH = """SELECT idempotency.idempotent_finish(%s, NULL, %s, status_code => %s,
                                                 body => %s, headers => %s::jsonb)"""

# doc/errors.md, "How an HTTP layer maps idempotent_begin": status, detail,
# Retry-After.  A refused key is the client's fault; a serialization failure
# or deadlock lost to a concurrent duplicate, a statement cancelled and a
# registry locked by an update are worth retrying.
ERRORS: dict[str, tuple[int, str, Optional[int]]] = {
    "IK001": (422, "the idempotency key was already used for a different request", None),
    "22P02": (400, "invalid Idempotency-Key header", None),
    "22021": (400, "invalid Idempotency-Key header", None),
    "40001": (409, "a concurrent request with the same key; retry", 1),
    "40P01": (409, "a concurrent request with the same key; retry", 1),
    "55P03": (503, "the service is being updated; retry", 1),
    "57014": (503, "the request took too long; retry", 1),
}

REPLAYED = ("Idempotent-Replayed", "true")


def not_server_error(status: int) -> bool:
    """The default of Options.store: a 5xx answer is not kept, so a retry executes."""
    return status < 500


@dataclass
class Options:
    """What the middleware does; every field has the draft's default."""

    header: str = "Idempotency-Key"
    # methods that need a key; others pass through untouched
    methods: frozenset[str] = frozenset({"POST", "PATCH"})
    # False: a request without a key passes through (no claim, no replay)
    require_key: bool = True
    # which answers are stored and replayed; the others roll back, with the
    # handler's writes, and a retry executes again
    store: Callable[[int], bool] = not_server_error
    # how long a duplicate waits for the first request's transaction before
    # it is answered 409; None: the server's idempotency.max_wait (5 s by
    # default); 0: not at all, but then concurrent replays of one key can be
    # answered 409 too (begin's wait => false)
    max_wait: Optional[timedelta] = None
    ttl: timedelta = timedelta(hours=24)
    # the scope of a key; None: "METHOD route" (the route's pattern, else the path)
    scope: Optional[Callable[[str, str], str]] = None


@dataclass
class Answer:
    """An HTTP answer as it is stored and replayed: header lines in their order."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


def parse_key(raw: Optional[str]) -> Optional[str]:
    """The header is a Structured Field string ("abc"); a bare token is accepted too."""
    if raw is None:
        return None
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        out, escaped = [], False
        for ch in raw[1:-1]:
            if escaped or ch != "\\":
                out.append(ch)
                escaped = False
            else:
                escaped = True
        raw = "".join(out)
    return raw or None


def fingerprint(path: str, query: str, body: bytes) -> str:
    """The request as the extension compares it: the path and query (the route
    may be a pattern shared by many paths) and a digest of the body, so that
    any body, JSON or not, is compared byte for byte without being stored."""
    return json.dumps({"path": path, "query": query,
                       "body": hashlib.sha256(body).hexdigest()})


def scope_of(options: Options, method: str, route: str) -> str:
    return options.scope(method, route) if options.scope else f"{method} {route}"


def begin_params(options: Options, key: str, scope: str, request: str) -> tuple[Any, ...]:
    wait = options.max_wait is None or options.max_wait > timedelta(0)
    return (key, scope, request, options.ttl, wait, options.max_wait)


def finish_params(key: str, scope: str, answer: Answer) -> tuple[Any, ...]:
    headers = json.dumps([[name, value] for name, value in answer.headers])
    return (key, scope, answer.status, answer.body, headers)


def header_lines(headers: Any) -> list[tuple[str, str]]:
    """A stored answer's header lines in their order: pairs as they are, an
    object name by name (jsonb's key order), an array value one line per value."""
    if headers is None:
        return []
    if isinstance(headers, (str, bytes)):
        headers = json.loads(headers)
    if isinstance(headers, list):
        return [(name, value) for name, value in headers]
    lines: list[tuple[str, str]] = []
    for name, value in headers.items():
        for v in value if isinstance(value, list) else [value]:
            lines.append((name, v))
    return lines


def replay(status: int, headers: Any, body: Any) -> Answer:
    """The stored answer, marked as a replay."""
    return Answer(status, header_lines(headers) + [REPLAYED], bytes(body or b""))


def problem(status: int, detail: str, retry_after: Optional[int] = None) -> Answer:
    headers = [("Content-Type", "application/json")]
    if retry_after:
        headers.append(("Retry-After", str(retry_after)))
    return Answer(status, headers, json.dumps({"error": detail}).encode())


MISSING_KEY = (400, "this request needs an Idempotency-Key header")
IN_PROGRESS = (409, "a request with this key is in progress")


def error_answer(exc: BaseException) -> Optional[Answer]:
    """The answer for a database error that has one, else None (a 500)."""
    known = ERRORS.get(sqlstate(exc) or "")
    return problem(*known) if known else None


def drop_framework_headers(lines: Iterable[tuple[str, str]],
                           names: Sequence[str]) -> list[tuple[str, str]]:
    lower = {n.lower() for n in names}
    return [(n, v) for n, v in lines if n.lower() not in lower]
