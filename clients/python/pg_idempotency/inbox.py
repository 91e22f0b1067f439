"""The consumer's half: a message's effects and its id in one transaction.

    processed = consume(conn, "billing", message.id, lambda conn: apply(conn, message))

handle runs only for an id the consumer has not seen, in the transaction
that records the id: if it raises, both roll back and the redelivery runs it
again; once it committed, a redelivery is turned away.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable

import psycopg


def consume(conn: psycopg.Connection[Any], consumer: str, message_id: str,
            handle: Callable[[psycopg.Connection[Any]], Any],
            ttl: timedelta = timedelta(days=7)) -> bool:
    """True if the message was new and handle ran (and committed), False for a redelivery."""
    with conn.transaction():
        # never prepared, for PgBouncer in transaction mode (see asgi.py)
        row = conn.execute("SELECT idempotency.inbox_receive(%s, %s, %s)",
                           (consumer, message_id, ttl), prepare=False).fetchone()
        if not row or not row[0]:
            return False
        handle(conn)
    return True
