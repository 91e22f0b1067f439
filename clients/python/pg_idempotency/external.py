"""Work outside the database (a payment provider, an e-mail): a claim that
commits before its work, steps with recovery points, lease renewal, and a
finish fenced by the claim's attempt.

    claim = Claim.begin(conn, key, "payments", request={"amount": 100})
    if claim.outcome == "execute":
        customer = claim.step("customer", lambda: provider.customer(...))
        charge = claim.step("charge", lambda: provider.charge(customer, ...))
        claim.finish({"charge": charge})

Each statement is a transaction of its own: conn is in autocommit, or has no
transaction open.  A step that was recorded is not run again: a worker that
takes the claim over after its lease ran out gets the recorded results back
and goes on after the last one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Optional, TypeVar

import psycopg
from psycopg import pq

from .errors import ClaimLost, sqlstate

T = TypeVar("T")

BEGIN = """SELECT outcome, attempt, response::text, status_code, body, headers::text,
                  previous_attempt, previous_end, retry_after, recovery_point,
                  recovery_state::text, lease_until
             FROM idempotency.idempotent_begin(%s, %s, %s::jsonb, ttl => %s,
                                               lease => %s, external => true)"""


@dataclass
class Claim:
    conn: psycopg.Connection[Any]
    key: str
    scope: str
    outcome: str
    attempt: Optional[int]
    response: Any = None
    status_code: Optional[int] = None
    body: Optional[bytes] = None
    headers: Any = None
    previous_attempt: Optional[int] = None
    previous_end: Optional[str] = None
    retry_after: Optional[int] = None
    recovery_point: Optional[str] = None
    lease_until: Optional[datetime] = None
    # the results of the steps recorded so far, by name
    steps: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def begin(cls, conn: psycopg.Connection[Any], key: str, scope: str = "", *,
              request: Any = None, ttl: timedelta = timedelta(hours=24),
              lease: Optional[timedelta] = None) -> "Claim":
        """Claims key for work outside the database, or reads its answer.
        outcome: execute (do the work: a first claim, or a take-over that
        resumes after its recorded steps), replay or in_progress."""
        row = _one(conn, BEGIN, (key, scope, _json(request), ttl, lease))
        (outcome, attempt, response, status_code, body, headers, previous_attempt,
         previous_end, retry_after, point, state, lease_until) = row
        recorded = json.loads(state) if state else {}
        return cls(conn, key, scope, outcome, attempt,
                   json.loads(response) if response else None, status_code,
                   bytes(body) if body is not None else None,
                   json.loads(headers) if headers else None, previous_attempt,
                   previous_end, retry_after, point, lease_until,
                   dict(recorded.get("steps", {})))

    def step_key(self, name: str) -> str:
        """An idempotency key for the provider's call of a step: the same on
        every attempt, so a call repeated after a crash is answered with what
        the first one made."""
        return f"{self.key}/{name}"

    def step(self, name: str, fn: Callable[[], T], *, lease: Optional[timedelta] = None) -> T:
        """fn's result, recorded as recovery point name; a step recorded by an
        earlier attempt is not run again, its result is returned.  fn's result
        must be JSON.  lease: renew the lease first, for a long call."""
        if name in self.steps:
            return self.steps[name]  # type: ignore[no-any-return]
        self._live()
        if lease is not None:
            self.renew(lease)
        else:
            self._still_mine()
        result = fn()
        steps = {**self.steps, name: result}
        _one(self.conn, """SELECT idempotency.idempotent_checkpoint(%s, %s, %s::jsonb, %s,
                                                                     attempt => %s)""",
             (self.key, name, json.dumps({"steps": steps}), self.scope, self.attempt))
        self.steps = steps
        self.recovery_point = name
        return result

    def renew(self, lease: timedelta) -> datetime:
        """Extends the lease from now; ClaimLost if the claim was taken over."""
        self._live()
        (self.lease_until,) = _one(self.conn, """
            SELECT idempotency.idempotent_renew(%s, %s, %s, attempt => %s)""",
            (self.key, lease, self.scope, self.attempt))
        assert self.lease_until is not None
        return self.lease_until

    def finish(self, response: Any = None, *, status_code: Optional[int] = None,
               body: Optional[bytes] = None, headers: Any = None, failed: bool = False,
               ttl: Optional[timedelta] = None) -> str:
        """Stores the answer, fenced by the attempt: ClaimLost if another
        worker took the claim over."""
        self._live()
        (status,) = _one(self.conn, """
            SELECT idempotency.idempotent_finish(%s, %s::jsonb, %s, attempt => %s, failed => %s,
                       status_code => %s, body => %s, ttl => %s, headers => %s::jsonb)""",
            (self.key, _json(response), self.scope, self.attempt, failed, status_code, body,
             ttl, _json(headers)))
        self.outcome = "finished"
        return str(status)

    def abandon(self) -> None:
        """Gives the claim up after a retryable failure: the next begin executes."""
        self._live()
        _one(self.conn, "SELECT idempotency.idempotent_abandon(%s, %s, attempt => %s)",
             (self.key, self.scope, self.attempt))
        self.outcome = "abandoned"

    def _still_mine(self) -> None:
        """A worker whose claim was taken over stops before it calls out
        again; the checkpoint after the call is the fence that counts."""
        (attempt,) = _one(self.conn, """
            SELECT coalesce((SELECT attempt FROM idempotency.my_records
                              WHERE key = %s AND scope = %s AND status = 'processing'), 0)""",
            (self.key, self.scope))
        if attempt != self.attempt:
            raise ClaimLost(f"the claim of idempotency key \"{self.key}\" was taken over")

    def _live(self) -> None:
        if self.outcome != "execute":
            raise RuntimeError(f"the claim's outcome is {self.outcome}, not execute")


def _json(value: Any) -> Optional[str]:
    return None if value is None else json.dumps(value)


def _one(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
    if not conn.autocommit and conn.info.transaction_status != pq.TransactionStatus.IDLE:
        raise RuntimeError("external work commits each statement: the connection has a transaction open")
    # in autocommit the statement is its own transaction, in one round trip
    # where conn.transaction() took three (BEGIN, the statement, COMMIT)
    autocommit = conn.autocommit
    if not autocommit:
        conn.autocommit = True
    try:
        # never prepared: behind PgBouncer in transaction mode the next
        # transaction may run on a server connection without it
        row = conn.execute(query, params, prepare=False).fetchone()
    except psycopg.Error as e:
        if sqlstate(e) in ("IK002", "IK004"):
            raise ClaimLost(str(e)) from e
        raise
    finally:
        if not autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE:
            conn.autocommit = False
    assert row is not None
    return tuple(row)
