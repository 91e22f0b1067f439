CREATE VIEW idempotency.metrics AS SELECT * FROM idempotency.metrics();

COMMENT ON VIEW idempotency.metrics IS
'this database''s records, claims, inbox and outbox in numbers, for monitoring (reads the registry whole)';

REVOKE ALL ON TABLE idempotency.metrics FROM PUBLIC;

GRANT SELECT ON TABLE idempotency.metrics TO pg_monitor;
