#!/usr/bin/env bash
#
# bench/registry.sh: the core registry against the hand-written PL/pgSQL a
# user would otherwise write, side by side in one run, reported as ratios.
#
#   execute: a new key each request: claim + one business INSERT + result
#   replay:  a completed key each request: return the stored result
#   bare:    the business INSERT alone, to show what the protection costs
#
# Each request is one server-side function call (bench/registry_setup.sql),
# driven by pgbench with prepared statements.  Run as root on Debian 12:
#   bash bench/registry.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS] [LOCALE]
# synchronous_commit is off so that the figures compare CPU and WAL volume,
# which is what the two designs differ in, rather than the disk's flush time,
# which would be the same for both.  The variants run in turn, ROUNDS times
# over, and each reports its median, so that a slow spell of a shared machine
# does not land on one variant only.  LOCALE is the database's locale (C.UTF-8
# by default, as on a Debian server; C makes text comparison bytewise for
# the hand-written table too).
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-20}
clients=${2:-2}
rounds=${3:-3}
export CLUSTER_LOCALE=${4:-C.UTF-8}

bench_prepare "synchronous_commit = off" "shared_buffers = 512MB" "max_wal_size = 4GB"

psql_cluster -f "$top/bench/registry_setup.sql" >/dev/null

scripts=$(mktemp -d /tmp/idempotency-bench.XXXXXX)
chmod 755 "$scripts"
for f in hand ext bare; do
	printf '\\set id random(1, 1000000000000)\nSELECT bench_%s(:client_id || %s || :id, 1);\n' \
		"$f" "'-'" >"$scripts/execute_$f.sql"
done
for f in hand ext; do
	printf '\\set id random(1, 100000)\nSELECT bench_%s('"'r'"' || :id, 1);\n' "$f" >"$scripts/replay_$f.sql"
done
chmod 644 "$scripts"/*.sql

# tps NAME: run one pgbench and print its TPS
tps() {
	as_postgres pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
		-h "$cluster" -p "$port" -f "$scripts/$1.sql" postgres 2>/dev/null |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

variants="execute_hand execute_ext execute_bare replay_hand replay_ext"
echo "==> pgbench: $clients clients, $seconds s per run, $rounds rounds, locale $CLUSTER_LOCALE"
declare -A all
for round in $(seq "$rounds"); do
	for v in $variants; do
		t=$(tps "$v")
		all[$v]="${all[$v]:-} $t"
		psql_cluster -c "CHECKPOINT" >/dev/null
	done
done
declare -A r
for v in $variants; do
	r[$v]=$(median ${all[$v]})
	printf '   %-14s median %8.0f tps   (runs:%s)\n' "$v" "${r[$v]}" "${all[$v]}"
done
rm -rf "$scripts"

echo
echo "==> ratios (higher is better for the extension)"
echo "   execute path, extension / hand-written:       $(ratio "${r[execute_ext]}" "${r[execute_hand]}")x   (target >= 1.2x)"
echo "   replay path,  extension / hand-written:       $(ratio "${r[replay_ext]}" "${r[replay_hand]}")x   (target >= 1.0x)"
echo "   execute path, extension / bare INSERT alone:  $(ratio "${r[execute_ext]}" "${r[execute_bare]}")x"
echo "   execute path, hand-written / bare INSERT:     $(ratio "${r[execute_hand]}" "${r[execute_bare]}")x"
