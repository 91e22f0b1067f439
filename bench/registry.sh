#!/usr/bin/env bash
#
# bench/registry.sh: idempotency keys, the extension against the PL/pgSQL a
# user would otherwise write, side by side in one run, reported as ratios.
#
#   execute path (a new key each request: claim + business INSERT + answer)
#     bare    the business INSERT alone, no protection
#     floor   bare + one speculative insert of a finished key row
#     hand    the minimal hand-written handler
#     feq     the feature-equivalent hand-written handler
#     feq_tuned  the same on a table designed like the extension's registry
#     feq_fn  the same factored into begin and finish functions
#     ext     the extension, default mode
#     defer   the extension with defer_claim => true
#     reg_min    the minimal handler's statements, by hand, on the
#             extension's registry table (its row, its primary key)
#     reg_defer  the deferred design's statements, by hand, on it
#   replay path (a key already completed: return the stored answer)
#     hand, feq, feq_tuned, feq_fn, ext, defer, reg_defer (one read)
# feq_tuned and feq_fn show how much the feature-equivalent baseline moves
# with its table design and its shape; reg_min and reg_defer split the
# extension's distance from the minimal handler into what its table costs
# (reg_* against hand) and what its code costs (ext and defer against
# reg_*).  These four are left out of the latency runs.
#
# bench/registry_setup.sql defines each handler, one server-side function
# call per request, driven by pgbench with prepared statements.  Run as
# root on Debian 12:
#   bash bench/registry.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS] [LOCALE] [RATE]
#
# 1. Throughput: synchronous_commit is off, so that the figures compare CPU
#    and WAL volume, which is what the designs differ in, rather than the
#    disk's flush time.  The variants run in turn, ROUNDS times over (in
#    reverse order every other round), and each reports its median, so that a
#    slow spell of a shared machine does not land on one variant only; each
#    ratio also shows its value in every round.  Every run starts after a
#    CHECKPOINT.
# 2. WAL per request: the WAL each throughput run wrote over its
#    transactions, summed over the rounds, counted as pg_stat_wal's wal_bytes
#    counts it (the records' lengths) but read with pg_walinspect from the
#    run's LSN range, so that it does not depend on when the backends report
#    their statistics; and the full-page images in it, which the first change
#    of each page after the checkpoint writes, so that their share depends on
#    the run's length.  Autovacuum and the extension's cleanup are off, so
#    that no other writer's WAL lands in a variant's range.
# 3. Latency: synchronous_commit = on, every variant at the same fixed rate
#    (pgbench --rate), ROUNDS times over; p50 and p99 of every transaction's
#    latency (pgbench -l, counted from its scheduled start, so that a stall
#    is not hidden).  RATE is in transactions per second, by default a
#    quarter of what the slowest variant reaches with synchronous_commit = on
#    in a calibration run (a quarter, because the disk's flush time and the
#    machine's load vary from run to run, and a rate over a variant's
#    capacity measures its queue, not its latency).
#
# 1b. Throughput with synchronous_commit = on, the same way, for the
#    minimal, feature-equivalent and default handlers: the ratios a server
#    with durable commits sees, where each commit's flush narrows them.
# 2b. WAL per new key on tables of equal size: the registry and the minimal
#    handler's table cut back to the same 100000 keys, the default and the
#    minimal handler run in turn; in 1 the registry also holds the other
#    extension variants' records, which gives it more index pages to write
#    full-page images of.
# 4. A large registry: BIG_REGISTRY live records (3 million unless set; 0
#    skips it) loaded into the registry, as many into the minimal handler's
#    table, checkpointed, not vacuumed or analyzed; the default execute's
#    throughput then, as a ratio to its own with the small registry of 1.
#
# LOCALE is the database's locale (C.UTF-8 by default, as on a Debian
# server; C makes text comparison bytewise for the hand-written tables too).
# Defaults: 4 s per run, 2 clients, 3 rounds: about fifteen minutes in all.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-4}
clients=${2:-2}
rounds=${3:-3}
export CLUSTER_LOCALE=${4:-C.UTF-8}
rate=${5:-}

bench_prepare "synchronous_commit = off" "shared_buffers = 512MB" "max_wal_size = 4GB" \
	"autovacuum = off" "idempotency.cleanup_interval = 0"

echo "==> loading 100000 completed keys per replay variant"
# on standard input, which root opens: the server's user may not be able to
# read a clone in root's home
psql_cluster <"$top/bench/registry_setup.sql" >/dev/null
psql_cluster -c "CREATE EXTENSION pg_walinspect" >/dev/null

# the pgbench scripts and logs, in the cluster's directory, which
# start_cluster's exit trap removes
dir="$cluster/bench"
mkdir "$dir"
execute="bare floor hand feq feq_tuned feq_fn ext defer reg_min reg_defer"
replay="hand feq feq_tuned feq_fn ext defer reg_defer"
variants=""
for f in $execute; do
	printf '\\set id random(1, 1000000000000000)\nSELECT bench_%s(:client_id || %s || :id, 1);\n' \
		"$f" "'-'" >"$dir/execute_$f.sql"
	variants="$variants execute_$f"
done
for f in $replay; do
	prefix=r
	[ "$f" = defer ] && prefix=d
	[ "$f" = reg_defer ] && prefix=g
	printf '\\set id random(1, 100000)\nSELECT bench_%s(%s || :id, 1);\n' "$f" "'$prefix'" >"$dir/replay_$f.sql"
	variants="$variants replay_$f"
done
chown -R postgres:postgres "$dir"

# pgbench_run VARIANT [ARG...]: one pgbench run of a variant's script, with
# extra pgbench arguments; sets run_tps and run_xacts, or shows pgbench's
# output and fails (a variant that errors must not pass as a slow one)
pgbench_run() {
	local v=$1
	shift
	if ! as_postgres env PGOPTIONS="${pgoptions:-}" pgbench -n -M prepared \
		-c "$clients" -j "$clients" -T "$seconds" -h "$cluster" -p "$port" \
		-f "$dir/$v.sql" "$@" postgres >"$dir/out" 2>&1; then
		echo "pgbench failed on $v:" >&2
		cat "$dir/out" >&2
		exit 1
	fi
	run_tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$dir/out")
	run_xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$dir/out")
	if [ -z "$run_tps" ] || [ -z "$run_xacts" ] || [ "$run_xacts" -eq 0 ]; then
		echo "pgbench on $v processed no transactions:" >&2
		cat "$dir/out" >&2
		exit 1
	fi
}

# sql QUERY: one value from the cluster
sql() {
	psql_cluster -Atc "$1"
}

# measured_run VARIANT: pgbench_run, and the WAL it wrote, in bytes, all
# and full-page images (sets wal and fpi); then a CHECKPOINT, so that every
# run starts after one
measured_run() {
	local start end line
	start=$(sql "SELECT pg_current_wal_insert_lsn()")
	pgbench_run "$1"
	end=$(sql "SELECT pg_current_wal_insert_lsn()")
	# pg_walinspect reads only flushed WAL: a synchronous commit of a
	# transaction that wrote WAL flushes past the range
	wal=0 fpi=0
	if [ "$start" != "$end" ]; then
		line=$(psql_cluster -At -F ' ' -c "SET synchronous_commit = on" \
			-c "SELECT pg_logical_emit_message(true, 'bench', 'flush')" \
			-c "SELECT coalesce(sum(combined_size), 0), coalesce(sum(fpi_size), 0)
				  FROM pg_get_wal_stats('$start', '$end')" | tail -n 1)
		read -r wal fpi <<<"$line"
	fi
	sql "CHECKPOINT" >/dev/null
}

# wal_row VARIANT RUNS XACTS WAL FPI: one line of a throughput table: the
# variant's median tps, its WAL per request (all, records without full-page
# images, full-page images) and each run's tps
wal_row() {
	printf '   %-19s %10.0f %7.0f %7.0f %7.0f  %s\n' "$1" "$(median $2)" \
		"$(awk -v a="$4" -v n="$3" 'BEGIN { print a / n }')" \
		"$(awk -v a="$4" -v f="$5" -v n="$3" 'BEGIN { print (a - f) / n }')" \
		"$(awk -v a="$5" -v n="$3" 'BEGIN { print a / n }')" \
		"$(for t in $2; do printf ' %.0f' "$t"; done)"
}

# 1 and 2: throughput and WAL
echo "==> throughput: $clients clients, $seconds s per run, $rounds rounds, locale $CLUSTER_LOCALE," \
	"synchronous_commit = off"
# the order alternates between rounds, so that a load that rises or falls
# through a round does not favour the variants that come first
reversed=$(for v in $variants; do echo "$v"; done | tac | tr '\n' ' ')
declare -A runs xacts walbytes fpibytes
for round in $(seq "$rounds"); do
	order=$variants
	[ $((round % 2)) -eq 0 ] && order=$reversed
	for v in $order; do
		measured_run "$v"
		runs[$v]="${runs[$v]:-} $run_tps"
		xacts[$v]=$((${xacts[$v]:-0} + run_xacts))
		walbytes[$v]=$((${walbytes[$v]:-0} + wal))
		fpibytes[$v]=$((${fpibytes[$v]:-0} + fpi))
	done
done

declare -A tps
echo "   WAL bytes per request: all, records without full-page images, full-page images"
printf '   %-19s %10s %7s %7s %7s   %s\n' variant "median tps" all records FPI "runs (tps)"
for v in $variants; do
	tps[$v]=$(median ${runs[$v]})
	wal_row "$v" "${runs[$v]}" "${xacts[$v]}" "${walbytes[$v]}" "${fpibytes[$v]}"
done

# ratio_line LABEL A B: the ratio of variant A's median to variant B's, and
# the ratio in each round, which shows how far the machine's noise moves it
ratio_line() {
	local r each
	r=$(ratio "${tps[$2]}" "${tps[$3]}")
	each=$(awk -v a="${runs[$2]}" -v b="${runs[$3]}" 'BEGIN {
		n = split(a, x, " "); split(b, y, " ")
		for (i = 1; i <= n; i++) printf "%s%.2f", (i > 1 ? " " : ""), x[i] / y[i] }')
	printf '   %-50s %5sx  (rounds: %s)\n' "$1" "$r" "$each"
}

echo
echo "==> ratios of the medians (higher is better for the first)"
ratio_line "default execute / minimal hand-written" execute_ext execute_hand
ratio_line "default execute / feature-equivalent" execute_ext execute_feq
ratio_line "default replay / minimal hand-written" replay_ext replay_hand
ratio_line "default replay / feature-equivalent" replay_ext replay_feq
ratio_line "defer_claim execute / minimal hand-written" execute_defer execute_hand
ratio_line "defer_claim execute / feature-equivalent" execute_defer execute_feq
ratio_line "defer_claim replay / minimal (read-first option)" replay_defer replay_hand
ratio_line "defer_claim replay / feature-equivalent" replay_defer replay_feq
ratio_line "feature-equivalent execute / minimal" execute_feq execute_hand
ratio_line "default execute / feature-equivalent, tuned table" execute_ext execute_feq_tuned
ratio_line "default replay / feature-equivalent, tuned table" replay_ext replay_feq_tuned
ratio_line "defer_claim execute / feature-eq., tuned table" execute_defer execute_feq_tuned
ratio_line "default execute / feature-eq. in functions" execute_ext execute_feq_fn
ratio_line "default replay / feature-eq. in functions" replay_ext replay_feq_fn
ratio_line "defer_claim execute / feature-eq. in functions" execute_defer execute_feq_fn
ratio_line "registry table, minimal statements / minimal" execute_reg_min execute_hand
ratio_line "registry table, deferred statements / minimal" execute_reg_defer execute_hand
ratio_line "default execute / its statements by hand" execute_ext execute_reg_min
ratio_line "defer_claim execute / its statements by hand" execute_defer execute_reg_defer
ratio_line "registry table, one read / minimal replay" replay_reg_defer replay_hand
ratio_line "read-first replay / its statement by hand" replay_defer replay_reg_defer
for f in floor hand feq feq_tuned feq_fn ext defer reg_min reg_defer; do
	ratio_line "execute $f / bare" "execute_$f" execute_bare
done

# 1b: throughput with durable commits, the ratios that a user's server sees
durable="execute_hand execute_feq execute_ext replay_hand replay_feq replay_ext"
pgoptions="-c synchronous_commit=on"
echo
echo "==> throughput: synchronous_commit = on, $clients clients, $seconds s per run, $rounds rounds"
declare -A druns
for round in $(seq "$rounds"); do
	order=$durable
	[ $((round % 2)) -eq 0 ] && order=$(for v in $durable; do echo "$v"; done | tac | tr '\n' ' ')
	for v in $order; do
		pgbench_run "$v"
		sql "CHECKPOINT" >/dev/null
		druns[$v]="${druns[$v]:-} $run_tps"
	done
done
declare -A saved_runs saved_tps
for v in $durable; do
	saved_runs[$v]=${runs[$v]}
	saved_tps[$v]=${tps[$v]}
	runs[$v]=${druns[$v]}
	tps[$v]=$(median ${druns[$v]})
	printf '   %-19s %10.0f tps  %s\n' "$v" "${tps[$v]}" "$(for t in ${druns[$v]}; do printf ' %.0f' "$t"; done)"
done
ratio_line "durable: default execute / minimal hand-written" execute_ext execute_hand
ratio_line "durable: default execute / feature-equivalent" execute_ext execute_feq
ratio_line "durable: default replay / minimal hand-written" replay_ext replay_hand
ratio_line "durable: default replay / feature-equivalent" replay_ext replay_feq
for v in $durable; do
	runs[$v]=${saved_runs[$v]}
	tps[$v]=${saved_tps[$v]}
done

# 3: latency at a fixed rate, synchronous_commit = on
variants=$(for v in $variants; do echo "$v"; done | grep -v -e _feq_tuned -e _feq_fn -e _reg_ | tr '\n' ' ')
reversed=$(for v in $variants; do echo "$v"; done | tac | tr '\n' ' ')
if [ -z "$rate" ]; then
	slowest=""
	for v in $variants; do
		if [ -z "$slowest" ] || awk -v a="${tps[$v]}" -v b="${tps[$slowest]}" 'BEGIN { exit !(a < b) }'; then
			slowest=$v
		fi
	done
	pgbench_run "$slowest"
	sql "CHECKPOINT" >/dev/null
	rate=$(awk -v t="$run_tps" 'BEGIN { r = int(t / 4); print (r < 1 ? 1 : r) }')
	echo
	echo "==> calibration: $slowest reaches $(printf '%.0f' "$run_tps") tps with synchronous_commit = on"
fi
echo
echo "==> latency: synchronous_commit = on, $rate tps (pgbench --rate), $clients clients," \
	"$seconds s per run, $rounds rounds"
for round in $(seq "$rounds"); do
	order=$variants
	[ $((round % 2)) -eq 0 ] && order=$reversed
	for v in $order; do
		pgbench_run "$v" --rate "$rate" -l --log-prefix "$dir/lat_$v"
		sql "CHECKPOINT" >/dev/null
	done
done
echo "   (a variant whose transactions fell more than 10% behind the rate was over its"
echo "   capacity, and its latencies grew with the queue: rerun with a lower RATE)"
printf '   %-19s %10s %10s %10s %8s\n' variant "p50 ms" "p99 ms" "max ms" "tps"
for v in $variants; do
	# the third field is the latency in microseconds ("skipped" never
	# appears: no --latency-limit)
	cat "$dir"/lat_"$v".* | awk '{ print $3 }' | sort -n |
		awk -v v="$v" -v span=$((seconds * rounds)) -v rate="$rate" '
		{ a[NR] = $1 }
		function pct(p,   i) { i = int(p * NR); if (i < p * NR) i++; if (i < 1) i = 1; return a[i] / 1000 }
		END {
			printf "   %-19s %10.2f %10.2f %10.2f %8.0f%s\n", v, pct(0.5), pct(0.99), a[NR] / 1000,
				NR / span, (NR / span < 0.9 * rate ? "   fell behind" : "")
		}'
done

# 2b: WAL per new key with the registry and the minimal handler's table
# holding the same rows.  In 1 the registry also holds what the other
# extension variants wrote (defer_claim's and the by-hand statements'
# records, in the same table and index), so its index has several times the
# minimal handler's pages, and since a run right after a checkpoint writes a
# full-page image of nearly every leaf it touches, that inflates the
# default's full-page images for a reason no user has.  Here both tables are
# cut back to their 100000 replay keys, and the two variants run in turn.
pgoptions=""
echo
echo "==> WAL per new key, the registry and the minimal handler's keys holding the same 100000 rows:" \
	"synchronous_commit = off, $rounds rounds"
psql_cluster -c "CREATE TABLE bench_keep_ext AS SELECT * FROM idempotency.registry
		WHERE key OPERATOR(pg_catalog.~~) 'r%' AND scope = ''" \
	-c "CREATE TABLE bench_keep_hand AS SELECT * FROM bench_hand_keys WHERE key LIKE 'r%'" \
	-c "TRUNCATE idempotency.registry, bench_hand_keys, bench_charges_ext, bench_charges_hand" \
	-c "INSERT INTO idempotency.registry SELECT * FROM bench_keep_ext" \
	-c "INSERT INTO bench_hand_keys SELECT * FROM bench_keep_hand" \
	-c "DROP TABLE bench_keep_ext, bench_keep_hand" -c "CHECKPOINT" >/dev/null
declare -A eruns exacts ewal efpi
for round in $(seq "$rounds"); do
	order="execute_ext execute_hand"
	[ $((round % 2)) -eq 0 ] && order="execute_hand execute_ext"
	for v in $order; do
		measured_run "$v"
		eruns[$v]="${eruns[$v]:-} $run_tps"
		exacts[$v]=$((${exacts[$v]:-0} + run_xacts))
		ewal[$v]=$((${ewal[$v]:-0} + wal))
		efpi[$v]=$((${efpi[$v]:-0} + fpi))
	done
done
printf '   %-19s %10s %7s %7s %7s   %s\n' variant "median tps" all records FPI "runs (tps)"
for v in execute_ext execute_hand; do
	wal_row "$v" "${eruns[$v]}" "${exacts[$v]}" "${ewal[$v]}" "${efpi[$v]}"
done
printf '   %-50s %5sx\n' "WAL per new key, default / minimal, equal tables" \
	"$(ratio "$(awk -v a="${ewal[execute_ext]}" -v n="${exacts[execute_ext]}" 'BEGIN { print a / n }')" \
		"$(awk -v a="${ewal[execute_hand]}" -v n="${exacts[execute_hand]}" 'BEGIN { print a / n }')")"
printf '   %-50s %5sx\n' "execute, default / minimal, equal tables" \
	"$(ratio "$(median ${eruns[execute_ext]})" "$(median ${eruns[execute_hand]})")"

# 4: a registry of BIG_REGISTRY live records (3 million by default), and as
# many keys in the minimal handler's table, loaded in one statement each and
# checkpointed, without a VACUUM or ANALYZE since: what a service sees after
# a busy day, the indexes far larger than the empty run's
big=${BIG_REGISTRY:-3000000}
if [ "$big" -gt 0 ]; then
	pgoptions=""
	echo
	echo "==> loading $big live records into the registry and into the minimal handler's keys"
	psql_cluster -c "INSERT INTO idempotency.registry (owner, scope, key, status, attempt, fingerprint,
			response, created_at, updated_at, expires_at)
		SELECT owner, scope, 'big' || i, status, attempt, fingerprint, response, created_at,
			updated_at, now() + interval '1 day'
		  FROM idempotency.registry, generate_series(1, $big) AS i WHERE key = 'r1'" \
		-c "INSERT INTO bench_hand_keys (key, status, response, expires_at)
		SELECT 'big' || i, 'completed', '{\"charged\": 1}', now() + interval '1 day'
		  FROM generate_series(1, $big) AS i" -c "CHECKPOINT" >/dev/null
	echo "==> throughput with $big records: synchronous_commit = off, $rounds rounds"
	declare -A bruns bxacts bwal bfpi
	for round in $(seq "$rounds"); do
		for v in execute_ext execute_hand; do
			measured_run "$v"
			bruns[$v]="${bruns[$v]:-} $run_tps"
			bxacts[$v]=$((${bxacts[$v]:-0} + run_xacts))
			bwal[$v]=$((${bwal[$v]:-0} + wal))
			bfpi[$v]=$((${bfpi[$v]:-0} + fpi))
		done
	done
	printf '   %-19s %10s %7s %7s %7s   %s\n' variant "median tps" all records FPI "runs (tps)"
	for v in execute_ext execute_hand; do
		wal_row "$v" "${bruns[$v]}" "${bxacts[$v]}" "${bwal[$v]}" "${bfpi[$v]}"
	done
	printf '   %-50s %5sx\n' "default execute, $big records / empty registry" \
		"$(ratio "$(median ${bruns[execute_ext]})" "${tps[execute_ext]}")"
	printf '   %-50s %5sx\n' "minimal hand-written, $big keys / empty table" \
		"$(ratio "$(median ${bruns[execute_hand]})" "${tps[execute_hand]}")"
	printf '   %-50s %5sx\n' "default execute / minimal, both with $big" \
		"$(ratio "$(median ${bruns[execute_ext]})" "$(median ${bruns[execute_hand]})")"
fi
