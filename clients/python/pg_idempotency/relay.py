"""The outbox relay: fetch a batch (its lease committed), publish each message
through a callable, acknowledge what was published with the batch's attempt.

As a library:
    Relay("dbname=app", publish).run()          # publish(message) -> None
As a program:
    python3 -m pg_idempotency.relay --publish mymodule:publish

A relay that dies between publishing and acknowledging publishes those
messages again after their lease: consumers turn the copies away with
inbox_receive (pg_idempotency.inbox.consume).
"""
from __future__ import annotations

import argparse
import importlib
import logging
import re
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Optional

import psycopg

from .errors import sqlstate

log = logging.getLogger("pg_idempotency.relay")

FETCH = """SELECT message_id, topic, ordering_key, payload, headers, sent_at, attempt, deliveries
             FROM idempotency.outbox_fetch(%s, %s)"""
ACK = "SELECT idempotency.outbox_ack(%s, %s, %s)"


@dataclass
class Message:
    message_id: str
    topic: str
    ordering_key: Optional[str]
    payload: Any
    headers: Any
    sent_at: datetime
    attempt: int
    deliveries: int


@dataclass
class Backoff:
    """Seconds to sleep after an empty fetch or an error, doubling up to most."""

    least: float = 0.05
    most: float = 5.0
    current: float = 0.0

    def next(self) -> float:
        self.current = min(self.most, self.current * 2 if self.current else self.least)
        return self.current

    def reset(self) -> None:
        self.current = 0.0


class Relay:
    def __init__(self, conninfo: str, publish: Callable[[Message], None], *,
                 batch_size: int = 100, lease: timedelta = timedelta(seconds=30),
                 ack_ttl: timedelta = timedelta(days=7), idle: Optional[Backoff] = None,
                 errors: Optional[Backoff] = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.conninfo = conninfo
        self.publish = publish
        self.batch_size = batch_size
        self.lease = lease
        self.ack_ttl = ack_ttl
        self.idle = idle or Backoff()
        self.errors = errors or Backoff(least=0.5, most=30.0)
        self.sleep = sleep
        self.conn: Optional[psycopg.Connection[Any]] = None

    def _connection(self) -> psycopg.Connection[Any]:
        if self.conn is None or self.conn.closed:
            self.conn = psycopg.connect(self.conninfo, autocommit=True)
        return self.conn

    def run_once(self) -> int:
        """One batch: how many messages were published and acknowledged.  A
        publish that fails ends the batch: what was published before it is
        acknowledged, the rest is handed out again once the lease runs out."""
        conn = self._connection()
        # autocommit: the fetch commits at once, so the lease holds if we die;
        # never prepared, for PgBouncer in transaction mode
        rows = conn.execute(FETCH, (self.batch_size, self.lease), prepare=False).fetchall()
        batch = [Message(*row) for row in rows]
        published: list[str] = []
        try:
            for message in batch:
                self.publish(message)
                published.append(message.message_id)
        finally:
            if published:
                self._ack(conn, batch[0].attempt, published)
        return len(published)

    def _ack(self, conn: psycopg.Connection[Any], attempt: int, ids: list[str]) -> None:
        while ids:
            try:
                conn.execute(ACK, (attempt, ids, self.ack_ttl), prepare=False)
                return
            except psycopg.Error as e:
                if sqlstate(e) != "IK004":
                    raise
                # another relay took that message after our lease ran out: it
                # publishes and acknowledges it; acknowledge the rest without it
                taken = re.search(r'does not hold message "(.*)"', e.diag.message_primary or "")
                if not taken or taken.group(1) not in ids:
                    raise
                ids.remove(taken.group(1))

    def run(self, stop: Optional[threading.Event] = None, *, until_empty: bool = False) -> int:
        """Relays until stop is set (or, with until_empty, until a fetch finds
        nothing): how many messages were relayed.  Sleeps with backoff while
        the outbox is empty and after errors, reconnecting after one."""
        total = 0
        while stop is None or not stop.is_set():
            try:
                n = self.run_once()
                self.errors.reset()
            except Exception:
                if until_empty:
                    raise
                log.exception("relay batch failed")
                if self.conn is not None and self.conn.broken:
                    self.conn = None
                self.sleep(self.errors.next())
                continue
            total += n
            if n:
                self.idle.reset()
            elif until_empty:
                return total
            else:
                self.sleep(self.idle.next())
        return total

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def _callable(spec: str) -> Callable[[Message], None]:
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise argparse.ArgumentTypeError(f"expected module:function, not {spec!r}")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise argparse.ArgumentTypeError(f"{spec} is not callable")
    return target  # type: ignore[no-any-return]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m pg_idempotency.relay",
                                     description="Publish the outbox's messages through a function.")
    parser.add_argument("--publish", required=True, type=_callable, metavar="MODULE:FUNCTION",
                        help="called with each message (a pg_idempotency.relay.Message)")
    parser.add_argument("--conninfo", default="",
                        help="libpq connection string; the PG* variables by default")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--lease", type=float, default=30.0, help="seconds a batch is held")
    parser.add_argument("--idle-max", type=float, default=5.0,
                        help="longest sleep, in seconds, while the outbox is empty")
    parser.add_argument("--until-empty", action="store_true",
                        help="exit once a fetch finds nothing (for cron and tests)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    relay = Relay(args.conninfo, args.publish, batch_size=args.batch_size,
                  lease=timedelta(seconds=args.lease), idle=Backoff(most=args.idle_max))
    try:
        total = relay.run(until_empty=args.until_empty)
    except KeyboardInterrupt:
        return 130
    finally:
        relay.close()
    print(f"relayed {total} messages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
