#!/usr/bin/env python3
"""bench/one_call.py: a client that sends each statement itself, three ways.

  redis  what Redis-backed middleware does: SET key NX (claim), the business
         INSERT in PostgreSQL (autocommit), SET key to the answer; a retry
         that finds the key reads its answer with GET
  three  the extension with begin, the INSERT and finish as statements of
         one transaction (BEGIN and COMMIT are round trips of their own)
  call   the extension with idempotent_call: one statement, the INSERT in a
         handler function

Each of CLIENTS processes sends requests one after another for SECONDS, a
new key every time ("execute"), then the keys it used again ("replay");
the patterns take turns, ROUNDS times over, in reverse order every other
round. Printed: requests per second per pattern and path (the median of the
rounds and each round), and the ratios to the Redis pattern. Run by
bench/one_call.sh, which starts the servers.
"""
import json
import multiprocessing
import sys
import time

import psycopg
import redis

DSN, REDIS_SOCKET = sys.argv[1], sys.argv[2]
SECONDS, CLIENTS, ROUNDS = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
PATTERNS = ["redis", "three", "call"]


def request(pattern, conn, red, key):
    body = {"key": key, "amount": 1}
    if pattern == "redis":
        if red.set(key, "processing", nx=True, ex=86400):
            conn.execute("INSERT INTO charges_redis VALUES (%s, %s)", (key, 1))
            answer = json.dumps({"charged": 1})
            red.set(key, answer, ex=86400)
            return answer
        return red.get(key)
    if pattern == "three":
        with conn.transaction():
            outcome, response = conn.execute(
                "SELECT outcome, response FROM idempotency.idempotent_begin(%s, request => %s)",
                (key, json.dumps(body))).fetchone()
            if outcome != "execute":
                return response
            conn.execute("INSERT INTO charges_three VALUES (%s, %s)", (key, 1))
            answer = {"charged": 1}
            conn.execute("SELECT idempotency.idempotent_finish(%s, %s)", (key, json.dumps(answer)))
            return answer
    outcome, response = conn.execute(
        "SELECT outcome, response FROM idempotency.idempotent_call(%s, 'bench_pay(jsonb)', %s)",
        (key, json.dumps(body))).fetchone()
    return response


def client(args):
    pattern, path, run, worker, limit = args
    conn = psycopg.connect(DSN, autocommit=True)
    red = redis.Redis(unix_socket_path=REDIS_SOCKET)
    done = 0
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        # the replay path asks again for the keys the execute path used
        key = "%s-%d-%d-%d" % (pattern, run, worker, done % limit if limit else done)
        answer = request(pattern, conn, red, key)
        if answer is None:
            raise SystemExit("%s %s: no answer for %s" % (pattern, path, key))
        done += 1
    conn.close()
    return done


def median(values):
    values = sorted(values)
    return values[(len(values) - 1) // 2]


def main():
    rates = {(p, path): [] for p in PATTERNS for path in ("execute", "replay")}
    with multiprocessing.Pool(CLIENTS) as pool:
        for rnd in range(ROUNDS):
            order = PATTERNS if rnd % 2 == 0 else list(reversed(PATTERNS))
            for pattern in order:
                # the replay run asks again, in a cycle, for the keys each
                # worker of the execute run used
                n = pool.map(client, [(pattern, "execute", rnd, w, 0) for w in range(CLIENTS)])
                rates[(pattern, "execute")].append(sum(n) / SECONDS)
                n = pool.map(client, [(pattern, "replay", rnd, w, n[w]) for w in range(CLIENTS)])
                rates[(pattern, "replay")].append(sum(n) / SECONDS)
    print("   %-8s %-8s %12s   %s" % ("pattern", "path", "median rps", "rounds"))
    for (pattern, path), r in rates.items():
        print("   %-8s %-8s %12.0f  %s" % (pattern, path, median(r), " ".join("%.0f" % x for x in r)))
    print()
    print("==> ratios of the medians to the Redis pattern (higher is better)")
    for path in ("execute", "replay"):
        base = median(rates[("redis", path)])
        for pattern in ("three", "call"):
            each = " ".join("%.2f" % (a / b) for a, b in zip(rates[(pattern, path)], rates[("redis", path)]))
            print("   %-40s %5.2fx  (rounds: %s)" % ("%s %s / redis" % (pattern, path),
                                                   median(rates[(pattern, path)]) / base, each))


if __name__ == "__main__":
    main()
