#!/usr/bin/env bash
#
# bench/transition.sh: the cost of check_transition, side by side in one run
# with no trigger, a trivial C trigger that returns NEW (the floor: what
# PostgreSQL's trigger machinery costs per row) and the PL/pgSQL trigger a
# user would write (a lookup in a transitions table).
#
#   bulk:    one UPDATE moving every row of a narrow (unlogged, HOT-friendly)
#            table to the next state, on a fresh table each time, median time;
#   pgbench: single-row status changes by CLIENTS clients.
# Run as root on Debian 12:
#   bash bench/transition.sh [ROWS] [ROUNDS] [SECONDS] [CLIENTS]
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

rows=${1:-1000000}
rounds=${2:-7}
seconds=${3:-10}
clients=${4:-2}

bench_prepare "synchronous_commit = off" "shared_buffers = 1GB" "max_wal_size = 8GB" \
	"idempotency.cleanup_interval = 0"
make -C "$top/bench/noop_trigger" -s clean all install PG_CFLAGS="$PG_CFLAGS_RELEASE"
psql_cluster -f "$top/bench/transition_setup.sql" >/dev/null

variants="none noop ours plpgsql"

# The variants take turns within each round, so that a slow spell of a
# shared machine is spread over all of them; each reports its median.
echo "==> bulk UPDATE of $rows rows, $rounds rounds"
declare -A bulk_runs
for r in $(seq "$rounds"); do
	for v in $variants; do
		psql_cluster -c "SELECT make_table('bulk_$v', '$v', $rows)" -c "VACUUM ANALYZE bulk_$v" >/dev/null
		ms=$(psql_cluster -c '\timing on' -c "UPDATE bulk_$v SET status = 'b'" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
		bulk_runs[$v]="${bulk_runs[$v]:-} $ms"
		psql_cluster -c "DROP TABLE bulk_$v" >/dev/null
	done
done
declare -A bulk
for v in $variants; do
	bulk[$v]=$(median ${bulk_runs[$v]})
	printf '   %-8s median %9.1f ms   (runs:%s)\n' "$v" "${bulk[$v]}" "${bulk_runs[$v]}"
done

echo "==> pgbench: single-row status changes, $clients clients, $seconds s per run, $rounds rounds"
script_dir=$(mktemp -d /tmp/idempotency-bench.XXXXXX)
chmod 755 "$script_dir"
for v in $variants; do
	psql_cluster -c "SELECT make_table('one_$v', '$v', 100000)" -c "VACUUM ANALYZE one_$v" >/dev/null
	printf '\\set id random(1, 100000)\nUPDATE one_%s SET status = CASE status WHEN %s THEN %s WHEN %s THEN %s ELSE %s END WHERE id = :id;\n' \
		"$v" "'a'" "'b'" "'b'" "'c'" "'a'" >"$script_dir/$v.sql"
	chmod 644 "$script_dir/$v.sql"
done
declare -A tps_runs
for r in $(seq "$rounds"); do
	for v in $variants; do
		t=$(as_postgres pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
			-h "$cluster" -p "$port" -f "$script_dir/$v.sql" postgres 2>/dev/null | sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
		tps_runs[$v]="${tps_runs[$v]:-} $t"
	done
done
rm -rf "$script_dir"
declare -A tps
for v in $variants; do
	tps[$v]=$(median ${tps_runs[$v]})
	printf '   %-8s median %9.0f tps   (runs:%s)\n' "$v" "${tps[$v]}" "${tps_runs[$v]}"
done

calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }
noop_over=$(calc "${bulk[noop]} - ${bulk[none]}")
ours_over=$(calc "${bulk[ours]} - ${bulk[none]}")
pl_over=$(calc "${bulk[plpgsql]} - ${bulk[none]}")
echo
echo "==> ratios"
echo "   bulk, overhead over no trigger: trivial C +$(calc "100 * $noop_over / ${bulk[none]}")%, check_transition +$(calc "100 * $ours_over / ${bulk[none]}")%, PL/pgSQL +$(calc "100 * $pl_over / ${bulk[none]}")%"
echo "   check_transition overhead / trivial trigger overhead: $(calc "$ours_over / $noop_over")x"
echo "   PL/pgSQL overhead / check_transition overhead:        $(calc "$pl_over / $ours_over")x"
echo "   pgbench, check_transition / no trigger:                $(calc "${tps[ours]} / ${tps[none]}")x"
echo "   pgbench, PL/pgSQL / no trigger:                        $(calc "${tps[plpgsql]} / ${tps[none]}")x"
