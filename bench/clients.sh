#!/usr/bin/env bash
#
# bench/clients.sh: the Node package (clients/node) beside what people
# install instead, serving the same endpoint in one run:
#
#   POST /payments, JSON body {amount}, an Idempotency-Key header; the
#   handler inserts one payment row into PostgreSQL and answers 201 with
#   {id, key, amount}
#
#   ours      pg-idempotency's Express middleware, required by its path
#   ourssql   the same with the handler's write as a SQL function, which
#             idempotent_call runs under the key in one statement
#   expidem   express-idempotency 1.0.6 + express-idempotency-redis-adapter
#   nodeidem  @node-idempotency/core 1.0.11 + storage-adapter-redis (its
#             Express wrapper is not on the registry: a few lines of glue)
#   dbos      a DBOS Transact 4.27.6 workflow (the last SDK with a published
#             node-postgres data source), the key as its workflow ID, the
#             insert in a transaction step (@dbos-inc/drizzle-datasource)
#   hand      Express and node-postgres by hand: a keys table claimed with
#             INSERT ... ON CONFLICT DO NOTHING, the insert and an UPDATE
#             with the answer in one transaction; a retry reads the answer
#   floor     not idempotent, for phases 1 and 2 only: one statement per
#             request in autocommit that returns the key's stored answer or
#             pays and stores it, the least a server that keeps its answers
#             in PostgreSQL sends (concurrent duplicates all pay)
#
# bench/clients/server.js has each; bench/clients/load.js drives them.  One
# throwaway cluster with synchronous_commit = on (durable commits) and
# TCP on 127.0.0.1, one Redis (no persistence, as such middleware is
# usually run: its writes are not durable, PostgreSQL's are), every server
# one Node process (the system's node) with 10 connections to PostgreSQL,
# all on the same 2 cores as the load driver, PostgreSQL and Redis.  The npm
# packages are the versions bench/clients/package-lock.json pins, installed
# with npm ci into the cluster's directory.
#
# 1. Throughput and latency: CLIENTS keep-alive connections, each sending
#    its next request when the last is answered, for SECONDS; new keys
#    (execute) and keys answered before (replay, 2000 per variant); the
#    variants in turn, ROUNDS times over (reversed every other round), every
#    run after a CHECKPOINT; each variant's median requests/s and p99, and
#    the ratios to ours.  The p99 is that of a saturated closed loop.
# 2. What a request costs: statements sent to PostgreSQL (pg_stat_statements,
#    top level, every database), Redis commands, and the CPU time of the
#    Node server, of PostgreSQL's processes and of Redis (/proc) per
#    answered request, in one more run of each (3 s).
# 3. Correctness, per variant: concurrent retries (200 keys, CLIENTS
#    requests with each key sent at the same moment, every request retried
#    while it gets a 409, a 5xx or no answer), and a killed server (three
#    times: 32 connections of new keys, SIGKILL after 1.5 s, the server
#    started again, every request that had no answer retried and every
#    answered key replayed); then counted in PostgreSQL and in the answers:
#    duplicates (keys with more than one payment row), wrong replays (a 2xx
#    body unlike the key's first 2xx body, or naming no committed payment of
#    the key) and unresolved requests (no 2xx after 60 tries, 100 ms apart),
#    and of those the ones whose payment committed.
#
# Run as root on Debian 12:
#   bash bench/clients.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS]
# Defaults: 6 s, 8 connections, 5 rounds: about a quarter of an hour.
# VARIANTS="ours ..." runs those alone (ours among them).
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-6}
clients=${2:-8}
rounds=${3:-5}
variants=${VARIANTS:-ours ourssql expidem nodeidem dbos hand floor}
case " $variants " in *" ours "*) ;; *) echo "VARIANTS must name ours: the ratios are to it" >&2; exit 2 ;; esac
# the variants that claim keys, for the correctness phase
idempotent=$(for v in $variants; do [ "$v" = floor ] || echo "$v"; done | tr '\n' ' ')
replay_keys=2000

# shellcheck disable=SC2046
install_packages redis-server redis-tools curl jq procps $(client_packages | tr ' ' '\n' | grep -x -e nodejs -e npm)
bench_prepare "synchronous_commit = on" "listen_addresses = '127.0.0.1'" "max_connections = 200" \
	"shared_preload_libraries = 'idempotency, pg_stat_statements'" "shared_buffers = 512MB" \
	"max_wal_size = 4GB" "idempotency.cleanup_interval = 0"
psql_cluster -c "CREATE DATABASE bench" -c "CREATE DATABASE dbos_sys" >/dev/null
psql_cluster -d bench <"$top/bench/clients/setup.sql" >/dev/null

# the apps and their packages in the cluster's directory, which start_cluster's
# exit trap removes
app="$cluster/clients"
mkdir "$app"
cp "$top"/bench/clients/{package.json,package-lock.json,server.js,load.js} "$app"/
echo "==> npm ci ($(node --version), npm $(npm --version))"
(cd "$app" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)

rport=$((port + 10))
as_postgres redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
	--daemonize yes --pidfile "$cluster/redis.pid" --logfile "$cluster/redis.log" >/dev/null
cluster_trap=$(trap -p EXIT | sed "s/^trap -- '//; s/' EXIT\$//")
# shellcheck disable=SC2064
trap "stop_servers; kill \$(cat '$cluster/redis.pid' 2>/dev/null) 2>/dev/null || true; $cluster_trap" EXIT
for _ in $(seq 50); do
	redis-cli -p "$rport" ping >/dev/null 2>&1 && break
	sleep 0.1
done

export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=bench NODE_ENV=production
export REDIS_URL="redis://127.0.0.1:$rport" PG_IDEMPOTENCY="$top/clients/node"
export DBOS_SYSTEM_DATABASE_URL="postgresql://postgres@127.0.0.1:$port/dbos_sys"
declare -A sport pid
i=1
for v in $variants; do
	sport[$v]=$((port + i))
	i=$((i + 1))
done

# start_server VARIANT: its server in the background, once it answers
start_server() {
	PORT=${sport[$1]} node "$app/server.js" "$1" >>"$app/$1.log" 2>&1 &
	pid[$1]=$!
	for _ in $(seq 300); do
		curl -sf "http://127.0.0.1:${sport[$1]}/health" >/dev/null 2>&1 && return 0
		if ! kill -0 "${pid[$1]}" 2>/dev/null; then
			echo "the $1 server exited:" >&2
			cat "$app/$1.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "the $1 server did not start" >&2
	exit 1
}

# stop_servers: every server this script started and that still runs
stop_servers() {
	local v
	for v in "${!pid[@]}"; do
		kill "${pid[$v]}" 2>/dev/null || true
		wait "${pid[$v]}" 2>/dev/null || true
		unset "pid[$v]"
	done
}

# load MODE ARG...: load.js, failing on its errors
load() {
	local out
	if ! out=$(node "$app/load.js" "$@" 2>"$app/load.err"); then
		echo "load.js $* failed:" >&2
		cat "$app/load.err" >&2
		exit 1
	fi
	echo "$out"
}

# field JSON NAME...: the named fields of a JSON object, on one line
field() {
	local json=$1
	shift
	jq -r "[$(printf '.%s,' "$@" | sed 's/,$//')] | map(tostring) | join(\" \")" <<<"$json"
}

for v in $variants; do
	start_server "$v"
done
echo "==> loading $replay_keys answered keys per variant"
for v in $variants; do
	load preload "http://127.0.0.1:${sport[$v]}" "$replay_keys" "$clients" >/dev/null
done
psql_cluster -d bench -c "VACUUM ANALYZE" -c CHECKPOINT >/dev/null

# 1: throughput and p99, interleaved
runs=""
for v in $variants; do runs="$runs execute_$v replay_$v"; done
reversed=$(for r in $runs; do echo "$r"; done | tac | tr '\n' ' ')
echo "==> throughput: $clients connections, $seconds s per run, $rounds rounds, synchronous_commit = on"
declare -A rps p99 failed
for round in $(seq "$rounds"); do
	order=$runs
	[ $((round % 2)) -eq 0 ] && order=$reversed
	for r in $order; do
		path=${r%%_*} v=${r#*_}
		arg=$replay_keys
		[ "$path" = execute ] && arg="$v-x$round"
		out=$(load run "http://127.0.0.1:${sport[$v]}" "$seconds" "$clients" "$path" "$arg")
		read -r t p f <<<"$(field "$out" rps p99 failed)"
		rps[$r]="${rps[$r]:-} $t"
		p99[$r]="${p99[$r]:-} $p"
		failed[$r]=$((${failed[$r]:-0} + f))
		[ "$f" -eq 0 ] || echo "   $r round $round: $f requests without a 2xx answer: $(field "$out" statuses)"
		psql_cluster -c CHECKPOINT >/dev/null
	done
done

declare -A mrps mp99
printf '   %-17s %9s %9s   %s\n' run "median/s" "p99 ms" "runs (requests/s; p99 ms)"
for r in $runs; do
	# shellcheck disable=SC2086
	mrps[$r]=$(median ${rps[$r]})
	# shellcheck disable=SC2086
	mp99[$r]=$(median ${p99[$r]})
	printf '   %-17s %9.0f %9.1f  %s;%s\n' "$r" "${mrps[$r]}" "${mp99[$r]}" \
		"$(for t in ${rps[$r]}; do printf ' %.0f' "$t"; done)" \
		"$(for t in ${p99[$r]}; do printf ' %.1f' "$t"; done)"
done

# procs VARIANT: the processes that serve it: its Node server, the
# postmaster and its children, Redis
procs() {
	local pm
	pm=$(head -n 1 "$cluster/data/postmaster.pid")
	# shellcheck disable=SC2046
	echo "${pid[$1]}" "$pm" $(pgrep -P "$pm") "$(cat "$cluster/redis.pid")"
}

# ticks PID...: each process's user and system CPU time, in clock ticks
ticks() {
	local p
	for p in "$@"; do
		# the fields after the command's name, which has no blanks here
		if [ -r "/proc/$p/stat" ]; then
			awk -v p="$p" '{ print p, $14 + $15 }' "/proc/$p/stat"
		fi
	done
}

# each variant's requests/s over ours, of the medians and in each round (a
# round's variants ran within minutes of each other: its ratio shows how far
# the machine's load moved between rounds)
echo "==> requests/s, ratios to ours: of the medians (rounds)"
for v in $variants; do
	[ "$v" = ours ] && continue
	for path in execute replay; do
		printf '   %-8s %-9s %5sx  (%s)\n' "$path" "$v" \
			"$(ratio "${mrps[${path}_$v]}" "${mrps[${path}_ours]}")" \
			"$(awk -v a="${rps[${path}_$v]}" -v b="${rps[${path}_ours]}" 'BEGIN {
				n = split(a, x, " "); split(b, y, " ")
				for (i = 1; i <= n; i++) printf "%s%.2f", (i > 1 ? " " : ""), x[i] / y[i] }')"
	done
done

# 2: statements, Redis commands and CPU time per answered request
echo
echo "==> per request: one more 3 s run of each; CPU time per answered request, in ms, of the"
echo "    Node server, PostgreSQL (postmaster and backends) and Redis"
hz=$(getconf CLK_TCK)
declare -A stmts rcmds cpu
for r in $runs; do
	path=${r%%_*} v=${r#*_}
	arg=$replay_keys
	[ "$path" = execute ] && arg="$v-s"
	psql_cluster -d bench -c "SELECT pg_stat_statements_reset()" >/dev/null
	redis-cli -p "$rport" config resetstat >/dev/null
	# shellcheck disable=SC2046
	before=$(ticks $(procs "$v"))
	out=$(load run "http://127.0.0.1:${sport[$v]}" 3 "$clients" "$path" "$arg")
	# shellcheck disable=SC2046
	after=$(ticks $(procs "$v"))
	n=$(field "$out" n)
	# each process's ticks since before (all of them for a backend started
	# since), the first line the Node server's, the last Redis's
	cpu[$r]=$(awk -v hz="$hz" -v n="$n" -v node="${pid[$v]}" -v redis="$(cat "$cluster/redis.pid")" '
		NR == FNR { b[$1] = $2; next }
		{ d = ($2 - b[$1]) * 1000 / hz / n
		  if ($1 == node) nd += d; else if ($1 == redis) rd += d; else pd += d }
		END { printf "%.2f %.2f %.2f", nd, pd, rd }' <(echo "$before") <(echo "$after"))
	s=$(psql_cluster -d bench -Atc "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
		WHERE query NOT LIKE '%pg_stat_statements%'")
	c=$(redis-cli -p "$rport" info stats | sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p')
	stmts[$r]=$(awk -v s="$s" -v n="$n" 'BEGIN { printf "%.1f", s / n }')
	rcmds[$r]=$(awk -v c="$c" -v n="$n" 'BEGIN { printf "%.1f", c / n }')
	read -r cn cp cr <<<"${cpu[$r]}"
	printf '   %-17s %5s statements, %4s Redis commands; CPU: Node %5s, PostgreSQL %5s, Redis %5s\n' \
		"$r" "${stmts[$r]}" "${rcmds[$r]}" "$cn" "$cp" "$cr"
done

# 3: correctness
echo
echo "==> concurrent retries: 200 keys, $clients requests with each at the same moment"
declare -A conc killed
for v in $idempotent; do
	conc[$v]=$(load concurrent "http://127.0.0.1:${sport[$v]}" "payments_$v" 200 "$clients" "$v-c")
	echo "   $v: ${conc[$v]}"
done
echo "==> a killed server: 3 times, 32 connections of new keys, SIGKILL after 1.5 s"
for v in $idempotent; do
	# load.js starts and kills this variant's server itself
	kill "${pid[$v]}"
	wait "${pid[$v]}" 2>/dev/null || true
	unset "pid[$v]"
	killed[$v]=$(SERVER_LOG="$app/$v.log" PORT=${sport[$v]} load kill "http://127.0.0.1:${sport[$v]}" \
		"payments_$v" 32 3 "$v-k" node "$app/server.js" "$v")
	echo "   $v: ${killed[$v]}"
done

echo
echo "==> summary: medians of $rounds rounds, $clients connections, synchronous_commit = on," \
	"2 cores for everything; ratios to ours"
printf '   %-9s %15s %15s %15s %15s %11s %11s\n' variant "execute req/s" "execute p99" \
	"replay req/s" "replay p99" "stmts ex/re" "Redis ex/re"
for v in $variants; do
	printf '   %-9s %7.0f %6sx %7.1fms %5sx %7.0f %6sx %7.1fms %5sx %5s/%-5s %5s/%-5s\n' "$v" \
		"${mrps[execute_$v]}" "$(ratio "${mrps[execute_$v]}" "${mrps[execute_ours]}")" \
		"${mp99[execute_$v]}" "$(ratio "${mp99[execute_$v]}" "${mp99[execute_ours]}")" \
		"${mrps[replay_$v]}" "$(ratio "${mrps[replay_$v]}" "${mrps[replay_ours]}")" \
		"${mp99[replay_$v]}" "$(ratio "${mp99[replay_$v]}" "${mp99[replay_ours]}")" \
		"${stmts[execute_$v]}" "${stmts[replay_$v]}" "${rcmds[execute_$v]}" "${rcmds[replay_$v]}"
done
echo
printf '   %-9s | %-38s | %-48s\n' "" "concurrent retries (200 keys)" "killed server (3 kills, then retries)"
printf '   %-9s | %10s %10s %16s | %9s %10s %10s %16s\n' variant duplicates wrong "unresolved (paid)" \
	"no answer" duplicates wrong "unresolved (paid)"
for v in $idempotent; do
	read -r cd cw cu cp <<<"$(field "${conc[$v]}" duplicates wrong_replays unresolved unresolved_paid)"
	read -r kn kd kw ku kp <<<"$(field "${killed[$v]}" no_answer_at_kill duplicates wrong_replays \
		unresolved unresolved_paid)"
	printf '   %-9s | %10s %10s %16s | %9s %10s %10s %16s\n' "$v" "$cd" "$cw" "$cu ($cp)" "$kn" "$kd" "$kw" \
		"$ku ($kp)"
done
echo "   (duplicates: keys with more than one payment row; wrong: 2xx answers unlike the key's first,"
echo "   or naming no committed payment of the key; unresolved: requests with no 2xx answer after 60"
echo "   tries, paid: of those, the ones whose key's payment committed; no answer: requests the kills"
echo "   cut off)"
