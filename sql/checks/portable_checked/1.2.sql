-- The checks passed: run statement by statement, the session may write
-- again, as it could before the script (sql/checks/portable_begin).  The
-- last statement of a DO block.
IF pg_catalog.current_setting('idempotency_script.mode', true) OPERATOR(pg_catalog.=) 'statements' THEN
	PERFORM pg_catalog.set_config('default_transaction_read_only',
								  pg_catalog.current_setting('idempotency_script.default_transaction_read_only'), false);
END IF;
