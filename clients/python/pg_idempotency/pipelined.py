"""The package's own transactions, with BEGIN sent together with their first
statement and COMMIT together with their last: a round trip saved at each
end (libpq's pipeline mode, one Sync for the pair).

Pipeline mode is on only while a pair is in flight: in between, the caller
(a request's handler, a message's handle) uses the connection as usual,
cursors, server-side cursors and its own savepoints included.

psycopg 3.1 follows the BEGIN it sends itself with a Sync, in pipeline mode
too (conn.transaction()'s, and the one before a statement outside
autocommit), but not the BEGIN of a psycopg.Transaction entered in a pipeline
on a connection in autocommit.  So the connection is in autocommit for the
transaction, and gets its mode back after it; the Transaction, rather than
a BEGIN of our own, keeps psycopg's checks: the caller's commit() or
rollback() is refused, as in conn.transaction(), instead of ending the
transaction before its claim is finished.  A connection with a transaction
open already, or a libpq without pipeline mode (before 14), gets the
statements one after another.

A pair interrupted while its answers are on their way (its task cancelled by
a wait_for's time-out or an ASGI server's disconnect, a Ctrl-C) ends in that
CancelledError or KeyboardInterrupt.  psycopg cancels the statement and reads
the answers first where it can (a sync connection on Ctrl-C, an async one
from psycopg 3.1.9); where it could not, it left the pipeline without the
state that reads them, and raised "cannot exit pipeline mode while busy" in
place of the interruption.  That connection is closed: it can serve nothing
more, and recovering it would mean waiting for the server the caller stopped
waiting for.  The server rolls back the transaction of a closed connection,
so a claim is never left committed half-done (last() sent its COMMIT with the
statement: both commit or neither), and a pool discards a closed connection.
"""
from __future__ import annotations

import sys
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import Any, AsyncIterator, Iterator, Optional, Sequence, Type

import psycopg
from psycopg import pq

IDLE = pq.TransactionStatus.IDLE
OPEN = (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)
PIPELINE_OFF = pq.PipelineStatus.OFF


def _stuck(conn: psycopg.BaseConnection[Any]) -> bool:
    """libpq still in pipeline mode after psycopg left it: the pair's answers
    are owed, and the connection can neither read them nor send anything."""
    return not conn.closed and conn.pgconn.pipeline_status != PIPELINE_OFF


def _interruption(exc: BaseException, handled: Optional[BaseException]) -> BaseException:
    """exc, or the interruption that psycopg's pipeline exit raised it in
    place of (its context).  One the caller was handling before the pair
    began, as in a finally block of a cancelled task, is not the pair's."""
    context = exc.__context__
    if (isinstance(exc, psycopg.OperationalError) and context is not None
            and not isinstance(context, Exception) and context is not handled):
        return context
    return exc


@contextmanager
def _pair(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """conn.pipeline() for one pair."""
    handled = sys.exc_info()[1]
    try:
        with conn.pipeline():
            yield
    except BaseException as exc:
        if _stuck(conn):
            conn.close()
        interruption = _interruption(exc, handled)
        if interruption is not exc:
            raise interruption from None
        raise


@asynccontextmanager
async def _async_pair(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
    """conn.pipeline() for one pair, on an AsyncConnection."""
    handled = sys.exc_info()[1]
    try:
        async with conn.pipeline():
            yield
    except BaseException as exc:
        if _stuck(conn):
            await conn.close()
        interruption = _interruption(exc, handled)
        if interruption is not exc:
            raise interruption from None
        raise


class Transaction:
    """with Transaction(conn) as tx: row = tx.first(query, params); ...;
    tx.last(query, params).  Without last(), the exit commits (or, on an
    exception, rolls back) on its own."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._tx = psycopg.Transaction(conn)
        self._pipelined = self._autocommit = False
        self._entered = self._exited = False

    def __enter__(self) -> "Transaction":
        self._pipelined = (self.conn.info.transaction_status == IDLE
                           and psycopg.Pipeline.is_supported())
        if self._pipelined:
            self._autocommit = self.conn.autocommit
            self.conn.autocommit = True
        return self

    def first(self, query: str, params: Sequence[Any]) -> Optional[tuple[Any, ...]]:
        """BEGIN and query; query's first row."""
        if self._pipelined:
            with _pair(self.conn):
                self._begin()
                # never prepared: behind PgBouncer in transaction mode the
                # next transaction may run on a server connection without it
                cur = self.conn.execute(query, params, prepare=False)
        else:
            self._begin()
            cur = self.conn.execute(query, params, prepare=False)
        return cur.fetchone()

    def last(self, query: str, params: Sequence[Any]) -> Optional[tuple[Any, ...]]:
        """query and COMMIT; query's first row."""
        if self._pipelined:
            with _pair(self.conn):
                cur = self.conn.execute(query, params, prepare=False)
                self._commit()
        else:
            cur = self.conn.execute(query, params, prepare=False)
            self._commit()
        return cur.fetchone()

    def _begin(self) -> None:
        self._entered = True
        self._tx.__enter__()

    def _commit(self) -> None:
        self._exited = True
        self._tx.__exit__(None, None, None)

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            if self._entered and not self._exited:
                self._exited = True
                self._tx.__exit__(exc_type, exc, tb)
            elif exc is not None and self.conn.info.transaction_status in OPEN:
                # the last statement failed in the pipeline: the server
                # skipped the COMMIT after it, and the transaction is open
                self.conn.rollback()
        finally:
            if self._pipelined and self.conn.info.transaction_status == IDLE:
                self.conn.autocommit = self._autocommit


class AsyncTransaction:
    """Transaction on an AsyncConnection."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self._tx = psycopg.AsyncTransaction(conn)
        self._pipelined = self._autocommit = False
        self._entered = self._exited = False

    async def __aenter__(self) -> "AsyncTransaction":
        self._pipelined = (self.conn.info.transaction_status == IDLE
                           and psycopg.AsyncPipeline.is_supported())
        if self._pipelined:
            self._autocommit = self.conn.autocommit
            await self.conn.set_autocommit(True)
        return self

    async def first(self, query: str, params: Sequence[Any]) -> Optional[tuple[Any, ...]]:
        """BEGIN and query; query's first row."""
        if self._pipelined:
            async with _async_pair(self.conn):
                await self._begin()
                cur = await self.conn.execute(query, params, prepare=False)
        else:
            await self._begin()
            cur = await self.conn.execute(query, params, prepare=False)
        return await cur.fetchone()

    async def last(self, query: str, params: Sequence[Any]) -> Optional[tuple[Any, ...]]:
        """query and COMMIT; query's first row."""
        if self._pipelined:
            async with _async_pair(self.conn):
                cur = await self.conn.execute(query, params, prepare=False)
                await self._commit()
        else:
            cur = await self.conn.execute(query, params, prepare=False)
            await self._commit()
        return await cur.fetchone()

    async def _begin(self) -> None:
        self._entered = True
        await self._tx.__aenter__()

    async def _commit(self) -> None:
        self._exited = True
        await self._tx.__aexit__(None, None, None)

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            if self._entered and not self._exited:
                self._exited = True
                await self._tx.__aexit__(exc_type, exc, tb)
            elif exc is not None and self.conn.info.transaction_status in OPEN:
                await self.conn.rollback()
        finally:
            if self._pipelined and self.conn.info.transaction_status == IDLE:
                await self.conn.set_autocommit(self._autocommit)
