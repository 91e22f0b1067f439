"""The package's own transactions (pg_idempotency.pipelined), sync and async:
BEGIN in the round trip of the first statement and COMMIT in that of the
last; the connection as the caller uses it in between (cursors, server-side
cursors, savepoints, its commit() refused); and, after a statement that
failed or an exception, rolled back, in its own mode, ready for the next."""
from __future__ import annotations

import asyncio
import unittest
from typing import Any

import psycopg
from psycopg import pq

from pg_idempotency.pipelined import AsyncTransaction, Transaction

from . import support
from .support import key, scalar

INSERT = "INSERT INTO py_effects VALUES ('pipelined', %s) RETURNING message_id"
COUNT = "SELECT count(*) FROM py_effects WHERE message_id = %s"
IDLE = pq.TransactionStatus.IDLE


def kept(mid: str) -> int:
    return int(scalar(COUNT, (mid,)))


class TransactionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        support.setup_schema()

    def setUp(self) -> None:
        self.trips = support.RoundTrips()
        self.conn = support.connect(**self.trips.kwargs())
        self.trips.take()

    def tearDown(self) -> None:
        self.conn.close()
        self.trips.close()

    def assertReady(self, autocommit: bool = False) -> None:
        """Back in its mode, no transaction open, and usable."""
        self.assertEqual((self.conn.autocommit, self.conn.info.transaction_status), (autocommit, IDLE))
        self.assertEqual(self.conn.execute("SELECT 1").fetchone(), (1,))
        self.conn.rollback()
        self.trips.take()

    def test_first_and_last(self) -> None:
        mid = key("pipelined")
        with Transaction(self.conn) as tx:
            self.assertEqual(tx.first(INSERT, (mid,)), (mid,))
            self.assertEqual(self.trips.take(), [["BEGIN", "INSERT"]])
            # the caller's statements, one after another as usual
            self.assertEqual(self.conn.execute(COUNT, (mid,)).fetchone(), (1,))
            with self.conn.cursor(name="between") as cur:
                cur.execute("SELECT generate_series(1, 3)")
                self.assertEqual(cur.fetchall(), [(1,), (2,), (3,)])
            with self.conn.transaction():
                self.conn.execute(INSERT, (mid + "-kept",))
            with self.conn.transaction() as inner:
                self.conn.execute(INSERT, (mid + "-undone",))
                raise psycopg.Rollback(inner)
            with self.assertRaises(psycopg.ProgrammingError):
                self.conn.commit()
            self.trips.take()
            self.assertEqual(tx.last(COUNT, (mid,)), (1,))
            self.assertEqual(self.trips.take(), [["SELECT", "COMMIT"]])
        self.assertEqual((kept(mid), kept(mid + "-kept"), kept(mid + "-undone")), (1, 1, 0))
        self.assertReady()

    def test_in_autocommit(self) -> None:
        mid = key("pipelined-autocommit")
        self.conn.autocommit = True
        with Transaction(self.conn) as tx:
            tx.first(INSERT, (mid,))
            tx.last(COUNT, (mid,))
        self.assertEqual(self.trips.take(), [["BEGIN", "INSERT"], ["SELECT", "COMMIT"]])
        self.assertEqual(kept(mid), 1)
        self.assertReady(autocommit=True)

    def test_without_last(self) -> None:
        mid = key("pipelined-no-last")
        with Transaction(self.conn) as tx:
            tx.first(INSERT, (mid,))
        self.assertEqual(self.trips.take(), [["BEGIN", "INSERT"], ["COMMIT"]])
        self.assertEqual(kept(mid), 1)
        self.assertReady()

    def test_exception_between(self) -> None:
        mid = key("pipelined-raises")
        with self.assertRaises(ValueError), Transaction(self.conn) as tx:
            tx.first(INSERT, (mid,))
            raise ValueError("the caller failed")
        self.assertEqual(self.trips.take(), [["BEGIN", "INSERT"], ["ROLLBACK"]])
        self.assertEqual(kept(mid), 0)
        self.assertReady()

    def test_first_fails(self) -> None:
        with self.assertRaises(psycopg.errors.DivisionByZero), Transaction(self.conn) as tx:
            tx.first("SELECT 1 / %s", (0,))
        self.assertEqual(self.trips.take(), [["BEGIN", "SELECT"], ["ROLLBACK"]])
        self.assertReady()

    def test_last_fails(self) -> None:
        mid = key("pipelined-last-fails")
        with self.assertRaises(psycopg.errors.DivisionByZero), Transaction(self.conn) as tx:
            tx.first(INSERT, (mid,))
            tx.last("SELECT 1 / %s", (0,))
        # the server skipped the COMMIT after the failed statement
        self.assertEqual(self.trips.take(), [["BEGIN", "INSERT"], ["SELECT", "COMMIT"], ["ROLLBACK"]])
        self.assertEqual(kept(mid), 0)
        self.assertReady()

    def test_transaction_open(self) -> None:
        # inside the caller's transaction: a savepoint, statements in turn
        mid = key("pipelined-open")
        self.conn.execute("SELECT 1")
        self.trips.take()
        with Transaction(self.conn) as tx:
            tx.first(INSERT, (mid,))
            tx.last(COUNT, (mid,))
        self.assertEqual(self.trips.take(), [["SAVEPOINT"], ["INSERT"], ["SELECT"], ["RELEASE"]])
        self.assertEqual(self.conn.info.transaction_status, pq.TransactionStatus.INTRANS)
        self.conn.commit()
        self.assertEqual(kept(mid), 1)


class AsyncTransactionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        support.setup_schema()

    def run_with(self, test: Any) -> list[list[str]]:
        """test(conn) on an AsyncConnection through the proxy; its round trips."""
        async def run() -> list[list[str]]:
            with support.RoundTrips() as trips:
                conn = await psycopg.AsyncConnection.connect(support.CONNINFO, **trips.kwargs())
                try:
                    trips.take()
                    await test(conn)
                    seen = trips.take()
                    self.assertEqual((conn.autocommit, conn.info.transaction_status), (False, IDLE))
                    await conn.execute("SELECT 1")
                    return seen
                finally:
                    await conn.close()
        return asyncio.run(run())

    def test_first_and_last(self) -> None:
        mid = key("async-pipelined")

        async def test(conn: psycopg.AsyncConnection[Any]) -> None:
            async with AsyncTransaction(conn) as tx:
                self.assertEqual(await tx.first(INSERT, (mid,)), (mid,))
                async with conn.cursor(name="between") as cur:
                    await cur.execute("SELECT generate_series(1, 3)")
                    self.assertEqual(await cur.fetchall(), [(1,), (2,), (3,)])
                async with conn.transaction() as inner:
                    await conn.execute(INSERT, (mid + "-undone",))
                    raise psycopg.Rollback(inner)
                with self.assertRaises(psycopg.ProgrammingError):
                    await conn.commit()
                self.assertEqual(await tx.last(COUNT, (mid,)), (1,))

        seen = self.run_with(test)
        self.assertEqual((seen[0], seen[-1]), (["BEGIN", "INSERT"], ["SELECT", "COMMIT"]))
        self.assertEqual((kept(mid), kept(mid + "-undone")), (1, 0))

    def test_first_fails(self) -> None:
        async def test(conn: psycopg.AsyncConnection[Any]) -> None:
            with self.assertRaises(psycopg.errors.DivisionByZero):
                async with AsyncTransaction(conn) as tx:
                    await tx.first("SELECT 1 / %s", (0,))

        self.assertEqual(self.run_with(test), [["BEGIN", "SELECT"], ["ROLLBACK"]])

    def test_last_fails(self) -> None:
        mid = key("async-pipelined-last-fails")

        async def test(conn: psycopg.AsyncConnection[Any]) -> None:
            with self.assertRaises(psycopg.errors.DivisionByZero):
                async with AsyncTransaction(conn) as tx:
                    await tx.first(INSERT, (mid,))
                    await tx.last("SELECT 1 / %s", (0,))

        self.assertEqual(self.run_with(test),
                         [["BEGIN", "INSERT"], ["SELECT", "COMMIT"], ["ROLLBACK"]])
        self.assertEqual(kept(mid), 0)


if __name__ == "__main__":
    unittest.main()
