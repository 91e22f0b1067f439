"""The package's own transactions (pg_idempotency.pipelined), sync and async:
BEGIN in the round trip of the first statement and COMMIT in that of the
last; the connection as the caller uses it in between (cursors, server-side
cursors, savepoints, its commit() refused); after a statement that failed
or an exception, rolled back, in its own mode, ready for the next; and,
interrupted while a pair's answers are on their way, the interruption itself,
on a connection either closed or ready, and the transaction committed whole
or not at all."""
from __future__ import annotations

import asyncio
import signal
import threading
import unittest
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Optional

import psycopg
from psycopg import pq

from pg_idempotency import http
from pg_idempotency.asgi import IdempotencyMiddleware
from pg_idempotency.pipelined import AsyncTransaction, Transaction

from . import support
from .support import Hold, charges, key, scalar

INSERT = "INSERT INTO py_effects VALUES ('pipelined', %s) RETURNING message_id"
COUNT = "SELECT count(*) FROM py_effects WHERE message_id = %s"
# an effect that waits as the business table's trigger does (support.Hold)
HELD = f"""INSERT INTO py_effects SELECT 'pipelined', %s
             FROM pg_advisory_xact_lock_shared({support.HOLD_LOCK})"""
CHARGE = "INSERT INTO py_charges (amount, idempotency_key) VALUES (1, %s)"
IDLE = pq.TransactionStatus.IDLE


def kept(mid: str) -> int:
    return int(scalar(COUNT, (mid,)))


def settled() -> None:
    """Waits until an abandoned transaction has ended on the server: a closed
    connection's backend goes on with the statement it has, and rolls back
    once it sees the socket closed."""
    support.wait_until("the interrupted transaction to end",
                       lambda: support.other_sessions_busy() == 0)


class OnePool:
    """A pool of one connection that keeps one given back idle, and closes
    one given back otherwise, as psycopg_pool does with one it cannot
    reset: its next use connects anew."""

    def __init__(self) -> None:
        self.conn: Optional[psycopg.AsyncConnection[Any]] = None

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self.conn is None or self.conn.closed:
            self.conn = await psycopg.AsyncConnection.connect(support.CONNINFO)
        try:
            yield self.conn
        finally:
            if self.conn.info.transaction_status != IDLE:
                await self.conn.close()


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

    def test_interrupted(self) -> None:
        # Ctrl-C while the pair waits for the hold
        mid = key("pipelined-interrupted")
        main = threading.main_thread().ident
        assert main is not None

        def interrupt() -> None:
            try:
                hold.wait_for(1)
            finally:
                signal.pthread_kill(main, signal.SIGINT)

        # a process started in the background ignores SIGINT
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            with Hold() as hold:
                sender = threading.Thread(target=interrupt)
                sender.start()
                with self.assertRaises(KeyboardInterrupt), Transaction(self.conn) as tx:
                    tx.first(HELD, (mid,))
                sender.join()
        finally:
            signal.signal(signal.SIGINT, previous)
        if not self.conn.closed:
            self.assertReady()
        settled()
        self.assertEqual(kept(mid), 0)

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

    def test_cancelled_in_first(self) -> None:
        # the middleware's claim waits for another transaction's claim of
        # its key, and the request's time-out cancels it there
        support.requires(support.BEGIN)
        k = key("async-pipelined-cancelled")
        options = http.Options()
        claim = http.begin_params(options, k, "POST /cancelled", http.fingerprint("/cancelled", "", b""))

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await scope["state"]["idempotency"].conn.execute(CHARGE, (k,))
            await send({"type": "http.response.start", "status": 201, "headers": []})
            await send({"type": "http.response.body", "body": b"charged"})

        pool = OnePool()
        middleware = IdempotencyMiddleware(app, pool=pool, options=options)

        async def post() -> tuple[int, Optional[bytes]]:
            sent: list[dict[str, Any]] = []

            async def receive() -> dict[str, Any]:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            await middleware({"type": "http", "method": "POST", "path": "/cancelled",
                              "query_string": b"", "headers": [(b"idempotency-key", k.encode())]},
                             receive, send)
            headers = {n.lower(): v for n, v in sent[0]["headers"]}
            return sent[0]["status"], headers.get(b"idempotent-replayed")

        async def test() -> None:
            async with pool.connection():
                pass
            with support.connect() as holder:
                self.assertEqual(holder.execute(http.BEGIN, claim).fetchone()[0], "execute")
                with self.assertRaises(asyncio.TimeoutError):
                    await asyncio.wait_for(post(), 0.5)
                holder.rollback()
            await asyncio.to_thread(settled)
            # nothing of the cancelled claim committed: the retry executes,
            # on the pool's next connection
            self.assertEqual(await asyncio.to_thread(
                scalar, "SELECT count(*) FROM idempotency.my_records WHERE key = %s", (k,)), 0)
            self.assertEqual(await post(), (201, None))
            self.assertEqual(await post(), (201, b"true"))
            self.assertEqual(await asyncio.to_thread(charges, k), 1)
            assert pool.conn is not None
            await pool.conn.close()

        asyncio.run(test())

    def test_cancelled_in_last(self) -> None:
        # cancelled while the last statement waits for the hold: its COMMIT
        # went with it, so the server commits both statements or neither
        mid = key("async-pipelined-cancelled-last")

        async def test() -> None:
            conn = await psycopg.AsyncConnection.connect(support.CONNINFO)
            try:
                async def pair() -> None:
                    async with AsyncTransaction(conn) as tx:
                        await tx.first(INSERT, (mid,))
                        await tx.last(HELD, (mid + "-last",))

                with Hold() as hold:
                    task = asyncio.ensure_future(pair())
                    await asyncio.to_thread(hold.wait_for, 1)
                    task.cancel()
                    with self.assertRaises(asyncio.CancelledError):
                        await task
                if not conn.closed:
                    self.assertEqual((conn.autocommit, conn.info.transaction_status), (False, IDLE))
                    await conn.execute("SELECT 1")
            finally:
                await conn.close()

        asyncio.run(test())
        settled()
        self.assertIn((kept(mid), kept(mid + "-last")), [(0, 0), (1, 1)])


if __name__ == "__main__":
    unittest.main()
