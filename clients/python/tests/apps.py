"""The applications under test: one endpoint, POST /charges (and the same
under /accounts/{account}/charges, for the scope), on Starlette, FastAPI and
Django.  The answer carries a Location and two Link lines (in that order) and
a body with the charge's id and time, so that a second execution could not
pass for a replay.  An amount of 500 inserts and then answers 500; one of 13
inserts and then raises."""

import json
import os
from datetime import timedelta
from typing import Any

from pg_idempotency.http import Options

from . import support

HEADERS = lambda charge_id: [  # noqa: E731
    ("Location", f"/charges/{charge_id}"),
    ("Link", f'</charges/{charge_id}/refunds>; rel="refunds"'),
    ("Link", f'</charges/{charge_id}/receipt>; rel="receipt"'),
]
INSERT = """INSERT INTO py_charges (amount, idempotency_key) VALUES (%s, %s)
            RETURNING id, created_at::text"""


# a duplicate of a held request waits this long, then answers 409
MAX_WAIT = timedelta(seconds=1)


def options() -> Options:
    # the default is what the tests check, unless a test asks for the other
    if os.environ.get("IDEMPOTENCY_TEST_REQUIRE_KEY") == "0":
        return Options(require_key=False, max_wait=MAX_WAIT)
    return Options(max_wait=MAX_WAIT)


def body_of(charge: tuple[Any, ...], amount: int) -> bytes:
    return json.dumps({"id": charge[0], "amount": amount, "created_at": charge[1]}).encode()


def starlette_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from pg_idempotency.asgi import IdempotencyMiddleware

    async def charges(request: Request) -> Response:
        amount = (await request.json())["amount"]
        idem = getattr(request.state, "idempotency", None)
        if idem is None:  # passed through without a key
            return Response(b'{"passed": true}', 200, media_type="application/json")
        cur = await idem.conn.execute(INSERT, (amount, idem.key))
        charge = await cur.fetchone()
        if amount == 13:
            raise RuntimeError("the handler failed after its insert")
        if amount == 500:
            return Response(b'{"error": "failed"}', 500, media_type="application/json")
        response = Response(body_of(charge, amount), 201, media_type="application/json")
        response.raw_headers += [(n.encode(), v.encode()) for n, v in HEADERS(charge[0])]
        return response

    app = Starlette(routes=[Route("/charges", charges, methods=["POST"]),
                            Route("/accounts/{account}/charges", charges, methods=["POST"])])
    app.add_middleware(IdempotencyMiddleware, conninfo=support.CONNINFO, options=options())
    return app


def fastapi_app() -> Any:
    from fastapi import FastAPI, Request
    from fastapi.responses import Response
    from pydantic import BaseModel

    from pg_idempotency.asgi import IdempotencyMiddleware

    class Charge(BaseModel):
        amount: int

    app = FastAPI()

    async def create(request: Request, charge_in: Charge) -> Response:
        idem = getattr(request.state, "idempotency", None)
        if idem is None:
            return Response(b'{"passed": true}', 200, media_type="application/json")
        cur = await idem.conn.execute(INSERT, (charge_in.amount, idem.key))
        charge = await cur.fetchone()
        if charge_in.amount == 13:
            raise RuntimeError("the handler failed after its insert")
        if charge_in.amount == 500:
            return Response(b'{"error": "failed"}', 500, media_type="application/json")
        response = Response(body_of(charge, charge_in.amount), 201, media_type="application/json")
        response.raw_headers += [(n.encode(), v.encode()) for n, v in HEADERS(charge[0])]
        return response

    @app.post("/charges")
    async def charges(request: Request, charge_in: Charge) -> Response:
        return await create(request, charge_in)

    @app.post("/accounts/{account}/charges")
    async def account_charges(account: str, request: Request, charge_in: Charge) -> Response:
        return await create(request, charge_in)

    app.add_middleware(IdempotencyMiddleware, conninfo=support.CONNINFO, options=options())
    return app
