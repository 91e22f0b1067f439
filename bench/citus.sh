#!/usr/bin/env bash
#
# bench/citus.sh: what a Citus user compares.  On one 3-node cluster (a
# coordinator and two workers on this machine, idempotency.citus_setup()
# run), through the coordinator, as an application role (grant_usage(), as
# README says applications connect), the extension's request against the
# same request written by hand, side by side in one run, as ratios:
#
#   execute: a new key each request: claim + one business INSERT + result,
#            one PL/pgSQL call (bench/citus_bench.sql, bench_pay); the
#            business table is distributed by the key, co-located with the
#            registry
#   replay:  the same call for a completed key
#
# and "by hand" the same two with a keys table of the application's own,
# distributed by the key and co-located with its business table (hand_pay);
# and the hand-written statements again, with the claim and the store each in
# a PL/pgSQL function distributed with force_delegation (deleg_pay), to show
# what handing a call to the key's worker costs by itself; and both handlers
# distributed by the key with force_delegation (bench_pay_w, hand_pay_w), so
# that the whole request runs on the key's worker.  It checks that every
# handed-over call ran on a worker and none on the coordinator.
# It also counts the two-phase commits each variant made: the coordinator
# keeps a row in pg_dist_transaction per worker of each two-phase commit
# (recovery is held off during the run), reported per request.
#
# Needs Citus installed in the PostgreSQL under test ($PG_BINDIR, as for the
# tests); it is in no package registry these machines reach.  Run as root on
# Debian 12:
#   bash bench/citus.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS] [REPLAY-KEYS]
# synchronous_commit is off on every node, as in the other benchmarks.  The
# variants run in turn, ROUNDS times over, and each reports its median.  The
# three servers share the machine's cores with pgbench.
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

install_packages make gcc libc6-dev postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR postgresql-contrib
build_and_install "$top" "$PG_CFLAGS_RELEASE"
settings=("synchronous_commit = off" "shared_buffers = 256MB" "max_wal_size = 4GB"
	"idempotency.cleanup_interval = 0")

# the Citus nodes: coordinator, worker1, worker2 on three consecutive ports
citus_dir=$(mktemp -d /tmp/idempotency-citus.XXXXXX)
chown postgres:postgres "$citus_dir"
citus_port=$((20000 + RANDOM % 20000))
trap 'for n in coord worker1 worker2; do as_postgres pg_ctl -D "$citus_dir/$n" -m immediate stop >/dev/null 2>&1 || true; done
	rm -rf "$citus_dir"' EXIT
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
		# two-phase commits stay in pg_dist_transaction until counted
		echo "citus.recover_2pc_interval = -1"
		# where the handed-over functions ran (pg_stat_user_functions)
		echo "track_functions = all"
		for s in "${settings[@]}"; do echo "$s"; done
	} >>"$citus_dir/$n/postgresql.conf"
	as_postgres pg_ctl -D "$citus_dir/$n" -l "$citus_dir/$n.log" -w start >/dev/null
	i=$((i + 1))
done

# psql_citus PORT-OFFSET ARGS...: psql on one of the Citus nodes, as postgres
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
psql_citus 0 -v replay_keys="$replay_keys" -f "$top/bench/citus_bench.sql" >/dev/null

# calls FUNCTION NODE...: how many calls of FUNCTION ran on those nodes
# (port offsets), once their sessions have ended and reported them
calls() {
	local fn=$1 total=0 offset
	shift
	for offset in "$@"; do
		total=$((total + $(psql_citus "$offset" -Atc "SELECT coalesce(sum(calls), 0) FROM pg_catalog.pg_stat_user_functions WHERE funcname = '$fn'")))
	done
	echo "$total"
}
declare -A calls_before
for fn in citus_idempotent_begin deleg_claim bench_pay_w hand_pay_w; do
	calls_before[$fn,coordinator]=$(calls "$fn" 0)
	calls_before[$fn,workers]=$(calls "$fn" 1 2)
done

scripts=$(mktemp -d /tmp/idempotency-bench.XXXXXX)
chmod 755 "$scripts"
for fn in bench_pay hand_pay deleg_pay; do
	printf '\\set id random(1, 1000000000000)\nSELECT %s(:client_id || %s || :id, 1);\n' "$fn" "'-'" >"$scripts/execute_$fn.sql"
	printf '\\set id random(1, %d)\nSELECT %s(%s || :id, 1);\n' "$replay_keys" "$fn" "'r'" >"$scripts/replay_$fn.sql"
done
# a handler handed over is called as Citus hands a call over: from a FROM
# clause, with the key of the distribution argument's type
for fn in bench_pay_w hand_pay_w; do
	type=text
	[ "$fn" = bench_pay_w ] && type=idempotency.key
	printf '\\set id random(1, 1000000000000)\nSELECT * FROM %s((:client_id || %s || :id)::%s, 1);\n' "$fn" "'-'" "$type" >"$scripts/execute_$fn.sql"
	printf '\\set id random(1, %d)\nSELECT * FROM %s((%s || :id)::%s, 1);\n' "$replay_keys" "$fn" "'r'" "$type" >"$scripts/replay_$fn.sql"
done
variants="bench_pay hand_pay deleg_pay bench_pay_w hand_pay_w"
chmod 644 "$scripts"/*.sql

# twopc: two-phase commits so far (distinct distributed transactions in
# pg_dist_transaction: gid citus_<group>_<pid>_<transaction>_<connection>)
twopc() {
	psql_citus 0 -Atc "SELECT count(DISTINCT pg_catalog.regexp_replace(gid, '_[0-9]+\$', '')) FROM pg_dist_transaction"
}

# run SCRIPT: one pgbench as the application role; prints "TPS REQUESTS 2PC"
run() {
	local before after out
	before=$(twopc)
	out=$(as_postgres pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
		-h "$citus_dir" -p "$citus_port" -U app -f "$scripts/$1.sql" postgres 2>/dev/null)
	after=$(twopc)
	echo "$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")" \
		"$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")" \
		"$((after - before))"
}

paths="execute replay"
echo "==> pgbench as role app through the coordinator: $clients clients, $seconds s per run, $rounds rounds, $replay_keys completed keys"
declare -A all requests twophase
for round in $(seq "$rounds"); do
	for p in $paths; do
		for fn in $variants; do
			read -r t n c <<<"$(run "${p}_$fn")"
			all[${p}_$fn]="${all[${p}_$fn]:-} $t"
			requests[${p}_$fn]=$(( ${requests[${p}_$fn]:-0} + n ))
			twophase[${p}_$fn]=$(( ${twophase[${p}_$fn]:-0} + c ))
		done
	done
done
rm -rf "$scripts"

declare -A r
for p in $paths; do
	for fn in $variants; do
		v=${p}_$fn
		r[$v]=$(median ${all[$v]})
		printf '   %-18s median %8.0f tps   (runs:%s)   %d two-phase commits in %d requests\n' \
			"$v" "${r[$v]}" "${all[$v]}" "${twophase[$v]}" "${requests[$v]}"
	done
done

# nothing was lost or doubled on the way
rows=$(psql_citus 0 -Atc "SELECT count(*) FROM bench_charges WHERE key::text NOT LIKE 'r%'")
records=$(psql_citus 0 -Atc "SELECT count(*) FROM idempotency.registry WHERE key::text NOT LIKE 'r%'")
echo "   extension: $rows charges for $records executed keys"
[ "$rows" = "$records" ] || { echo "bench/citus.sh: charges and keys differ" >&2; exit 1; }
rows=$(psql_citus 0 -Atc "SELECT count(*) FROM hand_charges WHERE key NOT LIKE 'r%'")
records=$(psql_citus 0 -Atc "SELECT count(*) FROM hand_keys WHERE key NOT LIKE 'r%'")
echo "   by hand: $rows charges for $records executed keys"
[ "$rows" = "$records" ] || { echo "bench/citus.sh: charges and keys differ" >&2; exit 1; }
rows=$(psql_citus 0 -Atc "SELECT count(*) FROM deleg_charges WHERE key NOT LIKE 'r%'")
records=$(psql_citus 0 -Atc "SELECT count(*) FROM deleg_keys WHERE key NOT LIKE 'r%'")
echo "   by hand, handed over: $rows charges for $records executed keys"
[ "$rows" = "$records" ] || { echo "bench/citus.sh: charges and keys differ" >&2; exit 1; }

# the calls were handed over: each request's claim (or handler) ran on the
# key's worker, none on the coordinator (a session reports its calls when it
# ends)
for v in "citus_idempotent_begin bench_pay" "deleg_claim deleg_pay" "bench_pay_w bench_pay_w" \
	"hand_pay_w hand_pay_w"; do
	read -r fn variant <<<"$v"
	want=$(( ${requests[execute_$variant]} + ${requests[replay_$variant]} ))
	for _ in $(seq 30); do
		ran=$(( $(calls "$fn" 1 2) - ${calls_before[$fn,workers]} ))
		[ "$ran" -ge "$want" ] && break
		sleep 1
	done
	here=$(( $(calls "$fn" 0) - ${calls_before[$fn,coordinator]} ))
	echo "   $fn: $ran calls on the workers, $here on the coordinator, for $want requests"
	[ "$ran" -ge "$want" ] && [ "$here" = 0 ] || { echo "bench/citus.sh: $fn was not handed over" >&2; exit 1; }
done

# ratios TITLE NUMERATOR DENOMINATOR: a ratio per path, with the numerator's
# two-phase commits per request
ratios() {
	echo "==> $1"
	for p in $paths; do
		printf '   %-8s %sx   two-phase commits per request: %s\n' "$p" \
			"$(ratio "${r[${p}_$2]}" "${r[${p}_$3]}")" \
			"$(awk -v c="${twophase[${p}_$2]}" -v n="${requests[${p}_$2]}" 'BEGIN { printf "%.3f", n ? c / n : 0 }')"
	done
}
echo
ratios "extension / by hand (a 3-node cluster on one machine, as role app)" bench_pay hand_pay
ratios "what handing a call over costs by itself: by hand, handed over / by hand" deleg_pay hand_pay
ratios "extension / by hand, handed over (both hand their calls to the key's worker)" bench_pay deleg_pay
ratios "the whole handler handed over: extension / by hand (both handlers run on the key's worker)" \
	bench_pay_w hand_pay_w
ratios "the whole handler handed over / the calls handed over, for the extension" bench_pay_w bench_pay
