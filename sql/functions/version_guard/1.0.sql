CREATE FUNCTION idempotency.version_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idempotency_version_guard'
LANGUAGE C;

COMMENT ON FUNCTION idempotency.version_guard() IS
'BEFORE UPDATE ... FOR EACH ROW trigger: version_guard(column) bumps the version by one and refuses stale writes';
