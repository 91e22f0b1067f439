#!/usr/bin/env bash
#
# bench/planner_hook.sh: what the library's planner hook (the null-argument
# check, src/distributed/planner_guard.c) costs queries that are not the extension's.
# Every backend of a server with the library preloaded runs it for every
# query it plans; it looks further only at a call of one function with a
# NULL argument, which this benchmark sends and nothing else: a transaction
# of FUNCTIONS statements, SELECT bench_fN(NULL), each calling another plain
# SQL function, sent as simple queries (each one planned).  The same server
# runs it with the library preloaded and without it (restarted between the
# two, alternated in each round), with the extension created in the
# database both times.  Reported: statements per second and the server's
# CPU time per statement (all of the cluster's processes, from /proc, the
# backends' counted once they have exited), median of ROUNDS rounds, and
# their ratios.
# Run as root on Debian 12:
#   bash bench/planner_hook.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS] [FUNCTIONS]
# With PG_BINDIR pointing at a private installation (test/private_install.sh)
# it builds and runs there instead of the system's PostgreSQL.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-10}
clients=${2:-2}
rounds=${3:-5}
functions=${4:-40}

bench_prepare "synchronous_commit = off" "idempotency.cleanup_interval = 0" "autovacuum = off"
psql_cluster -c "CREATE EXTENSION idempotency" >/dev/null
for i in $(seq "$functions"); do
	psql_cluster -c "CREATE FUNCTION bench_f$i(a int) RETURNS int LANGUAGE sql AS 'SELECT \$1 + $i'" >/dev/null
done

dir=$(mktemp -d /tmp/idempotency-bench.XXXXXX)
chmod 755 "$dir"
for i in $(seq "$functions"); do
	echo "SELECT bench_f$i(NULL);"
done >"$dir/calls.sql"
chmod 644 "$dir/calls.sql"

# cluster_cpu: the CPU time, in clock ticks, of the postmaster and every
# process it started, those that have exited included (its cutime, cstime)
cluster_cpu() {
	local pm total=0 pid
	pm=$(head -1 "$cluster/data/postmaster.pid")
	total=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat")
	for pid in $(ps -o pid= --ppid "$pm"); do
		[ -r "/proc/$pid/stat" ] || continue
		total=$((total + $(sed 's/^.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }')))
	done
	echo "$total"
}

# restart_with LIBRARIES (ALTER SYSTEM would store '' as a list of one empty
# name)
restart_with() {
	psql_cluster -c "ALTER SYSTEM RESET shared_preload_libraries" >/dev/null
	echo "shared_preload_libraries = '$1'" | as_postgres tee -a "$cluster/data/postgresql.auto.conf" >/dev/null
	as_postgres pg_ctl -D "$cluster/data" -l "$cluster/log" -w restart >/dev/null ||
		{ tail -20 "$cluster/log"; exit 1; }
	psql_cluster -c "SELECT bench_f1(1)" >/dev/null
}

# run: pgbench for $seconds; prints statements per second and CPU
# microseconds per statement
run() {
	local before after tx
	before=$(cluster_cpu)
	tx=$(as_postgres pgbench -n -M simple -c "$clients" -j "$clients" -T "$seconds" \
		-h "$cluster" -p "$port" -f "$dir/calls.sql" postgres 2>/dev/null |
		sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
	sleep 1					# the backends exit and are reaped
	after=$(cluster_cpu)
	awk -v tx="$tx" -v n="$functions" -v s="$seconds" -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" \
		'BEGIN { printf "%.0f %.2f\n", tx * n / s, t / hz * 1e6 / (tx * n) }'
}

declare -A tput cpu
variants="preloaded none"
for r in $(seq "$rounds"); do
	for v in $variants; do
		case $v in
			preloaded) restart_with idempotency ;;
			none) restart_with "" ;;
		esac
		read -r t c < <(run)
		tput[$v]="${tput[$v]:-} $t"
		cpu[$v]="${cpu[$v]:-} $c"
	done
	variants=$(echo "$variants" | awk '{ print $2, $1 }')
done
rm -rf "$dir"

echo "==> $functions distinct SQL functions called with NULL, simple protocol ($clients clients, $seconds s per run, $rounds rounds, medians)"
declare -A mt mc
for v in preloaded none; do
	mt[$v]=$(median ${tput[$v]})
	mc[$v]=$(median ${cpu[$v]})
	printf '   %-10s %9s statements/s (runs:%s)   %6s us CPU/statement (runs:%s)\n' \
		"$v" "${mt[$v]}" "${tput[$v]}" "${mc[$v]}" "${cpu[$v]}"
done
echo
echo "==> ratios, library preloaded / not loaded"
echo "   CPU per statement: $(ratio "${mc[preloaded]}" "${mc[none]}")x"
echo "   throughput:        $(ratio "${mt[preloaded]}" "${mt[none]}")x"
