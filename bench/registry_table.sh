#!/usr/bin/env bash
#
# bench/registry_table.sh: what each part of the registry's table design
# costs, measured on the simplest handler (read, business write, one INSERT
# of the finished row; bench/registry_table_setup.sql), by hand, on tables
# that differ from the narrowest one in one respect each, and on the
# registry itself.  bench/registry.sh measures the extension against
# hand-written handlers; this one says how much of the distance is the
# table's, which no code can win back.
#
# Execute (a new key each request) and replay (one of 100,000 completed
# keys) on each table, ROUNDS rounds, the order reversed every other round;
# each variant's per-round ratio to the narrow table of the same round, and
# their median.  Run as root on Debian 12:
#   bash bench/registry_table.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS]
# Defaults: 5 s, 2 clients, 6 rounds: about eight minutes.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-5}
clients=${2:-2}
rounds=${3:-6}
export CLUSTER_LOCALE=C.UTF-8

bench_prepare "synchronous_commit = off" "shared_buffers = 512MB" "max_wal_size = 4GB" \
	"autovacuum = off" "idempotency.cleanup_interval = 0"

echo "==> loading 100000 completed keys per table"
psql_cluster <"$top/bench/registry_table_setup.sql" >/dev/null

dir="$cluster/bench"
mkdir "$dir"
tables="narrow wide pk3 keytype ff80 registry"
variants=""
for t in $tables; do
	printf '\\set id random(1, 1000000000000000)\nSELECT bench_%s(:client_id || %s || :id, 1);\n' \
		"$t" "'-'" >"$dir/execute_$t.sql"
	printf '\\set id random(1, 100000)\nSELECT bench_%s(%s || :id, 1);\n' "$t" "'r'" >"$dir/replay_$t.sql"
	variants="$variants execute_$t replay_$t"
done
chown -R postgres:postgres "$dir"

echo "==> $clients clients, $seconds s per run, $rounds rounds"
reversed=$(for v in $variants; do echo "$v"; done | tac | tr '\n' ' ')
declare -A runs
for round in $(seq "$rounds"); do
	order=$variants
	[ $((round % 2)) -eq 0 ] && order=$reversed
	for v in $order; do
		psql_cluster -c CHECKPOINT >/dev/null
		if ! as_postgres pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
			-h "$cluster" -p "$port" -f "$dir/$v.sql" postgres >"$dir/out" 2>&1; then
			echo "pgbench failed on $v:" >&2
			cat "$dir/out" >&2
			exit 1
		fi
		tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$dir/out")
		runs[$v]="${runs[$v]:-} $tps"
	done
done

printf '   %-18s %10s   %-8s  %s\n' variant "median tps" "/ narrow" "per round"
for path in execute replay; do
	for t in $tables; do
		v=${path}_$t
		each=$(awk -v a="${runs[$v]}" -v b="${runs[${path}_narrow]}" 'BEGIN {
			n = split(a, x, " "); split(b, y, " ")
			for (i = 1; i <= n; i++) printf "%s%.2f", (i > 1 ? " " : ""), x[i] / y[i] }')
		printf '   %-18s %10.0f   %6sx  %s\n' "$v" "$(median ${runs[$v]})" "$(median $each)" "$each"
	done
done
