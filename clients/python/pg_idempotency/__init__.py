"""Python client of the idempotency PostgreSQL extension (psycopg 3).

pg_idempotency.asgi     Idempotency-Key middleware for Starlette and FastAPI
pg_idempotency.django   Idempotency-Key middleware for Django
pg_idempotency.external work outside the database: claims, steps, renewal, fencing
pg_idempotency.inbox    consume(): a message's effects once
pg_idempotency.relay    the outbox relay, a library and a program

The framework adapters import their framework; the rest needs psycopg only.
"""
from .errors import ClaimLost, sqlstate
from .http import Answer, Options

__all__ = ["Answer", "ClaimLost", "Options", "sqlstate"]
