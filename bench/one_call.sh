#!/usr/bin/env bash
#
# bench/one_call.sh: a client that sends each statement itself (a driver,
# not a server-side function), against the Redis pattern that idempotency
# middleware uses: Redis SET NX, the PostgreSQL write, Redis SET.  Compares
# that with the extension's begin, write and finish as three statements and
# with idempotent_call, one statement that runs the write in a handler
# (bench/one_call.py says how each is driven).  Same machine, the servers on
# Unix sockets, Redis without persistence (as such middleware is usually
# run), PostgreSQL with synchronous_commit as given (default on: durable,
# while Redis is not).  Run as root on Debian 12:
#   bash bench/one_call.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS] [SYNCHRONOUS_COMMIT]
# Defaults: 5 s, 2 clients, 3 rounds, on: about two minutes.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-5}
clients=${2:-2}
rounds=${3:-3}
sync=${4:-on}

install_packages redis-server python3-psycopg python3-redis
bench_prepare "synchronous_commit = $sync" "shared_buffers = 512MB" "max_wal_size = 4GB" \
	"autovacuum = off" "idempotency.cleanup_interval = 0"

# Redis beside the cluster, on a socket in its directory, stopped on exit
as_postgres redis-server --port 0 --unixsocket "$cluster/redis.sock" --save '' \
	--appendonly no --daemonize yes --pidfile "$cluster/redis.pid" >/dev/null
cluster_trap=$(trap -p EXIT | sed "s/^trap -- '//; s/' EXIT\$//")
# shellcheck disable=SC2064
trap "kill \$(cat '$cluster/redis.pid' 2>/dev/null) 2>/dev/null || true; $cluster_trap" EXIT
for _ in $(seq 50); do
	[ -S "$cluster/redis.sock" ] && break
	sleep 0.1
done

psql_cluster <"$top/bench/one_call_setup.sql" >/dev/null
# the server's user may not be able to read a clone in root's home
cp "$top/bench/one_call.py" "$cluster/one_call.py"
chown postgres:postgres "$cluster/one_call.py"
echo "==> $clients clients, $seconds s per run, $rounds rounds, synchronous_commit = $sync"
as_postgres python3 "$cluster/one_call.py" "host=$cluster port=$port dbname=postgres" \
	"$cluster/redis.sock" "$seconds" "$clients" "$rounds"
