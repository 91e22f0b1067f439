"""Idempotency-Key middleware for ASGI applications (Starlette, FastAPI).

The handler runs inside the request's transaction, with the claim and the
stored answer: its writes go through request.state.idempotency.conn (a
psycopg AsyncConnection) and commit with the answer, or roll back with it.
The answer is held until the transaction has committed, so that a client
never sees an answer that was then lost.
"""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

import psycopg

from . import http
from .http import Answer, Options
from .pipelined import AsyncTransaction

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class Idempotency:
    """What the handler gets, as request.state.idempotency."""

    conn: psycopg.AsyncConnection[Any]
    key: str
    scope: str
    attempt: Optional[int]


class _Rollback(Exception):
    """An answer that is not stored: its transaction must not commit."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer


def route_of(scope: Scope) -> str:
    """The route's pattern (/charges/{id}) when Starlette's router knows the
    path, else the path: the scope of a key is per endpoint, not per id."""
    router = getattr(scope.get("app"), "router", None)
    try:
        from starlette.routing import Match
    except ImportError:
        return scope["path"]
    for route in getattr(router, "routes", []):
        match, _ = route.matches(scope)
        if match == Match.FULL and hasattr(route, "path"):
            return str(route.path)
    return scope["path"]


class IdempotencyMiddleware:
    """app = IdempotencyMiddleware(app, conninfo="dbname=app"), or with
    pool=psycopg_pool.AsyncConnectionPool(...) (anything with an async
    connection() context manager)."""

    def __init__(self, app: ASGIApp, *, conninfo: Optional[str] = None,
                 pool: Any = None, options: Optional[Options] = None) -> None:
        if (conninfo is None) == (pool is None):
            raise ValueError("pass conninfo or pool")
        self.app = app
        self.conninfo = conninfo
        self.pool = pool
        self.options = options or Options()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self.pool is not None:
            async with self.pool.connection() as conn:
                yield conn
            return
        conn = await psycopg.AsyncConnection.connect(self.conninfo or "")
        try:
            yield conn
        finally:
            await conn.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in self.options.methods:
            return await self.app(scope, receive, send)
        raw = None
        for name, value in scope["headers"]:
            if name.decode("latin-1").lower() == self.options.header.lower():
                raw = value.decode("latin-1")
        key = http.parse_key(raw)
        if key is None:
            if not self.options.require_key:
                return await self.app(scope, receive, send)
            return await _send(send, http.problem(*http.MISSING_KEY))

        # the body is read whole: its digest is part of the claim, and the
        # handler reads it again from the copy
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        request = http.fingerprint(scope["path"], scope.get("query_string", b"").decode("latin-1"), body)
        key_scope = http.scope_of(self.options, scope["method"], route_of(scope))
        try:
            answer = await self._claim(scope, body, key, key_scope, request)
        except _Rollback as r:
            answer = r.answer
        except psycopg.Error as e:
            mapped = http.error_answer(e)
            if mapped is None:
                raise
            answer = mapped
        await _send(send, answer)

    async def _claim(self, scope: Scope, body: bytes, key: str, key_scope: str,
                     request: str) -> Answer:
        async with self._connection() as conn:
            # BEGIN goes with the claim, COMMIT with the answer (pipelined.py)
            async with AsyncTransaction(conn) as tx:
                row = await tx.first(http.BEGIN, http.begin_params(
                    self.options, key, key_scope, request))
                assert row is not None
                outcome, attempt, status, headers, stored, retry_after = row
                if outcome == "replay":
                    return http.replay(status, headers, stored)
                if outcome == "in_progress":
                    return http.problem(*http.IN_PROGRESS, retry_after)
                state = dict(scope.get("state") or {})
                state["idempotency"] = Idempotency(conn, key, key_scope, attempt)
                answer = await _run(self.app, {**scope, "state": state}, body)
                if not self.options.store(answer.status):
                    raise _Rollback(answer)
                await tx.last(http.FINISH, http.finish_params(key, key_scope, answer))
        return answer


async def _run(app: ASGIApp, scope: Scope, body: bytes) -> Answer:
    """Runs the application on the buffered body and keeps its answer."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            # the client's disconnect is not the handler's business: the
            # answer is stored for its retry all the same, so the handler
            # never hears of it
            await asyncio.Event().wait()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    answer = Answer(500)
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = [(n.decode("latin-1"), v.decode("latin-1"))
                              for n, v in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    answer.body = b"".join(chunks)
    return answer


async def _send(send: Send, answer: Answer) -> None:
    await send({"type": "http.response.start", "status": answer.status,
                "headers": [(n.encode("latin-1"), v.encode("latin-1"))
                            for n, v in answer.headers]})
    await send({"type": "http.response.body", "body": answer.body})
