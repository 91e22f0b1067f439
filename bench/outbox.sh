#!/usr/bin/env bash
#
# bench/outbox.sh: the transactional outbox against what a producer would
# write by hand, side by side in one run, reported as ratios (median of
# ROUNDS interleaved runs):
#
# - sending: outbox_send with an ordering key, and without one, against a
#   plain INSERT into a hand-written outbox table (bigserial id, one index).
#   Each is one statement in its own transaction, keys drawn from 1000.
# - relaying: messages per second delivered from a backlog of MESSAGES
#   messages over 1000 ordering keys by CLIENTS relays in batches of 100,
#   against the hand-written FOR UPDATE SKIP LOCKED relay with the same
#   per-key guarantee (the oldest undelivered message of each key only, the
#   next once it is marked delivered), which locks a batch, "publishes" and
#   marks it delivered in one transaction.  The extension's relay is timed
#   both ways: fetch and acknowledgement in one transaction (like the
#   hand-written one), and as its protocol intends, fetch (the lease
#   commits) then acknowledgement, two transactions per batch.
# - relaying without statistics: the extension's two relays again, from the
#   same backlog in an outbox that was never analyzed (a burst, or relays
#   that were down, before autovacuum got to the table): the extension is
#   created again, the backlog sent, and the table vacuumed but not
#   analyzed (autovacuum is off for it), so the planner has only its
#   default guesses.  Reported as a ratio to the same relay on the analyzed
#   table.
#
# Note: the hand-written relay orders a key's messages by bigserial id,
# which is the order of the INSERTs, not of the commits: two overlapping
# transactions sending on one key can commit out of order and be relayed
# so.  outbox_send serialises them (the second waits for the first); this
# benchmark sends each message in its own short transaction, so the two
# guarantees differ only in that cost.
#
# Run as root on Debian 12:
#   bash bench/outbox.sh [SECONDS-PER-RUN] [CLIENTS] [ROUNDS] [MESSAGES]
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

seconds=${1:-10}
clients=${2:-2}
rounds=${3:-3}
messages=${4:-300000}

bench_prepare "synchronous_commit = off" "shared_buffers = 1GB" "max_wal_size = 8GB" \
	"idempotency.cleanup_interval = 0"
psql_cluster -c "CREATE EXTENSION idempotency" -c "CREATE TABLE hand_outbox (
	id bigserial PRIMARY KEY,
	ordering_key text NOT NULL,
	topic text NOT NULL,
	payload jsonb NOT NULL,
	headers jsonb,
	sent_at timestamptz NOT NULL DEFAULT now(),
	delivered_at timestamptz)" \
	-c "CREATE INDEX hand_outbox_pending ON hand_outbox (id) WHERE delivered_at IS NULL" \
	-c "CREATE INDEX hand_outbox_key_pending ON hand_outbox (ordering_key, id) WHERE delivered_at IS NULL" >/dev/null

dir=$(mktemp -d /tmp/idempotency-bench.XXXXXX)
chmod 755 "$dir"

# sending
cat >"$dir/send_ext.sql" <<'EOF'
\set k random(1, 1000)
SELECT idempotency.outbox_send('orders', '{"order": 42, "status": "packed"}', 'key-' || :k);
EOF
cat >"$dir/send_ext_unordered.sql" <<'EOF'
SELECT idempotency.outbox_send('orders', '{"order": 42, "status": "packed"}');
EOF
cat >"$dir/send_hand.sql" <<'EOF'
\set k random(1, 1000)
INSERT INTO hand_outbox (ordering_key, topic, payload) VALUES ('key-' || :k, 'orders', '{"order": 42, "status": "packed"}');
EOF

# relaying: one batch of 100 per transaction (pgbench counts transactions)
cat >"$dir/relay_ext_1tx.sql" <<'EOF'
SELECT idempotency.outbox_ack(b.attempt, b.ids)
  FROM (SELECT max(f.attempt) AS attempt, array_agg(f.message_id) AS ids
		  FROM idempotency.outbox_fetch(100, '1 minute') AS f) AS b
 WHERE b.attempt IS NOT NULL;
EOF
cat >"$dir/relay_ext_2tx.sql" <<'EOF'
SELECT max(f.attempt) AS att, array_agg(f.message_id) AS ids FROM idempotency.outbox_fetch(100, '1 minute') AS f \gset
SELECT idempotency.outbox_ack(NULLIF(:att::text, '')::int8, NULLIF(:ids::text, '')::text[]) WHERE :att::text <> '';
EOF
cat >"$dir/relay_hand.sql" <<'EOF'
WITH batch AS (
	SELECT h.id FROM hand_outbox AS h
	 WHERE h.delivered_at IS NULL
	   AND NOT EXISTS (SELECT FROM hand_outbox AS p
					    WHERE p.ordering_key = h.ordering_key AND p.id < h.id AND p.delivered_at IS NULL)
	 ORDER BY h.id LIMIT 100 FOR UPDATE SKIP LOCKED)
UPDATE hand_outbox AS o SET delivered_at = now()
  FROM batch WHERE o.id = batch.id
RETURNING o.id, o.ordering_key, o.topic, o.payload, o.headers;
EOF
chmod 644 "$dir"/*.sql

# run VARIANT: pgbench for $seconds; prints the number of transactions
run() {
	as_postgres pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
		-h "$cluster" -p "$port" -f "$dir/$1.sql" postgres 2>/dev/null |
		sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p'
}

# a backlog of $messages messages in both outboxes, keys spread over 1000
load_backlog() {
	psql_cluster -c "TRUNCATE idempotency.outbox, hand_outbox" \
		-c "SELECT count(idempotency.outbox_send('orders', jsonb_build_object('n', g), 'key-' || (hashint4(g) & 1023) % 1000))
			  FROM generate_series(1, $messages) AS g" \
		-c "INSERT INTO hand_outbox (ordering_key, topic, payload)
			SELECT 'key-' || (hashint4(g) & 1023) % 1000, 'orders', jsonb_build_object('n', g)
			  FROM generate_series(1, $messages) AS g" \
		-c "VACUUM ANALYZE idempotency.outbox" -c "VACUUM ANALYZE hand_outbox" -c "CHECKPOINT" >/dev/null
}

# the same backlog in an outbox that was never analyzed: the extension
# created again, autovacuum off for the table, which is vacuumed (as the
# analyzed one is) but not analyzed
load_backlog_unanalyzed() {
	psql_cluster -c "DROP EXTENSION idempotency" -c "CREATE EXTENSION idempotency" \
		-c "ALTER TABLE idempotency.outbox SET (autovacuum_enabled = off)" \
		-c "SELECT count(idempotency.outbox_send('orders', jsonb_build_object('n', g), 'key-' || (hashint4(g) & 1023) % 1000))
			  FROM generate_series(1, $messages) AS g" \
		-c "VACUUM idempotency.outbox" -c "CHECKPOINT" >/dev/null
	local stats
	stats=$(psql_cluster -Atc "SELECT count(*) FROM pg_statistic WHERE starelid = 'idempotency.outbox'::regclass")
	[ "$stats" = 0 ] || { echo "the outbox has statistics" >&2; exit 1; }
}

send_variants="send_ext send_ext_unordered send_hand"
relay_variants="relay_ext_1tx relay_ext_2tx relay_hand"
unanalyzed_variants="relay_ext_1tx relay_ext_2tx"
declare -A runs
drained=""
for r in $(seq "$rounds"); do
	for v in $send_variants; do
		psql_cluster -c "TRUNCATE idempotency.outbox, hand_outbox" -c "CHECKPOINT" >/dev/null
		t=$(run "$v")
		runs[$v]="${runs[$v]:-} $(awk -v t="$t" -v s="$seconds" 'BEGIN { printf "%.0f", t / s }')"
	done
	load_backlog
	for v in $relay_variants; do
		t=$(run "$v")
		case $v in
			relay_hand) left=$(psql_cluster -Atc "SELECT count(*) FROM hand_outbox WHERE delivered_at IS NULL") ;;
			*) left=$(psql_cluster -Atc "SELECT count(*) FROM idempotency.outbox WHERE delivered_at IS NULL") ;;
		esac
		[ "$left" -gt 0 ] || drained="$drained $v"
		delivered=$(( messages - left ))
		runs[$v]="${runs[$v]:-} $(awk -v d="$delivered" -v s="$seconds" 'BEGIN { printf "%.0f", d / s }')"
		# the same backlog for the next relay: everything undelivered again
		psql_cluster -c "UPDATE idempotency.outbox SET delivered_at = NULL, expires_at = NULL, lease_until = NULL
						  WHERE delivered_at IS NOT NULL OR lease_until IS NOT NULL" \
			-c "UPDATE hand_outbox SET delivered_at = NULL WHERE delivered_at IS NOT NULL" \
			-c "VACUUM ANALYZE idempotency.outbox" -c "VACUUM ANALYZE hand_outbox" -c "CHECKPOINT" >/dev/null
	done
	load_backlog_unanalyzed
	for v in $unanalyzed_variants; do
		t=$(run "$v")
		left=$(psql_cluster -Atc "SELECT count(*) FROM idempotency.outbox WHERE delivered_at IS NULL")
		[ "$left" -gt 0 ] || drained="$drained ${v}_unanalyzed"
		runs[${v}_unanalyzed]="${runs[${v}_unanalyzed]:-} $(awk -v d="$(( messages - left ))" -v s="$seconds" 'BEGIN { printf "%.0f", d / s }')"
		psql_cluster -c "UPDATE idempotency.outbox SET delivered_at = NULL, expires_at = NULL, lease_until = NULL
						  WHERE delivered_at IS NOT NULL OR lease_until IS NOT NULL" \
			-c "VACUUM idempotency.outbox" -c "CHECKPOINT" >/dev/null
	done
	# back to an outbox that autovacuum analyzes, for the next round
	psql_cluster -c "ALTER TABLE idempotency.outbox RESET (autovacuum_enabled)" >/dev/null
done
rm -rf "$dir"

declare -A med
echo "==> messages per second ($clients clients, $seconds s per run, $rounds rounds, medians; backlog $messages messages over 1000 keys)"
for v in $send_variants $relay_variants relay_ext_1tx_unanalyzed relay_ext_2tx_unanalyzed; do
	med[$v]=$(median ${runs[$v]})
	printf '   %-25s %10s msgs/s   (runs:%s)\n' "$v" "${med[$v]}" "${runs[$v]}"
done
if [ -n "$drained" ]; then
	echo "   WARNING: the backlog ran out during:$drained; use more MESSAGES or fewer SECONDS"
fi
echo
echo "==> ratios"
echo "   outbox_send with a key / hand-written INSERT:             $(ratio "${med[send_ext]}" "${med[send_hand]}")x"
echo "   outbox_send without a key / hand-written INSERT:          $(ratio "${med[send_ext_unordered]}" "${med[send_hand]}")x"
echo "   relay, fetch + ack in one transaction / SKIP LOCKED relay: $(ratio "${med[relay_ext_1tx]}" "${med[relay_hand]}")x"
echo "   relay, lease then ack (two transactions) / SKIP LOCKED:    $(ratio "${med[relay_ext_2tx]}" "${med[relay_hand]}")x"
echo "   relay, one transaction, never analyzed / analyzed:        $(ratio "${med[relay_ext_1tx_unanalyzed]}" "${med[relay_ext_1tx]}")x"
echo "   relay, two transactions, never analyzed / analyzed:       $(ratio "${med[relay_ext_2tx_unanalyzed]}" "${med[relay_ext_2tx]}")x"
