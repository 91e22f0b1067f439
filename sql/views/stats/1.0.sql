CREATE VIEW idempotency.stats AS SELECT * FROM idempotency.stats();

COMMENT ON VIEW idempotency.stats IS
'what the extension has done since the last reset, across all databases (needs shared_preload_libraries)';

REVOKE ALL ON TABLE idempotency.stats FROM PUBLIC;

GRANT SELECT ON TABLE idempotency.stats TO pg_monitor;
