/*
 * The beginning of every portable script, install and update alike, before
 * its checks.  A script run in one transaction (psql --single-transaction,
 * a migration tool's transaction, or the whole file sent as one query
 * string) stops at its first failure and leaves nothing: what it sets, it
 * sets for that transaction, and its last statement
 * (sql/checks/portable_version) gives the statements after it in the
 * transaction their search_path back.  Run statement by statement, each
 * statement is a transaction of its own, and psql without ON_ERROR_STOP
 * goes on past a refusal: so there the script sets for the session what it
 * needs, and its last statement gives the session its own values back.
 *
 * What it needs: the search_path pinned, since every name below is
 * qualified but what PostgreSQL runs on the script's behalf (a simple
 * CASE's "=" in a function body) looks its operators up in the
 * search_path, and the installer's may put a schema that others write
 * before pg_catalog; and, statement by statement, the session's
 * transactions read-only until the checks have passed, so that a refused
 * script changes nothing (the checks' block gives the session its own
 * value back: sql/checks/portable_checked), and not deferrable, which would
 * make a serializable read-only check wait for every serializable writer.
 *
 * The first statement marks the transaction it runs in with the time the
 * transaction began, which no earlier setting can have; the second finds
 * the mark only in the same transaction, and says for the rest of the
 * script which way it runs (idempotency_script.mode).  In a transaction
 * block, a statement run in a savepoint of its own (psql's ON_ERROR_ROLLBACK,
 * a driver's autosave) has its failure undone alone, and a refusal would
 * not stop the statements after it; nor can a statement make the
 * transaction read-only for those after its savepoint.  The first statement
 * finds that savepoint (a write in it takes a transaction ID more than the
 * one of the probe's own block), and a refusal then ends the session
 * (sql/checks/portable_refused).  Nothing here names an operator the
 * search_path could give another meaning.
 */
DO $$
DECLARE
	before pg_catalog.int8;
	probed pg_catalog.int8;
BEGIN
	PERFORM pg_catalog.set_config('idempotency_script.transaction',
								  pg_catalog.date_part('epoch', pg_catalog.transaction_timestamp())::pg_catalog.text, true);
	PERFORM pg_catalog.pg_current_xact_id();
	SELECT pg_catalog.count(*) INTO before
	  FROM pg_catalog.pg_locks AS l
	 WHERE l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
	   AND l.locktype OPERATOR(pg_catalog.=) 'transactionid';
	BEGIN
		CREATE TEMPORARY TABLE idempotency_script_probe ();
		SELECT pg_catalog.count(*) INTO probed
		  FROM pg_catalog.pg_locks AS l
		 WHERE l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
		   AND l.locktype OPERATOR(pg_catalog.=) 'transactionid';
		DROP TABLE pg_temp.idempotency_script_probe;
	EXCEPTION WHEN OTHERS THEN
		-- no temporary tables here (TEMPORARY revoked): no telling
		probed := before OPERATOR(pg_catalog.+) 1;
	END;
	PERFORM pg_catalog.set_config('idempotency_script.savepoints',
								  ((probed OPERATOR(pg_catalog.-) before) OPERATOR(pg_catalog.>) 1)::pg_catalog.text, true);
END
$$;

DO $$
BEGIN
	IF COALESCE(pg_catalog.current_setting('idempotency_script.transaction', true), '') OPERATOR(pg_catalog.=)
	   pg_catalog.date_part('epoch', pg_catalog.transaction_timestamp())::pg_catalog.text THEN
		PERFORM pg_catalog.set_config('idempotency_script.mode',
			CASE WHEN pg_catalog.current_setting('idempotency_script.savepoints', true) OPERATOR(pg_catalog.=) 'true'
				 THEN 'savepoints' ELSE 'transaction' END, true);
		PERFORM pg_catalog.set_config('idempotency_script.search_path', pg_catalog.current_setting('search_path'), true);
		PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	ELSE
		PERFORM pg_catalog.set_config('idempotency_script.mode', 'statements', false);
		-- the session's own values, each as idempotency_script.NAME, and
		-- the names in idempotency_script.saved, for the script's end to
		-- give back; a run stopped part way keeps what it found, not what
		-- it set
		IF COALESCE(pg_catalog.current_setting('idempotency_script.saved', true), '') OPERATOR(pg_catalog.=) '' THEN
			PERFORM pg_catalog.set_config('idempotency_script.saved',
										  'default_transaction_read_only default_transaction_deferrable search_path', false);
			PERFORM pg_catalog.set_config('idempotency_script.' OPERATOR(pg_catalog.||) s.name,
										  pg_catalog.current_setting(s.name), false)
			   FROM pg_catalog.string_to_table(pg_catalog.current_setting('idempotency_script.saved'), ' ') AS s(name);
		END IF;
		PERFORM pg_catalog.set_config('default_transaction_read_only', 'on', false);
		PERFORM pg_catalog.set_config('default_transaction_deferrable', 'off', false);
		PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false);
	END IF;
END
$$;
