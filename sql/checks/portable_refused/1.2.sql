-- The handler of a portable script's checks (EXCEPTION WHEN OTHERS THEN):
-- in a transaction whose statements each run in a savepoint of their own
-- (sql/checks/portable_begin), a refusal undone alone would not stop the
-- statements after it, so the session ends, and its transaction with it.
IF pg_catalog.current_setting('idempotency_script.mode', true) OPERATOR(pg_catalog.=) 'savepoints' THEN
	RAISE WARNING 'the script is refused (%), and each of its statements runs in a savepoint of its own, past which a refusal would not stop the others: the session ends, and its transaction with it', SQLERRM
		USING HINT = 'Run it without psql''s ON_ERROR_ROLLBACK (psql -X -v ON_ERROR_STOP=1 --single-transaction -f), or without a driver''s autosave.';
	PERFORM pg_catalog.pg_terminate_backend(pg_catalog.pg_backend_pid());
END IF;
RAISE;
