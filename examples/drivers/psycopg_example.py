"""The idempotency extension from psycopg 3 (Debian: python3-psycopg).

Claims a key, stores an HTTP answer (status code, body bytes, headers) in
the claim's transaction, replays it on a second connection, and reuses the
key for another request (IK001, read from e.sqlstate: psycopg raises a
generic class for SQLSTATEs it does not know).  Connects with the PG*
environment variables.  usage: python3 psycopg_example.py KEY_PREFIX

Behind PgBouncer in transaction mode, prepare_threshold=None: psycopg
otherwise prepares a statement on the server after its fifth execution,
and the next transaction may run on another server connection.
"""
import sys
from datetime import timedelta

import psycopg
from psycopg.types.json import Jsonb

BEGIN = """SELECT outcome, status_code, body, headers
             FROM idempotency.idempotent_begin(%s, 'drivers', %s, ttl => %s)"""
FINISH = """SELECT idempotency.idempotent_finish(%s, NULL, 'drivers', status_code => %s,
                                                 body => %s, headers => %s)"""

prefix = sys.argv[1]
first = psycopg.connect(prepare_threshold=None)
second = psycopg.connect(prepare_threshold=None, autocommit=True)
for i in range(8):
    key = f"{prefix}-{i}"
    request = Jsonb({"amount": 100 + i})
    body = b'{"id": %d}\x00\xff' % i
    headers = {"Location": f"/things/{i}", "Content-Type": "application/json"}

    with first.transaction():
        outcome = first.execute(BEGIN, (key, request, timedelta(hours=1))).fetchone()[0]
        assert outcome == "execute", outcome
        first.execute(FINISH, (key, 201, body, Jsonb(headers)))

    replay = second.execute(BEGIN, (key, request, timedelta(hours=1))).fetchone()
    assert replay == ("replay", 201, body, headers), replay

    try:
        second.execute(BEGIN, (key, Jsonb({"amount": 1}), timedelta(hours=1)))
        raise AssertionError("a different request was not refused")
    except psycopg.Error as e:
        assert e.sqlstate == "IK001", e.sqlstate
print("psycopg: 8 keys executed, replayed byte for byte, reuse refused with IK001")
