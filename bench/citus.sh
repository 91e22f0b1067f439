#!/usr/bin/env bash
#
# bench/citus.sh: the registry through a Citus coordinator (a coordinator and
# two workers on this machine, idempotency.citus_setup() run) against the same
# calls on a single server, side by side in one run, reported as ratios.
#
#   execute: a new key each request: claim + one business INSERT + result,
#            one PL/pgSQL call on the coordinator (bench/citus_bench.sql); the
#            business table is distributed by its key, not co-located with
#            the registry, as doc/scaling-out.md says
#   replay:  the same call for a completed key
#   begin:   a top-level idempotent_begin for a completed key, which Citus
#            runs on the key's worker (a delegated call)
#
# Needs Citus installed in the PostgreSQL under test ($PG_BINDIR, as for the
# tests); it is in no package registry these machines reach.  Run as root on
# Debian 12:
#   bash bench/citus.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS] [REPLAY-KEYS]
# synchronous_commit is off on every node, as in the other benchmarks.  The
# variants run in turn, ROUNDS times over, and each reports its median.  All
# four servers share the machine's cores with pgbench, so the Citus figures
# are a floor: on real hardware each worker has cores of its own.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-20}
clients=${2:-4}
rounds=${3:-3}
replay_keys=${4:-10000}

citus_so="$(pg_config --pkglibdir)/citus.so"
if [ ! -f "$citus_so" ]; then
	echo "bench/citus.sh: Citus is not installed in this PostgreSQL ($citus_so is missing)" >&2
	exit 2
fi

settings=("synchronous_commit = off" "shared_buffers = 256MB" "max_wal_size = 4GB"
	"idempotency.cleanup_interval = 0")
bench_prepare "${settings[@]}"

# the Citus nodes: coordinator, worker1, worker2 on three consecutive ports
citus_dir=$(mktemp -d /tmp/idempotency-citus.XXXXXX)
chown postgres:postgres "$citus_dir"
citus_port=$((port + 1))
trap 'for n in coord worker1 worker2; do as_postgres pg_ctl -D "$citus_dir/$n" -m immediate stop >/dev/null 2>&1 || true; done
	rm -rf "$citus_dir"
	as_postgres pg_ctl -D "$cluster/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$cluster"' EXIT
echo "==> starting a coordinator and two workers in $citus_dir (ports $citus_port-$((citus_port + 2)))"
i=0
for n in coord worker1 worker2; do
	as_postgres initdb -D "$citus_dir/$n" -A trust -E UTF8 --locale=C >/dev/null
	{
		echo "shared_preload_libraries = 'citus,idempotency'"
		echo "port = $((citus_port + i))"
		echo "listen_addresses = '127.0.0.1'"
		echo "unix_socket_directories = '$citus_dir'"
		echo "max_connections = 200"
		echo "max_prepared_transactions = 200"
		for s in "${settings[@]}"; do echo "$s"; done
	} >>"$citus_dir/$n/postgresql.conf"
	as_postgres pg_ctl -D "$citus_dir/$n" -l "$citus_dir/$n.log" -w start >/dev/null
	i=$((i + 1))
done

# psql_citus PORT-OFFSET ARGS...: psql on one of the Citus nodes
psql_citus() {
	local offset=$1
	shift
	as_postgres psql -X -q -v ON_ERROR_STOP=1 -h "$citus_dir" -p $((citus_port + offset)) -d postgres "$@"
}

for offset in 1 2 0; do
	psql_citus "$offset" -c "CREATE EXTENSION citus"
done
psql_citus 0 -c "SELECT citus_set_coordinator_host('127.0.0.1', $citus_port)" \
	-c "SELECT citus_add_node('127.0.0.1', $((citus_port + 1)))" \
	-c "SELECT citus_add_node('127.0.0.1', $((citus_port + 2)))" \
	-c "CREATE EXTENSION idempotency" -c "SELECT idempotency.citus_setup()" >/dev/null

# the same tables, function and completed keys on both; distributed on Citus
psql_cluster -c "CREATE EXTENSION idempotency" >/dev/null
psql_cluster -v replay_keys="$replay_keys" -v distribute=false -f "$top/bench/citus_bench.sql" >/dev/null
psql_citus 0 -v replay_keys="$replay_keys" -v distribute=true -f "$top/bench/citus_bench.sql" >/dev/null

scripts=$(mktemp -d /tmp/idempotency-bench.XXXXXX)
chmod 755 "$scripts"
printf '\\set id random(1, 1000000000000)\nSELECT bench_pay(:client_id || %s || :id, 1);\n' "'-'" >"$scripts/execute.sql"
printf '\\set id random(1, %d)\nSELECT bench_pay(%s || :id, 1);\n' "$replay_keys" "'r'" >"$scripts/replay.sql"
printf '\\set id random(1, %d)\nSELECT outcome FROM idempotency.idempotent_begin((%s || :id)::idempotency.key);\n' \
	"$replay_keys" "'r'" >"$scripts/begin.sql"
chmod 644 "$scripts"/*.sql

# tps SCRIPT HOST PORT: run one pgbench and print its TPS
tps() {
	as_postgres pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
		-h "$2" -p "$3" -f "$scripts/$1.sql" postgres 2>/dev/null |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

paths="execute replay begin"
echo "==> pgbench: $clients clients, $seconds s per run, $rounds rounds, $replay_keys completed keys"
declare -A all
for round in $(seq "$rounds"); do
	for p in $paths; do
		all[${p}_single]="${all[${p}_single]:-} $(tps "$p" "$cluster" "$port")"
		all[${p}_citus]="${all[${p}_citus]:-} $(tps "$p" "$citus_dir" "$citus_port")"
	done
done
rm -rf "$scripts"

declare -A r
for p in $paths; do
	for where in single citus; do
		v=${p}_$where
		r[$v]=$(median ${all[$v]})
		printf '   %-16s median %8.0f tps   (runs:%s)\n' "$v" "${r[$v]}" "${all[$v]}"
	done
done

# nothing was lost or doubled on the way
rows=$(psql_citus 0 -Atc "SELECT count(*) FROM bench_charges WHERE key NOT LIKE 'r%'")
records=$(psql_citus 0 -Atc "SELECT count(*) FROM idempotency.registry WHERE key::text NOT LIKE 'r%'")
echo "   citus: $rows charges for $records executed keys"
[ "$rows" = "$records" ] || { echo "bench/citus.sh: charges and keys differ" >&2; exit 1; }

echo
echo "==> ratios, Citus coordinator / single server (a 3-node cluster on one machine)"
for p in $paths; do
	printf '   %-8s %sx\n' "$p" "$(ratio "${r[${p}_citus]}" "${r[${p}_single]}")"
done
