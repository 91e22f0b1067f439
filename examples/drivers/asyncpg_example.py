"""The idempotency extension from asyncpg (Debian: python3-asyncpg).

What psycopg_example.py does, with asyncpg: jsonb is text unless a codec
says otherwise (set here once per connection), and a SQLSTATE asyncpg does
not know, such as IK001, arrives as a generic PostgresError whose sqlstate
says which it is.  Connects with the PG* environment variables.
usage: python3 asyncpg_example.py KEY_PREFIX

Behind PgBouncer in transaction mode, statement_cache_size=0: asyncpg
otherwise prepares every statement, by name, on the server connection it
happens to have.
"""
import asyncio
import json
import sys
from datetime import timedelta

import asyncpg

BEGIN = """SELECT outcome, status_code, body, headers
             FROM idempotency.idempotent_begin($1, 'drivers', $2, ttl => $3)"""
FINISH = """SELECT idempotency.idempotent_finish($1, NULL, 'drivers', status_code => $2,
                                                 body => $3, headers => $4)"""


async def connect():
    conn = await asyncpg.connect(statement_cache_size=0)
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads,
                              schema="pg_catalog")
    return conn


async def main(prefix):
    first, second = await connect(), await connect()
    for i in range(8):
        key = f"{prefix}-{i}"
        request = {"amount": 100 + i}
        body = b'{"id": %d}\x00\xff' % i
        headers = {"Location": f"/things/{i}", "Content-Type": "application/json"}

        async with first.transaction():
            claim = await first.fetchrow(BEGIN, key, request, timedelta(hours=1))
            assert claim["outcome"] == "execute", claim
            await first.execute(FINISH, key, 201, body, headers)

        replay = await second.fetchrow(BEGIN, key, request, timedelta(hours=1))
        assert tuple(replay) == ("replay", 201, body, headers), replay

        try:
            await second.fetchrow(BEGIN, key, {"amount": 1}, timedelta(hours=1))
            raise AssertionError("a different request was not refused")
        except asyncpg.PostgresError as e:
            assert e.sqlstate == "IK001", e.sqlstate
    await first.close()
    await second.close()
    print("asyncpg: 8 keys executed, replayed byte for byte, reuse refused with IK001")


asyncio.run(main(sys.argv[1]))
