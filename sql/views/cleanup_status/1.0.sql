CREATE VIEW idempotency.cleanup_status AS
	SELECT d.datname, s.last_start, s.last_end, s.last_deleted, s.total_deleted,
		   s.failures, s.next_run, s.last_error
	  FROM idempotency.cleanup_status() AS s
	  JOIN pg_catalog.pg_database AS d ON d.oid OPERATOR(pg_catalog.=) s.dbid;

COMMENT ON VIEW idempotency.cleanup_status IS
'the background cleanup, per database: last pass, rows deleted, last error';

REVOKE ALL ON TABLE idempotency.cleanup_status FROM PUBLIC;

GRANT SELECT ON TABLE idempotency.cleanup_status TO pg_monitor;
