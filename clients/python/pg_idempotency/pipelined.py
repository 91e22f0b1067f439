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
"""
from __future__ import annotations

from types import TracebackType
from typing import Any, Optional, Sequence, Type

import psycopg
from psycopg import pq

IDLE = pq.TransactionStatus.IDLE
OPEN = (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)


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
            with self.conn.pipeline():
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
            with self.conn.pipeline():
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
            async with self.conn.pipeline():
                await self._begin()
                cur = await self.conn.execute(query, params, prepare=False)
        else:
            await self._begin()
            cur = await self.conn.execute(query, params, prepare=False)
        return await cur.fetchone()

    async def last(self, query: str, params: Sequence[Any]) -> Optional[tuple[Any, ...]]:
        """query and COMMIT; query's first row."""
        if self._pipelined:
            async with self.conn.pipeline():
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
