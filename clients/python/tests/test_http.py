"""The middleware over real HTTP, on Starlette, FastAPI and Django, each in a
server process of its own: what unreliable clients send (no key, a reused
key, concurrent duplicates, clients that give up, a worker killed mid-request)
and, afterwards, one charge per key in the database and replays identical to
the first answer, header lines in their order."""
from __future__ import annotations

import importlib
import json
import os
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

import httpx

from . import support
from .support import Hold, charges, key

# written afresh by the server for every answer, or the replay's mark
FRESH = {"date", "server", "connection", "keep-alive", "transfer-encoding", "idempotent-replayed"}


def lines(r: httpx.Response) -> list[tuple[str, str]]:
    return [(n.decode().lower(), v.decode()) for n, v in r.headers.raw
            if n.decode().lower() not in FRESH]


def same_answer(a: httpx.Response, b: httpx.Response) -> bool:
    return (a.status_code, lines(a), a.content) == (b.status_code, lines(b), b.content)


class HttpCases:
    kind = ""
    needs = ""
    server: support.Server
    # what the middleware sends per request, one list per round trip
    # (support.RoundTrips): BEGIN goes with the claim, the answer with COMMIT
    TRIPS = {
        "new key": [["BEGIN", "idempotent_begin"], ["INSERT"], ["idempotent_finish", "COMMIT"]],
        "replay": [["BEGIN", "idempotent_begin"], ["COMMIT"]],
        "another body": [["BEGIN", "idempotent_begin"], ["ROLLBACK"]],
    }

    @classmethod
    def setUpClass(cls) -> None:
        try:
            importlib.import_module(cls.needs)
        except ImportError:
            raise unittest.SkipTest(f"{cls.needs} is not installed (test/lib.sh's client_packages)")
        support.requires(support.BEGIN)
        support.setup_schema()
        cls.server = support.Server(cls.kind)
        cls.http = httpx.Client(base_url=cls.server.url, timeout=support.DEADLINE)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.http.close()
        cls.server.stop()

    def post(self, k: Optional[str], amount: int = 100, path: str = "/charges",
             client: Optional[httpx.Client] = None, **kw: Any) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        if k is not None:
            headers["Idempotency-Key"] = k
        return (client or self.http).post(path, content=json.dumps({"amount": amount}),
                                          headers=headers, **kw)

    def k(self, name: str) -> str:
        return key(f"{self.kind}-{name}")

    def assertReplay(self, replay: httpx.Response, first: httpx.Response) -> None:
        self.assertEqual(replay.headers.get("Idempotent-Replayed"), "true",
                         f"{replay.status_code} {replay.text}")
        self.assertTrue(same_answer(replay, first),
                        f"replay {replay.status_code} {lines(replay)} {replay.content!r}\n"
                        f"first  {first.status_code} {lines(first)} {first.content!r}")

    def test_execute_then_replay(self) -> None:
        k = self.k("replay")
        first = self.post(k)
        self.assertEqual(first.status_code, 201, first.text)
        self.assertNotIn("Idempotent-Replayed", first.headers)
        names = [n for n, _ in lines(first) if n in ("location", "link")]
        self.assertEqual(names, ["location", "link", "link"] if self.kind != "django"
                         else ["location", "link"])
        self.assertReplay(self.post(k), first)
        self.assertReplay(self.post(f'"{k}"'), first)   # as a Structured Field string
        self.assertEqual(charges(k), 1)

    def test_missing_key(self) -> None:
        r = self.post(None)
        self.assertEqual(r.status_code, 400)
        self.assertIn("Idempotency-Key", r.json()["error"])

    def test_refused_key(self) -> None:
        r = self.post("x" * 300)
        self.assertEqual(r.status_code, 400, r.text)

    def test_other_body(self) -> None:
        k = self.k("other-body")
        self.assertEqual(self.post(k, 100).status_code, 201)
        r = self.post(k, 101)
        self.assertEqual(r.status_code, 422, r.text)
        self.assertEqual(charges(k), 1)

    def test_scope_is_method_and_route(self) -> None:
        k = self.k("scope")
        self.assertEqual(self.post(k, path="/charges").status_code, 201)
        # another route: another scope, the key is unrelated there
        self.assertEqual(self.post(k, path="/accounts/a1/charges").status_code, 201)
        # the same route, another path: the same scope, another request
        self.assertEqual(self.post(k, path="/accounts/a2/charges").status_code, 422)
        route = "/accounts/<str:account>/charges" if self.kind == "django" else "/accounts/{account}/charges"
        self.assertEqual(support.scalar("SELECT count(*) FROM idempotency.my_records WHERE key = %s AND scope = %s",
                                        (k, f"POST {route}")), 1)
        self.assertEqual(charges(k), 2)

    def test_in_flight(self) -> None:
        k = self.k("in-flight")
        with Hold() as hold, ThreadPoolExecutor(1) as pool:
            first = pool.submit(self.post, k)
            hold.wait_for(1)
            dup = self.post(k)
            self.assertEqual(dup.status_code, 409, dup.text)
            self.assertGreaterEqual(int(dup.headers["Retry-After"]), 1)
            hold.release()
            answer = first.result()
        self.assertEqual(answer.status_code, 201)
        self.assertReplay(self.post(k), answer)
        self.assertEqual(charges(k), 1)

    def test_concurrent_duplicates(self) -> None:
        k, n = self.k("storm"), 8
        with Hold() as hold, ThreadPoolExecutor(n) as pool:
            sent = [pool.submit(self.post, k) for _ in range(n)]
            hold.wait_for(1)
            # while the first is held, every other copy is told to come back
            support.wait_until("every copy but the held one answered",
                               lambda: sum(f.done() for f in sent) == n - 1)
            early = [f.result() for f in sent if f.done()]
            hold.release()
            answers = [f.result() for f in sent]
        self.assertTrue(all(r.status_code == 409 for r in early), [r.status_code for r in early])
        executed = [r for r in answers if r.status_code == 201]
        self.assertEqual(len(executed), 1, [r.status_code for r in answers])
        self.assertEqual(sorted(r.status_code for r in answers), [201] + [409] * (n - 1))
        retries = list(ThreadPoolExecutor(n).map(lambda _: self.post(k), range(n)))
        for r in retries:
            self.assertReplay(r, executed[0])
        self.assertEqual(charges(k), 1)

    def test_client_gives_up(self) -> None:
        k = self.k("gives-up")
        with Hold() as hold, httpx.Client(base_url=self.server.url, timeout=0.5) as impatient:
            with ThreadPoolExecutor(1) as pool:
                gone = pool.submit(self.post, k, client=impatient)
                hold.wait_for(1)
                with self.assertRaises(httpx.TimeoutException):
                    gone.result()
            hold.release()
        # the answer was stored for the retry, though nobody received it
        support.wait_until("the abandoned request's answer", lambda: support.scalar(
            "SELECT status FROM idempotency.my_records WHERE key = %s", (k,)) == "completed")
        retry = self.post(k)
        self.assertEqual(retry.status_code, 201)
        self.assertEqual(retry.headers.get("Idempotent-Replayed"), "true")
        self.assertReplay(self.post(k), retry)
        self.assertEqual(charges(k), 1)

    def test_server_error_rolls_back(self) -> None:
        k = self.k("5xx")
        self.assertEqual(self.post(k, 500).status_code, 500)
        self.assertEqual(charges(k), 0)
        # not stored: the retry executes again (and fails again)
        r = self.post(k, 500)
        self.assertEqual(r.status_code, 500)
        self.assertNotIn("Idempotent-Replayed", r.headers)
        self.assertEqual(support.scalar("SELECT count(*) FROM idempotency.my_records WHERE key = %s", (k,)), 0)

    def test_handler_raises(self) -> None:
        k = self.k("raises")
        self.assertEqual(self.post(k, 13).status_code, 500)
        # its insert rolled back with the claim: the retry executes
        self.assertEqual(charges(k), 0)
        self.assertEqual(support.scalar("SELECT count(*) FROM idempotency.my_records WHERE key = %s", (k,)), 0)
        self.assertEqual(self.post(k, 13).status_code, 500)
        self.assertEqual(charges(k), 0)

    def test_cancelled_statement(self) -> None:
        k = self.k("57014")
        r = self.post(k, 57014)
        self.assertEqual((r.status_code, r.headers.get("Retry-After")), (503, "1"), r.text)
        self.assertEqual(charges(k), 0)
        self.assertEqual(self.post(k, 100).status_code, 201)

    def test_round_trips(self) -> None:
        k = self.k("trips")
        with support.RoundTrips() as trips:
            server = support.Server(self.kind, env=trips.env())
            try:
                with httpx.Client(base_url=server.url, timeout=support.DEADLINE) as c:
                    trips.take()
                    sent = {}
                    for case, amount, status in (("new key", 7, 201), ("replay", 7, 201),
                                                 ("another body", 8, 422)):
                        r = self.post(k, amount, client=c)
                        self.assertEqual(r.status_code, status, r.text)
                        sent[case] = trips.take()
            finally:
                server.stop()
        self.assertEqual(sent, self.TRIPS)
        self.assertEqual(charges(k), 1)

    def test_killed_worker(self) -> None:
        k = self.k("killed")
        doomed = support.Server(self.kind)
        try:
            with Hold() as hold, httpx.Client(base_url=doomed.url, timeout=support.DEADLINE) as c:
                with ThreadPoolExecutor(1) as pool:
                    lost = pool.submit(self.post, k, client=c)
                    hold.wait_for(1)
                    doomed.stop(kill=True)
                    with self.assertRaises(httpx.TransportError):
                        lost.result()
                # its transaction is still open on the server, held: a retry waits for nothing
                self.assertEqual(self.post(k).status_code, 409)
                hold.release()
        finally:
            doomed.stop(kill=True)
        # the dead worker's transaction rolls back once its backend sees the socket closed
        support.wait_until("the killed worker's transaction to end",
                           lambda: support.other_sessions_busy() == 0)
        retry = self.post(k)
        self.assertEqual(retry.status_code, 201, retry.text)
        self.assertNotIn("Idempotent-Replayed", retry.headers)
        self.assertEqual(charges(k), 1)


class StarletteTest(HttpCases, unittest.TestCase):
    kind, needs = "starlette", "starlette"


class FastAPITest(HttpCases, unittest.TestCase):
    kind, needs = "fastapi", "fastapi"


class DjangoTest(HttpCases, unittest.TestCase):
    kind, needs = "django", "django"
    # psycopg2 (Django up to 4.1) has no pipeline mode: each statement is a
    # round trip of its own, BEGIN and COMMIT too
    TRIPS = {
        "new key": [["BEGIN"], ["idempotent_begin"], ["INSERT"], ["idempotent_finish"], ["COMMIT"]],
        "replay": [["BEGIN"], ["idempotent_begin"], ["COMMIT"]],
        "another body": [["BEGIN"], ["idempotent_begin"], ["ROLLBACK"]],
    }


class PassThroughTest(unittest.TestCase):
    """require_key=False: a request without a key runs as if there were no
    middleware (nothing claimed); one with a key is handled as before."""

    def test_each_framework(self) -> None:
        support.requires(support.BEGIN)
        support.setup_schema()
        for kind, needs in (("starlette", "starlette"), ("fastapi", "fastapi"), ("django", "django")):
            with self.subTest(kind):
                try:
                    importlib.import_module(needs)
                except ImportError:
                    self.skipTest(f"{needs} is not installed")
                os.environ["IDEMPOTENCY_TEST_REQUIRE_KEY"] = "0"
                try:
                    server = support.Server(kind)
                finally:
                    del os.environ["IDEMPOTENCY_TEST_REQUIRE_KEY"]
                try:
                    with httpx.Client(base_url=server.url, timeout=support.DEADLINE) as c:
                        r = c.post("/charges", content=b'{"amount": 1}',
                                   headers={"Content-Type": "application/json"})
                        self.assertEqual((r.status_code, r.json()), (200, {"passed": True}))
                        k = key(f"{kind}-pass")
                        r = c.post("/charges", content=b'{"amount": 1}',
                                   headers={"Content-Type": "application/json", "Idempotency-Key": k})
                        self.assertEqual(r.status_code, 201)
                        self.assertEqual(charges(k), 1)
                finally:
                    server.stop()


if __name__ == "__main__":
    unittest.main()
