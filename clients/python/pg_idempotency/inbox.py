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

from .pipelined import Transaction


def consume(conn: psycopg.Connection[Any], consumer: str, message_id: str,
            handle: Callable[[psycopg.Connection[Any]], Any],
            ttl: timedelta = timedelta(days=7)) -> bool:
    """True if the message was new and handle ran (and committed), False for a redelivery."""
    # BEGIN goes with inbox_receive (pipelined.py)
    with Transaction(conn) as tx:
        row = tx.first("SELECT idempotency.inbox_receive(%s, %s, %s)", (consumer, message_id, ttl))
        if not row or not row[0]:
            return False
        handle(conn)
    return True
