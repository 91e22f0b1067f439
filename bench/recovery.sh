#!/usr/bin/env bash
#
# bench/recovery.sh: what recovery points cost, and whether the 1.1 registry
# slows the hot path, side by side in one run, reported as ratios.
#
#   hot path (a new key each request: begin + business INSERT + finish, one
#   transaction, bench/registry.sh's execute_ext)
#     v10        the library on 1.0's SQL objects (no recovery columns)
#     v11        the library on 1.1's (two more columns, NULL on this path)
#     v11_index  1.1 with a partial index on lease_until WHERE status =
#                'processing', which a stalled-claim scan could use: what
#                it would cost every claim and finish (the extension does
#                not create it)
#   three steps (a new key each request, four transactions: begin; step 1;
#   step 2; the business INSERT and finish), on 1.1
#     steps_ext   each step recorded with idempotent_checkpoint
#     steps_hand  each step upserted into a steps table of the handler's
#     steps_none  no step recorded (the all-or-nothing claim of 1.0)
#   the completer's scan: claim_stalled() on a registry of ROWS finished
#   records with nothing stalled, with and without the partial index
#
# Run as root on Debian 12 (set PG_BINDIR to a private copy of the server
# to leave the system's installation alone):
#   bash bench/recovery.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS] [ROWS]
# Throughput with synchronous_commit = off; the variants run in turn, ROUNDS
# times over (in reverse order every other round), each reporting its median
# and each ratio its value in every round.  Defaults: 4 s per run, 2 clients,
# 3 rounds, 1000000 rows: about five minutes.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-4}
clients=${2:-2}
rounds=${3:-3}
rows=${4:-1000000}

bench_prepare "synchronous_commit = off" "shared_buffers = 512MB" "max_wal_size = 4GB" \
	"autovacuum = off" "idempotency.cleanup_interval = 0"

for db in v10 v11 v11_index; do
	version=1.1 index=off
	[ "$db" = v10 ] && version=1.0
	[ "$db" = v11_index ] && index=on
	psql_cluster -c "CREATE DATABASE $db" >/dev/null
	as_postgres psql -X -q -v ON_ERROR_STOP=1 -h "$cluster" -p "$port" -d "$db" \
		-v version="$version" -v stalled_index="$index" <"$top/bench/recovery_setup.sql" >/dev/null
done

dir="$cluster/bench"
mkdir "$dir"
key=":client_id || '-' || :id"
printf '\\set id random(1, 1000000000000000)\nSELECT bench_ext(%s, 1);\n' "$key" >"$dir/hot.sql"
begin="SELECT attempt FROM idempotency.idempotent_begin($key, request => '{\"amount\": 1}', external => true) \\gset"
finish="SELECT bench_finish($key, 1, :attempt);"
cat >"$dir/steps_ext.sql" <<SQL
\\set id random(1, 1000000000000000)
$begin
SELECT idempotency.idempotent_checkpoint($key, 'customer_created', '{"customer": "cus_1"}', attempt => :attempt);
SELECT idempotency.idempotent_checkpoint($key, 'charged', '{"customer": "cus_1", "charge": "ch_1"}', attempt => :attempt);
$finish
SQL
cat >"$dir/steps_hand.sql" <<SQL
\\set id random(1, 1000000000000000)
$begin
INSERT INTO bench_steps VALUES ($key, 'customer_created', '{"customer": "cus_1"}', now()) ON CONFLICT (key) DO UPDATE SET recovery_point = excluded.recovery_point, recovery_state = excluded.recovery_state, updated_at = excluded.updated_at;
INSERT INTO bench_steps VALUES ($key, 'charged', '{"customer": "cus_1", "charge": "ch_1"}', now()) ON CONFLICT (key) DO UPDATE SET recovery_point = excluded.recovery_point, recovery_state = excluded.recovery_state, updated_at = excluded.updated_at;
$finish
SQL
cat >"$dir/steps_none.sql" <<SQL
\\set id random(1, 1000000000000000)
$begin
$finish
SQL
chown -R postgres:postgres "$dir"

# the variants: name, database, script
variants="v10:v10:hot v11:v11:hot v11_index:v11_index:hot steps_ext:v11:steps_ext steps_hand:v11:steps_hand steps_none:v11:steps_none"

pgbench_run() {
	local db=$1 script=$2
	if ! as_postgres pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
		-h "$cluster" -p "$port" -f "$dir/$script.sql" "$db" >"$dir/out" 2>&1; then
		echo "pgbench failed on $script in $db:" >&2
		cat "$dir/out" >&2
		exit 1
	fi
	run_tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$dir/out")
	run_xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$dir/out")
	if [ -z "$run_tps" ] || [ -z "$run_xacts" ] || [ "$run_xacts" -eq 0 ]; then
		echo "pgbench on $script in $db processed no transactions:" >&2
		cat "$dir/out" >&2
		exit 1
	fi
}

echo "==> throughput: $clients clients, $seconds s per run, $rounds rounds, synchronous_commit = off"
reversed=$(for v in $variants; do echo "$v"; done | tac | tr '\n' ' ')
declare -A runs walbytes xacts
for round in $(seq "$rounds"); do
	order=$variants
	[ $((round % 2)) -eq 0 ] && order=$reversed
	for v in $order; do
		IFS=: read -r name db script <<<"$v"
		start=$(psql_cluster -Atc "SELECT pg_current_wal_insert_lsn()")
		pgbench_run "$db" "$script"
		wal=$(psql_cluster -Atc "SELECT pg_current_wal_insert_lsn() - '$start'::pg_lsn")
		psql_cluster -c "CHECKPOINT" >/dev/null
		runs[$name]="${runs[$name]:-} $run_tps"
		walbytes[$name]=$((${walbytes[$name]:-0} + ${wal%.*}))
		xacts[$name]=$((${xacts[$name]:-0} + run_xacts))
	done
done

declare -A tps
echo "   (WAL: bytes per request, full-page images included, every run starting after a CHECKPOINT)"
printf '   %-12s %10s %8s   %s\n' variant "median tps" "WAL" "runs (tps)"
for v in $variants; do
	name=${v%%:*}
	tps[$name]=$(median ${runs[$name]})
	printf '   %-12s %10.0f %8.0f  %s\n' "$name" "${tps[$name]}" \
		"$(awk -v a="${walbytes[$name]}" -v n="${xacts[$name]}" 'BEGIN { print a / n }')" \
		"$(for t in ${runs[$name]}; do printf ' %.0f' "$t"; done)"
done

ratio_line() {
	local r each
	r=$(ratio "${tps[$2]}" "${tps[$3]}")
	each=$(awk -v a="${runs[$2]}" -v b="${runs[$3]}" 'BEGIN {
		n = split(a, x, " "); split(b, y, " ")
		for (i = 1; i <= n; i++) printf "%s%.2f", (i > 1 ? " " : ""), x[i] / y[i] }')
	printf '   %-52s %5sx  (rounds: %s)\n' "$1" "$r" "$each"
}
echo
echo "==> ratios of the medians (higher is better for the first)"
ratio_line "hot path: 1.1 registry / 1.0 registry" v11 v10
ratio_line "hot path: 1.1 with a stalled-claim index / without" v11_index v11
ratio_line "three steps: recovery points / a steps table" steps_ext steps_hand
ratio_line "three steps: recovery points / none recorded" steps_ext steps_none
ratio_line "three steps: a steps table / none recorded" steps_hand steps_none

# the completer's scan on a large registry with nothing stalled
echo
echo "==> claim_stalled() on $rows finished records, nothing stalled (ms, best of 3)"
for db in v11 v11_index; do
	as_postgres psql -X -q -v ON_ERROR_STOP=1 -h "$cluster" -p "$port" -d "$db" -c "
		TRUNCATE idempotency.registry;
		INSERT INTO idempotency.registry (owner, scope, key, status, attempt, created_at, updated_at, expires_at)
		SELECT 'postgres', '', 'k' || i, 'completed', 1, now(), now(), now() + interval '1 day'
		  FROM generate_series(1, $rows) AS i;" -c "VACUUM ANALYZE idempotency.registry" >/dev/null
	best=$(as_postgres psql -X -q -At -h "$cluster" -p "$port" -d "$db" -c "
		DO \$\$
		DECLARE
			t0 timestamptz;
			best float8 := 'infinity';
		BEGIN
			FOR i IN 1..3 LOOP
				t0 := clock_timestamp();
				PERFORM count(*) FROM idempotency.claim_stalled(batch_size => 10);
				best := least(best, extract(epoch FROM clock_timestamp() - t0) * 1000);
			END LOOP;
			RAISE NOTICE '%', round(best::numeric, 2);
		END \$\$;" 2>&1 | sed -n 's/.*NOTICE:  //p')
	printf '   %-12s %10s ms\n' "$db" "$best"
done
