"""What the tests share: the connection (libpq's PG* variables, or
IDEMPOTENCY_TEST_CONNINFO), the edition under test (IDEMPOTENCY_EDITION: c or
portable), the business tables, and the advisory lock that makes a request
"in flight" for as long as a test wants, not for as long as it happens to take.

The role needs the extension's grant_usage and CREATE on the schema public.
"""
from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

import psycopg

CONNINFO = os.environ.get("IDEMPOTENCY_TEST_CONNINFO", "")
EDITION = os.environ.get("IDEMPOTENCY_EDITION", "c")
if EDITION not in ("c", "portable"):
    raise SystemExit(f"IDEMPOTENCY_EDITION is c or portable, not {EDITION!r}")
ROOT = Path(__file__).resolve().parent.parent
# every run's keys are new, so the tests can run again on the same database
RUN = uuid.uuid4().hex[:8]
# the advisory lock the business table's trigger waits for
HOLD_LOCK = 4243
# a bound for every wait on a condition, so that a broken server fails a
# test instead of hanging it
DEADLINE = float(os.environ.get("IDEMPOTENCY_TEST_DEADLINE", "60"))

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS py_charges (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    amount integer NOT NULL,
    idempotency_key text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS py_effects (consumer text NOT NULL, message_id text NOT NULL);
-- in flight for as long as the test holds the lock; 57014 as if cancelled
CREATE OR REPLACE FUNCTION py_charges_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared({HOLD_LOCK});
    IF NEW.amount = 57014 THEN
        RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = 'query_canceled';
    END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER py_charges_hold BEFORE INSERT ON py_charges
    FOR EACH ROW EXECUTE FUNCTION py_charges_hold();
"""


def connect(**kwargs: Any) -> psycopg.Connection[Any]:
    """A connection with psycopg's defaults (prepared statements included)."""
    return psycopg.connect(CONNINFO, **kwargs)


_schema_ready = False


def setup_schema() -> None:
    global _schema_ready
    if _schema_ready:
        return
    with connect(autocommit=True) as conn:
        # two test processes on one database create the tables once
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(4244)")
            conn.execute(SCHEMA)
    _schema_ready = True


def requires(*calls: str) -> None:
    """Skips the tests unless the edition under test has these calls: the
    portable edition is written function by function, and answers 0A000 for
    one it does not have yet.  Each runs in a transaction rolled back."""
    with connect() as conn:
        for call in calls:
            try:
                conn.execute(f"SELECT {call}")
            except psycopg.Error as e:
                if e.sqlstate == "0A000":
                    raise unittest.SkipTest(f"{call.split('(')[0]} is not in the {EDITION} edition yet")
                raise
            finally:
                conn.rollback()


BEGIN = "idempotency.idempotent_begin('probe', 'probe', external => true)"
INBOX = "idempotency.inbox_receive('probe', 'probe')"
OUTBOX = "idempotency.outbox_fetch(1)"


def key(name: str) -> str:
    return f"{RUN}-{name}"


def scalar(query: str, params: tuple[Any, ...] = ()) -> Any:
    with connect(autocommit=True) as conn:
        row = conn.execute(query, params).fetchone()
        return row[0] if row else None


def charges(k: str) -> int:
    return int(scalar("SELECT count(*) FROM py_charges WHERE idempotency_key = %s", (k,)))


def wait_until(what: str, check: Callable[[], bool]) -> None:
    """Waits for a condition of the database or a process, never for a time."""
    end = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


class Hold:
    """Holds the business table's trigger: every insert waits until release()."""

    def __init__(self) -> None:
        self.conn = connect()
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (HOLD_LOCK,))

    @staticmethod
    def waiting() -> int:
        return int(scalar("""SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
                               AND classid = 0 AND objid = %s AND objsubid = 1 AND NOT granted""",
                          (HOLD_LOCK,)))

    def wait_for(self, n: int = 1) -> None:
        wait_until(f"{n} insert(s) waiting on the held trigger", lambda: self.waiting() >= n)

    def release(self) -> None:
        if not self.conn.closed:
            self.conn.rollback()
            self.conn.close()

    def __enter__(self) -> "Hold":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One of tests/serve.py's servers, in a process of its own (so that a
    test can kill it with SIGKILL)."""

    def __init__(self, kind: str, env: Optional[dict[str, str]] = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, **(env or {}), PYTHONPATH=os.pathsep.join(
            [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.serve", kind, str(self.port)],
                                     cwd=ROOT, env=env)
        wait_until(f"the {kind} server on port {self.port}", self._listening)

    def _listening(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the server exited with {self.proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self, kill: bool = False) -> None:
        if self.proc.poll() is None:
            self.proc.kill() if kill else self.proc.terminate()
        self.proc.wait(timeout=DEADLINE)


def other_sessions_busy() -> Optional[int]:
    """How many of this role's other sessions are in a statement or a transaction."""
    return int(scalar("""SELECT count(*) FROM pg_stat_activity
                          WHERE usename = current_user AND pid <> pg_backend_pid()
                            AND backend_type = 'client backend' AND state <> 'idle'"""))


class RoundTrips:
    """A proxy in front of the database that writes down the round trips of
    the connections through it: the statements the client sent before it
    waited for their answers, a Sync or a simple query, until the server was
    ready again (its ReadyForQuery), as in the Node package's test.  Only
    what follows the connection's start-up is written down; each statement
    is named by the idempotency function it calls, else by its first word."""

    def __init__(self) -> None:
        with connect() as conn:
            host, port = conn.info.host, conn.info.port
        self.upstream: Any = (f"{host}/.s.PGSQL.{port}" if host.startswith("/")
                              else (host, port))
        self.lock = threading.Lock()
        self.trips: list[list[str]] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def kwargs(self) -> dict[str, Any]:
        """connect()'s arguments for a connection through the proxy (which
        speaks neither TLS nor GSSAPI)."""
        return {"host": "127.0.0.1", "port": self.port, "sslmode": "disable", "gssencmode": "disable"}

    def env(self) -> dict[str, str]:
        """The same, for a server process (Server(kind, env=...))."""
        # PGTZ: Django sets a connection's time zone to UTC at its start
        # (a round trip) unless the server says it is UTC already
        env = {"PGHOST": "127.0.0.1", "PGPORT": str(self.port),
               "PGSSLMODE": "disable", "PGGSSENCMODE": "disable", "PGTZ": "UTC"}
        if CONNINFO:
            env["IDEMPOTENCY_TEST_CONNINFO"] = psycopg.conninfo.make_conninfo(CONNINFO, **self.kwargs())
        return env

    def take(self) -> list[list[str]]:
        """The round trips since the last take()."""
        with self.lock:
            trips, self.trips = self.trips, []
            return trips

    def close(self) -> None:
        self.listener.close()

    def __enter__(self) -> "RoundTrips":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX if isinstance(self.upstream, str) else socket.AF_INET)
            server.connect(self.upstream)
            # the start-up is answered with a ReadyForQuery too
            state: dict[str, Any] = {"waiting": 1, "trip": [], "open": 2}
            threading.Thread(target=self._from_client, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._from_server, args=(server, client, state), daemon=True).start()

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _from_client(self, client: socket.socket, server: socket.socket, state: dict[str, Any]) -> None:
        try:
            while True:   # the start-up message, without a type byte
                head = self._read(client, 8)
                (n, code) = struct.unpack("!ii", head)
                server.sendall(head + self._read(client, n - 8))
                if code == 196608:
                    break
            while True:
                kind = self._read(client, 1)
                head = self._read(client, 4)
                body = self._read(client, struct.unpack("!i", head)[0] - 4)
                if kind != b"X":
                    with self.lock:
                        if state["trip"] is None:
                            state["trip"] = []
                            self.trips.append(state["trip"])
                        if kind in (b"P", b"Q"):
                            text = body.split(b"\0")[1 if kind == b"P" else 0].decode()
                            called = re.search(r"idempotency\.(\w+)", text)
                            state["trip"].append(called.group(1) if called else text.split()[0].upper())
                        if kind in (b"S", b"Q"):
                            state["waiting"] += 1
                # written down before it is sent: its answer cannot come first
                server.sendall(kind + head + body)
        except (EOFError, OSError):
            pass
        finally:
            self._end(client, server, state)

    def _from_server(self, server: socket.socket, client: socket.socket, state: dict[str, Any]) -> None:
        try:
            while True:
                kind = self._read(server, 1)
                head = self._read(server, 4)
                body = self._read(server, struct.unpack("!i", head)[0] - 4)
                if kind == b"Z":
                    with self.lock:
                        state["waiting"] -= 1
                        if state["waiting"] == 0:
                            state["trip"] = None
                client.sendall(kind + head + body)
        except (EOFError, OSError):
            pass
        finally:
            self._end(client, server, state)

    def _end(self, client: socket.socket, server: socket.socket, state: dict[str, Any]) -> None:
        """Either side's end ends both; the second thread to see it closes them."""
        for sock in (client, server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self.lock:
            state["open"] -= 1
            if state["open"] == 0:
                client.close()
                server.close()
