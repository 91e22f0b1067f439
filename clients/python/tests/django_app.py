"""The Django application under test (see apps.py): settings, URLs and the
view, on Django's own connection to the test database (libpq's PG*
variables, as the other tests)."""
from __future__ import annotations

import json
import os

from django.http import HttpRequest, HttpResponse
from django.urls import path

from . import apps

SECRET_KEY = "tests"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "tests.django_app"
USE_TZ = True
MIDDLEWARE = ["pg_idempotency.django.IdempotencyMiddleware"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        # empty values leave them to libpq, which reads the PG* variables
        "NAME": os.environ.get("PGDATABASE", "postgres"),
        "USER": os.environ.get("PGUSER", ""),
        "HOST": os.environ.get("PGHOST", ""),
        "PORT": os.environ.get("PGPORT", ""),
    }
}
IDEMPOTENCY = {"max_wait": apps.MAX_WAIT}
# the view's exception is the test's, not news: no traceback on stderr
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "loggers": {"django.request": {"level": "CRITICAL"}}}
if os.environ.get("IDEMPOTENCY_TEST_REQUIRE_KEY") == "0":
    IDEMPOTENCY["require_key"] = False


def charges(request: HttpRequest, account: str = "") -> HttpResponse:
    amount = json.loads(request.body)["amount"]
    idem = getattr(request, "idempotency", None)
    if idem is None:
        return HttpResponse(b'{"passed": true}', status=200, content_type="application/json")
    with idem.conn.cursor() as cur:
        cur.execute(apps.INSERT, (amount, idem.key))
        charge = cur.fetchone()
    if amount == 13:
        raise RuntimeError("the handler failed after its insert")
    if amount == 500:
        return HttpResponse(b'{"error": "failed"}', status=500, content_type="application/json")
    response = HttpResponse(apps.body_of(charge, amount), status=201,
                            content_type="application/json")
    # Django keeps one line per header name: the first Link only
    location, link = apps.HEADERS(charge[0])[:2]
    response[location[0]] = location[1]
    response[link[0]] = link[1]
    return response


urlpatterns = [
    path("charges", charges),
    path("accounts/<str:account>/charges", charges),
]
