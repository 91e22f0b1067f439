#!/usr/bin/env bash
#
# bench/inbox.sh: inbox_receive / inbox_receive_batch against the
# hand-written INSERT ... ON CONFLICT DO NOTHING RETURNING a consumer would
# write (a table with a (consumer, message_id) primary key), side by side in
# one run, for batches of 1, 100 and 1000 new message ids.  Reported as
# messages per second (median of ROUNDS interleaved runs).
# Run as root on Debian 12:
#   bash bench/inbox.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS] [LOCALE]
# LOCALE is the database's locale, C.UTF-8 by default as in registry.sh (the
# hand-written table's text columns take it; the inbox's are COLLATE "C").
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-10}
clients=${2:-2}
rounds=${3:-3}
export CLUSTER_LOCALE=${4:-C.UTF-8}

bench_prepare "synchronous_commit = off" "shared_buffers = 1GB" "max_wal_size = 8GB" \
	"idempotency.cleanup_interval = 0"
psql_cluster -c "CREATE EXTENSION idempotency" -c "CREATE TABLE hand_inbox (
	consumer text NOT NULL, message_id text NOT NULL, received_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (consumer, message_id))" -c "CREATE TABLE plain_inbox (LIKE hand_inbox INCLUDING ALL)" >/dev/null

dir=$(mktemp -d /tmp/idempotency-bench.XXXXXX)
chmod 755 "$dir"
# every request brings new ids: a random batch number, then 1..N
for n in 1 100 1000; do
	ids="SELECT :b || '-' || g FROM pg_catalog.generate_series(1, $n) AS g"
	printf '\\set b random(1, 1000000000000)\nSELECT count(*) FROM idempotency.inbox_receive_batch(%s, ARRAY(%s));\n' \
		"'c'" "$ids" >"$dir/ext_$n.sql"
	printf '\\set b random(1, 1000000000000)\nINSERT INTO hand_inbox (consumer, message_id) %s ON CONFLICT DO NOTHING RETURNING message_id;\n' \
		"$(echo "$ids" | sed "s/^SELECT /SELECT 'c', /")" >"$dir/hand_$n.sql"
done
printf '\\set b random(1, 1000000000000)\nSELECT idempotency.inbox_receive(%s, :b::text);\n' "'c'" >"$dir/single_1.sql"
# the ceiling: the same 1000 new rows by a plain INSERT into a table with only
# a primary key.  Not an inbox (a redelivery is an error), but no inbox that
# writes one indexed row per id can take a batch faster than this.
printf '\\set b random(1, 1000000000000)\nINSERT INTO plain_inbox (consumer, message_id) %s;\n' \
	"$(echo "SELECT :b || '-' || g FROM pg_catalog.generate_series(1, 1000) AS g" | sed "s/^SELECT /SELECT 'c', /")" >"$dir/plain_1000.sql"
chmod 644 "$dir"/*.sql

variants="single_1 ext_1 hand_1 ext_100 hand_100 ext_1000 hand_1000 plain_1000"
declare -A runs
for r in $(seq "$rounds"); do
	for v in $variants; do
		t=$(as_postgres pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
			-h "$cluster" -p "$port" -f "$dir/$v.sql" postgres 2>/dev/null | sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
		runs[$v]="${runs[$v]:-} $t"
		psql_cluster -c "CHECKPOINT" >/dev/null
	done
done
rm -rf "$dir"

declare -A msgs
echo "==> messages per second ($clients clients, $seconds s per run, $rounds rounds, medians, locale $CLUSTER_LOCALE)"
for v in $variants; do
	n=${v##*_}
	t=$(median ${runs[$v]})
	msgs[$v]=$(awk -v t="$t" -v n="$n" 'BEGIN { printf "%.0f", t * n }')
	printf '   %-10s %10s msgs/s   (tps runs:%s)\n' "$v" "${msgs[$v]}" "${runs[$v]}"
done
echo
echo "==> ratios"
echo "   inbox_receive (one id) / hand-written INSERT of one:   $(ratio "${msgs[single_1]}" "${msgs[hand_1]}")x"
echo "   batch of 100, extension / hand-written:                $(ratio "${msgs[ext_100]}" "${msgs[hand_100]}")x"
echo "   batch of 1000, extension / hand-written:               $(ratio "${msgs[ext_1000]}" "${msgs[hand_1000]}")x"
echo "   batch of 1000 / one id per call (inbox_receive):       $(ratio "${msgs[ext_1000]}" "${msgs[single_1]}")x"
echo "   ceiling: plain INSERT of 1000 new rows / one id per call: $(ratio "${msgs[plain_1000]}" "${msgs[single_1]}")x"
echo "   batch of 1000, extension / that ceiling:               $(ratio "${msgs[ext_1000]}" "${msgs[plain_1000]}")x"
