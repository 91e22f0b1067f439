#!/usr/bin/env bash
#
# bench/portable.sh: the portable edition beside the C edition and the
# handlers a user would otherwise write, in one run, as ratios.
#
#   execute path (a new key each request: claim + business INSERT + answer)
#     hand      the minimal hand-written handler (bench/registry_setup.sql)
#     feq       the feature-equivalent hand-written handler
#     c         the C edition, default mode (bench_ext)
#     portable  the portable edition, the same handler (bench_ext, in a
#               database where the database owner, not a superuser,
#               installed the portable script)
#   replay path (a key already completed: return the stored answer)
#     the same four
#
# Two servers of the same build and settings, run in turn: one loads the C
# library, for the C edition and the hand-written handlers; the portable
# edition's has no library to load, as on a managed service (with the
# library loaded, its settings and hooks would be there for the portable
# edition too: a replay cost a tenth more).  Each handler is one server-side call per
# request, driven by pgbench with prepared statements, synchronous_commit
# off (the figures compare CPU and WAL, not the disk's flushes).  The
# variants run in turn, ROUNDS times over (reversed every other round), each
# reporting its median; every run starts after a CHECKPOINT.  Run as root
# on Debian 12:
#   bash bench/portable.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS]
# Defaults: 5 s per run, 2 clients, 3 rounds: about two minutes.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-5}
clients=${2:-2}
rounds=${3:-3}

bench_prepare "synchronous_commit = off" "shared_buffers = 512MB" "max_wal_size = 4GB" \
	"autovacuum = off" "idempotency.cleanup_interval = 0"

script=$(make -s -C "$top" portable | tail -n 1)
# the portable edition's server: the same settings, without the library
pport=$((port + 1))
as_postgres initdb -D "$cluster/portable" -A trust -E UTF8 --locale=C >/dev/null
sed -e "s/^shared_preload_libraries = .*//" -e "s/^port = .*/port = $pport/" \
	"$cluster/data/postgresql.conf" >"$cluster/portable/postgresql.conf"
as_postgres pg_ctl -D "$cluster/portable" -l "$cluster/portable.log" -w start >/dev/null
trap 'as_postgres pg_ctl -D "$cluster/portable" -m immediate stop >/dev/null 2>&1 || true
	as_postgres pg_ctl -D "$cluster/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$cluster"' EXIT
echo "==> loading the handlers and 100000 completed keys per replay variant"
# the C edition and the hand-written handlers in database postgres, as
# bench/registry.sh loads them
psql_cluster <"$top/bench/registry_setup.sql" >/dev/null
# the portable edition in its own database, installed by its owner, with
# the same handler and completed keys
psql_cluster -p "$pport" -c "CREATE ROLE portable_owner LOGIN" -c "CREATE DATABASE portable OWNER portable_owner" >/dev/null
as_postgres psql -X -q -v ON_ERROR_STOP=1 -h "$cluster" -p "$pport" -U portable_owner -d portable \
	--single-transaction -f "$script" >/dev/null
as_postgres psql -X -q -v ON_ERROR_STOP=1 -h "$cluster" -p "$pport" -U portable_owner -d portable <<'EOF' >/dev/null
-- the owner runs the requests too, as its own application role (the C
-- edition's run as a superuser, whose records are its own)
SELECT idempotency.grant_usage('portable_owner');
CREATE TABLE bench_charges_ext (key text PRIMARY KEY, amount int NOT NULL);
CREATE FUNCTION bench_ext(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	b record;
	result jsonb;
	status text;
BEGIN
	b := idempotency.idempotent_begin(k, request => jsonb_build_object('amount', amount));
	IF b.outcome = 'replay' THEN
		RETURN b.response;
	ELSIF b.outcome = 'in_progress' THEN
		RETURN '{"status": "in progress"}';
	END IF;
	INSERT INTO bench_charges_ext VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	status := idempotency.idempotent_finish(k, result, attempt => b.attempt);
	RETURN result;
END $$;
SELECT count(*) FROM (SELECT bench_ext('r' || g, 1) FROM generate_series(1, 100000) AS g) AS loaded;
ANALYZE bench_charges_ext, idempotency.registry;
EOF

dir="$cluster/bench"
mkdir "$dir"
variants=""
for f in hand feq c portable; do
	fn=bench_$f
	[ $f = c ] || [ $f = portable ] && fn=bench_ext
	printf '\\set id random(1, 1000000000000000)\nSELECT %s(:client_id || %s || :id, 1);\n' \
		"$fn" "'-'" >"$dir/execute_$f.sql"
	printf '\\set id random(1, 100000)\nSELECT %s(%s || :id, 1);\n' "$fn" "'r'" >"$dir/replay_$f.sql"
	variants="$variants execute_$f replay_$f"
done
chown -R postgres:postgres "$dir"

# run VARIANT: one pgbench run, in the variant's database; sets run_tps
run() {
	local db=postgres user=postgres p=$port
	[[ $1 == *_portable ]] && db=portable user=portable_owner p=$pport
	if ! as_postgres pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
		-h "$cluster" -p "$p" -U "$user" -f "$dir/$1.sql" "$db" >"$dir/out" 2>&1; then
		echo "pgbench failed on $1:" >&2
		cat "$dir/out" >&2
		exit 1
	fi
	run_tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$dir/out")
	psql_cluster -p "$p" -c CHECKPOINT >/dev/null
}

echo "==> throughput: $clients clients, $seconds s per run, $rounds rounds, synchronous_commit = off"
reversed=$(for v in $variants; do echo "$v"; done | tac | tr '\n' ' ')
declare -A runs
for round in $(seq "$rounds"); do
	order=$variants
	[ $((round % 2)) -eq 0 ] && order=$reversed
	for v in $order; do
		run "$v"
		runs[$v]="${runs[$v]:-} $run_tps"
	done
done

declare -A tps
printf '   %-18s %10s   %s\n' variant "median tps" "runs (tps)"
for v in $variants; do
	tps[$v]=$(median ${runs[$v]})
	printf '   %-18s %10.0f  %s\n' "$v" "${tps[$v]}" "$(for t in ${runs[$v]}; do printf ' %.0f' "$t"; done)"
done
echo "==> ratios (medians)"
for path in execute replay; do
	for other in c hand feq; do
		printf '   %-8s portable / %-5s %s\n' "$path" "$other" \
			"$(ratio "${tps[${path}_portable]}" "${tps[${path}_$other]}")"
	done
done
