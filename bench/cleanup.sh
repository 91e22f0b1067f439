#!/usr/bin/env bash
#
# bench/cleanup.sh: the background cleanup against the hand-written
# DELETE ... WHERE expires_at < now(), side by side in one run.
#
# With 2M expired and 2M live records in the registry:
#   A. the execute path's TPS (bench/registry_setup.sql's bench_ext) with no
#      cleanup running: the baseline;
#   B. the same while the background worker deletes the 2M expired records
#      in batches: the worker's rows per second, and the TPS ratio B / A;
#   C. the 2M expired records made again, and the same pgbench while one
#      hand-written DELETE removes them: how long that one transaction holds
#      its row locks (and holds back vacuum), and the TPS ratio C / A.
# Run as root on Debian 12:
#   bash bench/cleanup.sh [SECONDS-PER-RUN] [CLIENTS] [ROWS]
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-30}
clients=${2:-2}
rows=${3:-2000000}

bench_prepare "synchronous_commit = off" "shared_buffers = 1GB" "max_wal_size = 8GB" \
	"idempotency.cleanup_interval = 0" "idempotency.cleanup_batch_size = 10000"

psql_cluster -f "$top/bench/registry_setup.sql" >/dev/null

# make_expired: $rows expired records (as if many clients' keys had aged out)
make_expired() {
	psql_cluster -c "INSERT INTO idempotency.registry (owner, scope, key, status, attempt, fingerprint, response,
			created_at, updated_at, lease_until, expires_at)
		SELECT 'bench', '', ('expired-' || i)::idempotency.key, 'completed', 1, NULL, '{\"ok\": true}',
			   now() - interval '2 days', now() - interval '2 days', NULL, now() - interval '1 day'
		  FROM generate_series(1, $rows) AS i;" >/dev/null
}
echo "==> loading $rows expired and $rows live records"
make_expired
psql_cluster -c "INSERT INTO idempotency.registry (owner, scope, key, status, attempt, fingerprint, response,
			created_at, updated_at, lease_until, expires_at)
	SELECT 'bench', '', ('live-' || i)::idempotency.key, 'completed', 1, NULL, '{\"ok\": true}',
		   now(), now(), NULL, now() + interval '1 day'
	  FROM generate_series(1, $rows) AS i;" >/dev/null
psql_cluster -c "VACUUM ANALYZE idempotency.registry" -c "CHECKPOINT" >/dev/null

script=$(mktemp /tmp/idempotency-bench.XXXXXX.sql)
printf '\\set id random(1, 1000000000000)\nSELECT bench_ext(:client_id || %s || :id, 1);\n' "'-'" >"$script"
chmod 644 "$script"
tps() {
	as_postgres pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
		-h "$cluster" -p "$port" -f "$script" postgres 2>/dev/null |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}
expired_left() {
	psql_cluster -Atc "SELECT count(*) FROM idempotency.registry WHERE expires_at <= now() AND key::text LIKE 'expired-%'"
}
now_s() { date +%s.%N; }

echo "==> A. execute path, no cleanup"
tps_a=$(tps)

echo "==> B. execute path while the background worker cleans"
psql_cluster -c "ALTER SYSTEM SET idempotency.cleanup_interval = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
t0=$(now_s)
tps_b=$(tps)
until [ "$(expired_left)" = 0 ]; do sleep 0.5; done
t1=$(now_s)
psql_cluster -c "ALTER SYSTEM SET idempotency.cleanup_interval = 0" -c "SELECT pg_reload_conf()" >/dev/null
worker_rate=$(awk -v n="$rows" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
psql_cluster -c "VACUUM ANALYZE idempotency.registry" -c "CHECKPOINT" >/dev/null

echo "==> C. execute path while one hand-written DELETE runs"
make_expired
psql_cluster -c "VACUUM ANALYZE idempotency.registry" -c "CHECKPOINT" >/dev/null
( t2=$(now_s)
  psql_cluster -c "DELETE FROM idempotency.registry WHERE expires_at < now()" >/dev/null
  t3=$(now_s)
  awk -v a="$t2" -v b="$t3" 'BEGIN { printf "%.1f", b - a }' >"$script.delete" ) &
deleter=$!
tps_c=$(tps)
wait $deleter
delete_s=$(cat "$script.delete")
rm -f "$script" "$script.delete"

echo
echo "==> results ($rows expired + $rows live records, $clients clients, $seconds s per run)"
printf '   A. execute path alone:                     %8.0f tps\n' "$tps_a"
printf '   B. while the worker cleans:                %8.0f tps   (%sx of A)\n' "$tps_b" "$(ratio "$tps_b" "$tps_a")"
printf '      the worker deleted %s rows/s, in transactions of 10000 rows\n' "$worker_rate"
printf '   C. while one DELETE ... WHERE expires_at < now() runs:\n'
printf '                                              %8.0f tps   (%sx of A)\n' "$tps_c" "$(ratio "$tps_c" "$tps_a")"
printf '      that DELETE held its locks, in one transaction, for %s s\n' "$delete_s"
