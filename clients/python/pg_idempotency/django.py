"""Idempotency-Key middleware for Django.

It runs on Django's own database connection, inside transaction.atomic():
the view's ORM writes, the claim and the stored answer commit together or
not at all, as with ATOMIC_REQUESTS.  request.idempotency.conn is that
connection (django.db.connections[alias]), for raw SQL.  Its driver is
Django's (psycopg2 up to Django 4.1, psycopg 3 from 4.2): the statements
are written for both.

settings.py:
    MIDDLEWARE = [..., "pg_idempotency.django.IdempotencyMiddleware"]
    IDEMPOTENCY = {"database": "default", "require_key": True, ...}  # Options' fields
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Optional

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.urls import Resolver404, resolve

from . import http
from .http import Answer, Options


@dataclass
class Idempotency:
    """What the view gets, as request.idempotency."""

    conn: Any
    key: str
    scope: str
    attempt: Optional[int]
    error: Optional[Answer] = None


class _Rollback(Exception):
    def __init__(self, response: HttpResponseBase) -> None:
        self.response = response


def _options() -> tuple[str, Options]:
    conf = dict(getattr(settings, "IDEMPOTENCY", {}))
    alias = conf.pop("database", "default")
    known = {f.name for f in fields(Options)}
    unknown = set(conf) - known
    if unknown:
        raise ValueError(f"unknown IDEMPOTENCY settings: {', '.join(sorted(unknown))}")
    if "methods" in conf:
        conf["methods"] = frozenset(conf["methods"])
    return alias, Options(**conf)


def _route(request: HttpRequest) -> str:
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return request.path_info
    return "/" + match.route if match.route else request.path_info


def _response(answer: Answer) -> HttpResponse:
    """An answer as Django sends it: one line per header name, in order, but
    Set-Cookie, one line per cookie (Django keeps repeated names no other way)."""
    response = HttpResponse(answer.body, status=answer.status)
    del response["Content-Type"]
    for name, value in answer.headers:
        if name.lower() == "set-cookie":
            response.cookies.load(value)
        elif name in response:
            response[name] = f"{response[name]}, {value}"
        else:
            response[name] = value
    return response


def _answer(response: HttpResponseBase) -> Answer:
    if response.streaming:
        raise TypeError("a streaming response cannot be stored for replay")
    lines = list(response.items())
    lines += [("Set-Cookie", c.output(header="").strip()) for c in response.cookies.values()]
    return Answer(response.status_code, lines, bytes(response.content))


class IdempotencyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self.alias, self.options = _options()

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.method not in self.options.methods:
            return self.get_response(request)
        key = http.parse_key(request.headers.get(self.options.header))
        if key is None:
            if not self.options.require_key:
                return self.get_response(request)
            return _response(http.problem(*http.MISSING_KEY))
        body = request.body
        query = request.META.get("QUERY_STRING", "")
        key_request = http.fingerprint(request.path, query, body)
        scope = http.scope_of(self.options, request.method or "", _route(request))
        try:
            return self._claim(request, key, scope, key_request)
        except _Rollback as r:
            return r.response
        except DatabaseError as e:
            mapped = http.error_answer(e)
            if mapped is None:
                raise
            return _response(mapped)

    def _claim(self, request: HttpRequest, key: str, scope: str,
               key_request: str) -> HttpResponseBase:
        conn = connections[self.alias]
        with transaction.atomic(using=self.alias):
            with conn.cursor() as cur:
                cur.execute(http.BEGIN, http.begin_params(self.options, key, scope, key_request))
                outcome, attempt, status, headers, stored, retry_after = cur.fetchone()
            if outcome == "replay":
                return _response(http.replay(status, headers, stored))
            if outcome == "in_progress":
                return _response(http.problem(*http.IN_PROGRESS, retry_after))
            request.idempotency = Idempotency(conn, key, scope, attempt)  # type: ignore[attr-defined]
            response = self.get_response(request)
            error = request.idempotency.error  # type: ignore[attr-defined]
            if error is not None:
                raise _Rollback(_response(error))
            if not self.options.store(response.status_code):
                raise _Rollback(response)
            answer = _answer(response)
            with conn.cursor() as cur:
                cur.execute(http.FINISH, http.finish_params(key, scope, answer))
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> Optional[HttpResponse]:
        """A database error in the view that has an answer of its own (a
        serialization failure, a cancelled statement): the transaction is
        lost, the answer is the mapped one, and nothing is stored."""
        mapped = http.error_answer(exception)
        state = getattr(request, "idempotency", None)
        if mapped is None or state is None:
            return None
        state.error = mapped
        return _response(mapped)
