/*
 * The beginning of every portable script, install and update alike, before
 * its checks.  A script run in one transaction (psql --single-transaction,
 * a migration tool's transaction, or the whole file sent as one query
 * string) stops at its first failure and leaves nothing: what it sets, it
 * sets for that transaction.  Run statement by statement, each statement is
 * a transaction of its own, and psql without ON_ERROR_STOP goes on past a
 * refusal: so there the script sets for the session what it needs, and its
 * last statement (sql/checks/portable_version) gives the session's own
 * values back.
 *
 * What it needs: the search_path pinned, since every name below is
 * qualified but what PostgreSQL runs on the script's behalf (a simple
 * CASE's "=" in a function body, the query inside pg_get_viewdef) looks its
 * operators up in the search_path, and the installer's may put a schema
 * that others write before pg_catalog; and, statement by statement, the
 * session's transactions read-only until the checks have passed, so that a
 * refused script changes nothing (the checks' block writes the session's
 * own value back: sql/checks/portable_checked).  The first statement marks the
 * transaction it runs in; a mark set for the transaction is gone in the
 * next statement's only if that is another transaction.  Nothing here
 * names an operator the search_path could give another meaning.
 */
DO $$
BEGIN
	PERFORM pg_catalog.set_config('idempotency_script.transaction', 'one', true);
END
$$;

DO $$
BEGIN
	IF pg_catalog.current_setting('idempotency_script.transaction', true) OPERATOR(pg_catalog.=) 'one' THEN
		PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
		-- what a run statement by statement that stopped early left
		PERFORM pg_catalog.set_config('idempotency_script.read_only', '', true);
	ELSE
		PERFORM pg_catalog.set_config('idempotency_script.read_only',
									  pg_catalog.current_setting('default_transaction_read_only'), false);
		PERFORM pg_catalog.set_config('idempotency_script.search_path',
									  pg_catalog.current_setting('search_path'), false);
		PERFORM pg_catalog.set_config('default_transaction_read_only', 'on', false);
		PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false);
	END IF;
END
$$;
