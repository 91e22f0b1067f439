#!/usr/bin/env bash
#
# The demo: builds and installs the extension (or, with
# IDEMPOTENCY_INSTALLED=1, uses the one the Debian package installed),
# starts a throwaway PostgreSQL cluster with shared_preload_libraries =
# 'idempotency', and tells the story with real SQL: an order is paid, the client retries three times (once
# concurrently from a second connection while the first is still running);
# the card is charged once and every retry gets the cached answer.  The
# cluster is stopped and removed at the end.  Run as root on Debian 12.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

install_packages make gcc libc6-dev postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR
use_extension "$top"

start_cluster

psql_cluster -f "$top/test/demo_setup.sql"

# indent: indent what psql printed, so that the steps stand out
indent() {
	sed '/./s/^/       /'
}

echo
echo "==> 1. the client pays order ORD20260711001; the server is slow (the work holds"
echo "       its transaction open for 2 s), so the client times out ..."
# The first request runs in the background.  Its notices (stderr, written at
# once) and its answer (stdout, flushed when psql exits) are captured apart,
# so that each is printed where it belongs in the story.
first="$cluster/first_request"
psql_cluster -c "BEGIN; SELECT shop.pay('ORD20260711001', 4250) AS first_request; DO \$\$BEGIN PERFORM pg_sleep(2); END\$\$; COMMIT;" >"$first.out" 2>"$first.err" &
slow=$!
until psql_cluster -Atc "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'BEGIN; SELECT shop.pay%' AND wait_event = 'PgSleep'" | grep -q 1; do
	sleep 0.1
done
indent <"$first.err"
echo "       (the card is charged, but the first request has not committed yet)"

echo
echo "==> 2. ... and retries from a second connection while the first is still running:"
echo "       the retry waits for the first transaction, then replays its answer"
retry="$cluster/retry_1.out"
started=$(date +%s%N)
psql_cluster -c "SELECT shop.pay('ORD20260711001', 4250) AS retry_1_concurrent;" >"$retry" 2>&1
waited=$(( ($(date +%s%N) - started) / 1000000 ))
wait $slow || { cat "$first.err"; exit 1; }
echo "       the first request commits and answers:"
indent <"$first.out"
echo "       retry 1 waited $waited ms for that commit, then replayed the same answer:"
indent <"$retry"

echo
echo "==> 3. retries 2 and 3, after the first request finished: the stored answer again"
psql_cluster -c "SELECT shop.pay('ORD20260711001', 4250) AS retry_2;" 2>&1 | indent
psql_cluster -c "SELECT shop.pay('ORD20260711001', 4250) AS retry_3;" 2>&1 | indent

echo
echo "==> 4. a buggy client reuses the key for a different amount: rejected with"
echo "       SQLSTATE IK001 (an HTTP layer answers 422), and nothing is charged"
psql_cluster -v VERBOSITY=verbose -v SHOW_CONTEXT=never -c "SELECT shop.pay('ORD20260711001', 9999);" 2>&1 | grep -v '^LOCATION' | indent || true

echo
echo "==> what happened"
psql_cluster -f "$top/test/demo_report.sql"
echo "==> demo finished; the throwaway cluster is removed"
