"""Work outside the database (claims, steps, renewal, fencing), the inbox
consumer and the outbox relay, library and program, on connections with
psycopg's defaults (behind PgBouncer in transaction mode too)."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading
import unittest
from datetime import timedelta
from typing import Any

import psycopg

from pg_idempotency import ClaimLost
from pg_idempotency.external import Claim
from pg_idempotency.inbox import consume
from pg_idempotency.relay import Backoff, Message, Relay

from . import support
from .support import connect, key, scalar, wait_until


def lease_ran_out(k: str) -> bool:
    return bool(scalar("SELECT lease_until < now() FROM idempotency.my_records WHERE key = %s", (k,)))


class ExternalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        support.requires(support.BEGIN)

    def setUp(self) -> None:
        self.conn = connect(autocommit=True)
        self.calls: list[str] = []

    def tearDown(self) -> None:
        self.conn.close()

    def call(self, name: str) -> Any:
        self.calls.append(name)
        return f"{name}-result"

    def test_steps_resume_after_take_over(self) -> None:
        k = key("steps")
        first = Claim.begin(self.conn, k, "payments", request={"amount": 5},
                            lease=timedelta(milliseconds=300))
        self.assertEqual((first.outcome, first.previous_end, first.steps), ("execute", None, {}))
        self.assertEqual(first.step("customer", lambda: self.call("customer")), "customer-result")
        self.assertEqual(first.step("charge", lambda: self.call("charge")), "charge-result")
        # the claim committed before its work: a duplicate is told to come back
        dup = Claim.begin(connect(autocommit=True), k, "payments", request={"amount": 5})
        self.assertEqual(dup.outcome, "in_progress")
        self.assertGreaterEqual(dup.retry_after or 0, 1)

        # the worker dies here; once its lease ran out another takes over
        wait_until("the lease to run out", lambda: lease_ran_out(k))
        second = Claim.begin(connect(autocommit=True), k, "payments", request={"amount": 5})
        self.assertEqual((second.outcome, second.previous_end, second.previous_attempt),
                         ("execute", "lease_expired", first.attempt))
        self.assertEqual(second.recovery_point, "charge")
        # recorded steps are not run again: their results come back
        self.assertEqual(second.step("customer", lambda: self.call("customer")), "customer-result")
        self.assertEqual(second.step("charge", lambda: self.call("charge")), "charge-result")
        self.assertEqual(second.step("receipt", lambda: self.call("receipt")), "receipt-result")
        self.assertEqual(self.calls, ["customer", "charge", "receipt"])

        # the stale worker is fenced off at every call
        with self.assertRaises(ClaimLost):
            first.step("late", lambda: self.call("late"))
        with self.assertRaises(ClaimLost):
            first.renew(timedelta(minutes=1))
        with self.assertRaises(ClaimLost):
            first.finish({"by": "first"})
        self.assertEqual(second.finish({"by": "second"}, status_code=201), "completed")
        replay = Claim.begin(self.conn, k, "payments", request={"amount": 5})
        self.assertEqual((replay.outcome, replay.response, replay.status_code),
                         ("replay", {"by": "second"}, 201))
        self.assertEqual(self.calls, ["customer", "charge", "receipt"])

    def test_renew(self) -> None:
        k = key("renew")
        claim = Claim.begin(self.conn, k, "payments", lease=timedelta(seconds=30))
        before = claim.lease_until
        assert before is not None
        after = claim.renew(timedelta(minutes=10))
        self.assertGreater(after, before + timedelta(minutes=5))
        claim.step("slow", lambda: "done", lease=timedelta(minutes=20))
        self.assertGreater(scalar("SELECT lease_until FROM idempotency.my_records WHERE key = %s", (k,)),
                           after)
        claim.abandon()
        again = Claim.begin(self.conn, k, "payments")
        self.assertEqual((again.outcome, again.previous_end, again.steps), ("execute", "abandoned", {}))
        again.finish(None, status_code=204)

    def test_round_trips(self) -> None:
        # each call is a statement in autocommit: no BEGIN, no COMMIT
        k = key("external-trips")
        with support.RoundTrips() as trips:
            for autocommit in (True, False):
                with self.subTest(autocommit=autocommit), \
                        connect(autocommit=autocommit, **trips.kwargs()) as conn:
                    trips.take()
                    claim = Claim.begin(conn, f"{k}-{autocommit}", "payments")
                    self.assertEqual(claim.outcome, "execute")
                    self.assertEqual(trips.take(), [["idempotent_begin"]])
                    self.assertEqual(claim.finish({"done": True}), "completed")
                    self.assertEqual(trips.take(), [["idempotent_finish"]])
                    self.assertEqual(conn.autocommit, autocommit)
                    # a stale worker's finish fails in one round trip too,
                    # and leaves the connection as it found it
                    stale = dataclasses.replace(claim, outcome="execute", attempt=(claim.attempt or 0) + 1)
                    with self.assertRaises(ClaimLost):
                        stale.finish({"again": True})
                    self.assertEqual(trips.take(), [["idempotent_finish"]])
                    self.assertEqual((conn.autocommit, conn.info.transaction_status),
                                     (autocommit, psycopg.pq.TransactionStatus.IDLE))

    def test_open_transaction_refused(self) -> None:
        with connect() as conn:
            conn.execute("SELECT 1")
            with self.assertRaises(RuntimeError):
                Claim.begin(conn, key("open"), "payments")


class InboxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        support.requires(support.INBOX)

    def setUp(self) -> None:
        support.setup_schema()

    @staticmethod
    def effect(mid: str) -> Any:
        def handle(conn: psycopg.Connection[Any]) -> None:
            # the handler's own statement is never prepared either: behind
            # PgBouncer in transaction mode the tests use psycopg's defaults
            conn.execute("INSERT INTO py_effects VALUES ('billing', %s)", (mid,), prepare=False)
        return handle

    @staticmethod
    def effects(mid: str) -> int:
        return int(scalar("SELECT count(*) FROM py_effects WHERE message_id = %s", (mid,)))

    def test_once(self) -> None:
        mid = key("msg-once")
        with connect() as conn:
            self.assertTrue(consume(conn, "billing", mid, self.effect(mid)))
            self.assertFalse(consume(conn, "billing", mid, self.effect(mid)))
        self.assertEqual(self.effects(mid), 1)

    def test_round_trips(self) -> None:
        # BEGIN goes with inbox_receive; the handler's statement; COMMIT
        mid = key("msg-trips")
        with support.RoundTrips() as trips, connect(**trips.kwargs()) as conn:
            trips.take()
            self.assertTrue(consume(conn, "billing", mid, self.effect(mid)))
            self.assertEqual(trips.take(), [["BEGIN", "inbox_receive"], ["INSERT"], ["COMMIT"]])
            self.assertFalse(consume(conn, "billing", mid, self.effect(mid)))
            self.assertEqual(trips.take(), [["BEGIN", "inbox_receive"], ["COMMIT"]])
            self.assertFalse(conn.autocommit)
        self.assertEqual(self.effects(mid), 1)

    def test_failure_rolls_back(self) -> None:
        mid = key("msg-fails")

        def fails(conn: psycopg.Connection[Any]) -> None:
            self.effect(mid)(conn)
            raise ValueError("the handler failed")

        with connect() as conn:
            with self.assertRaises(ValueError):
                consume(conn, "billing", mid, fails)
            # neither the effect nor the id was kept: the redelivery runs it
            self.assertEqual(self.effects(mid), 0)
            self.assertTrue(consume(conn, "billing", mid, self.effect(mid)))
        self.assertEqual(self.effects(mid), 1)

    def test_concurrent_redelivery(self) -> None:
        mid = key("msg-concurrent")
        inside, go_on = threading.Event(), threading.Event()
        results: dict[str, bool] = {}

        def slow(conn: psycopg.Connection[Any]) -> None:
            self.effect(mid)(conn)
            inside.set()
            go_on.wait(support.DEADLINE)

        def first() -> None:
            with connect() as conn:
                results["first"] = consume(conn, "billing", mid, slow)

        def second() -> None:
            with connect() as conn:
                results["second"] = consume(conn, "billing", mid, self.effect(mid))

        t1 = threading.Thread(target=first)
        t1.start()
        self.assertTrue(inside.wait(support.DEADLINE))
        t2 = threading.Thread(target=second)
        t2.start()
        # the copy waits for the first transaction on the inbox's index
        wait_until("the copy to wait for the first", lambda: int(scalar(
            """SELECT count(*) FROM pg_stat_activity WHERE usename = current_user
                AND wait_event_type = 'Lock' AND query LIKE '%%inbox_receive%%'""")) == 1)
        go_on.set()
        t1.join()
        t2.join()
        self.assertEqual(results, {"first": True, "second": False})
        self.assertEqual(self.effects(mid), 1)

    def test_many_on_default_connections(self) -> None:
        # two connections with psycopg's defaults take turns past the fifth
        # execution, when psycopg would prepare: behind PgBouncer in
        # transaction mode they share server connections
        with connect() as a, connect() as b:
            for i in range(12):
                for name, conn in (("a", a), ("b", b)):
                    mid = key(f"msg-many-{name}-{i}")
                    self.assertTrue(consume(conn, "billing", mid, self.effect(mid)))
        self.assertEqual(int(scalar("SELECT count(*) FROM py_effects WHERE message_id LIKE %s",
                                    (key("msg-many-") + "%",))), 24)


def send(topic: str, payload: dict[str, Any], ordering_key: str) -> str:
    with connect(autocommit=True) as conn:
        row = conn.execute("SELECT idempotency.outbox_send(%s, %s::jsonb, %s)",
                           (topic, json.dumps(payload), ordering_key)).fetchone()
        assert row is not None
        return str(row[0])


def delivered(ids: list[str]) -> int:
    return int(scalar("SELECT count(*) FROM idempotency.my_outbox WHERE message_id = ANY(%s) AND state = 'delivered'",
                      (ids,)))


class RelayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        support.requires(support.OUTBOX)

    def setUp(self) -> None:
        self.topic = key("topic")
        self.published: list[Message] = []

    def mine(self) -> list[Message]:
        return [m for m in self.published if m.topic == self.topic]

    def test_relays_in_order(self) -> None:
        ids = [send(self.topic, {"n": n}, f"{self.topic}-{n % 2}") for n in range(6)]
        relay = Relay(support.CONNINFO, self.published.append, batch_size=2)
        try:
            relay.run(until_empty=True)
        finally:
            relay.close()
        mine = self.mine()
        self.assertEqual(sorted(m.message_id for m in mine), sorted(ids))
        for parity in (0, 1):
            self.assertEqual([m.payload["n"] for m in mine if m.ordering_key.endswith(f"-{parity}")],
                             [n for n in range(6) if n % 2 == parity])
        self.assertEqual(delivered(ids), 6)

    def test_failed_publish_acknowledges_what_went_out(self) -> None:
        ids = [send(self.topic, {"n": n}, f"{self.topic}-f{n}") for n in range(3)]

        def flaky(m: Message) -> None:
            if m.topic == self.topic and m.payload["n"] == 1 and m.deliveries == 1:
                raise ConnectionError("the broker is down")
            self.published.append(m)

        relay = Relay(support.CONNINFO, flaky, lease=timedelta(milliseconds=300))
        try:
            with self.assertRaises(ConnectionError):
                relay.run(until_empty=True)
            self.assertEqual(delivered(ids), len(self.mine()))
            self.assertLess(len(self.mine()), 3)
            # the rest is handed out again once the lease ran out
            wait_until("the failed batch's lease to run out", lambda: bool(scalar(
                """SELECT coalesce(bool_and(lease_until < now()), true) FROM idempotency.my_outbox
                    WHERE message_id = ANY(%s) AND state <> 'delivered'""", (ids,))))
            relay.run(until_empty=True)
        finally:
            relay.close()
        self.assertEqual(sorted(m.message_id for m in self.mine()), sorted(ids))
        self.assertEqual(delivered(ids), 3)

    def test_late_relay_is_fenced(self) -> None:
        (mid,) = [send(self.topic, {"n": 0}, f"{self.topic}-late")]
        other = Relay(support.CONNINFO, self.published.append)

        def slow(m: Message) -> None:
            if m.message_id == mid and m.deliveries == 1:
                # this relay stalls past its lease; another takes the message
                wait_until("the lease to run out", lambda: bool(scalar(
                    "SELECT lease_until < now() FROM idempotency.my_outbox WHERE message_id = %s", (mid,))))
                other.run(until_empty=True)
            self.published.append(m)

        late = Relay(support.CONNINFO, slow, lease=timedelta(milliseconds=300))
        try:
            late.run(until_empty=True)   # its acknowledgement is refused (IK004) and dropped
        finally:
            late.close()
            other.close()
        copies = [m for m in self.mine() if m.message_id == mid]
        self.assertEqual([m.deliveries for m in copies], [2, 1])
        self.assertEqual(scalar("SELECT attempt FROM idempotency.my_outbox WHERE message_id = %s", (mid,)),
                         copies[0].attempt)
        self.assertEqual(delivered([mid]), 1)

    def test_backoff(self) -> None:
        sleeps: list[float] = []
        stop = threading.Event()

        def sleep(s: float) -> None:
            sleeps.append(s)
            if len(sleeps) == 5:
                stop.set()

        relay = Relay(support.CONNINFO, self.published.append, sleep=sleep,
                      idle=Backoff(least=0.1, most=0.4))
        try:
            relay.run(until_empty=True)     # drain what other tests left
            relay.run(stop)
        finally:
            relay.close()
        self.assertEqual(sleeps, [0.1, 0.2, 0.4, 0.4, 0.4])
        # an error backs off too, and the relay carries on
        logging.getLogger("pg_idempotency.relay").disabled = True
        self.addCleanup(setattr, logging.getLogger("pg_idempotency.relay"), "disabled", False)
        failing = Relay("host=/nonexistent-socket-dir", self.published.append, sleep=sleep,
                        errors=Backoff(least=1, most=2))
        stop.clear()
        sleeps.clear()
        failing.run(stop)
        self.assertEqual(sleeps, [1, 2, 2, 2, 2])

    def test_program(self) -> None:
        ids = [send(self.topic, {"n": n}, f"{self.topic}-cli") for n in range(3)]
        out = os.path.join(support.ROOT, "tests", f".published-{support.RUN}")
        env = dict(os.environ, PUBLISHED=out, PYTHONPATH=str(support.ROOT))
        try:
            done = subprocess.run([sys.executable, "-m", "pg_idempotency.relay",
                                   "--publish", "tests.publisher:publish", "--until-empty",
                                   "--conninfo", support.CONNINFO],
                                  cwd=support.ROOT, env=env, capture_output=True, text=True,
                                  timeout=support.DEADLINE)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(out) as f:
                lines = [json.loads(line) for line in f]
        finally:
            if os.path.exists(out):
                os.unlink(out)
        self.assertEqual([line["payload"]["n"] for line in lines if line["topic"] == self.topic], [0, 1, 2])
        self.assertEqual(delivered(ids), 3)
        bad = subprocess.run([sys.executable, "-m", "pg_idempotency.relay", "--publish", "nocolon"],
                             cwd=support.ROOT, env=env, capture_output=True, text=True,
                             timeout=support.DEADLINE)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("module:function", bad.stderr)


if __name__ == "__main__":
    unittest.main()
