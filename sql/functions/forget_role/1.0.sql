CREATE FUNCTION idempotency.forget_role(role_name pg_catalog.text)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'idempotency_forget_role'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.forget_role(pg_catalog.text) IS
'delete every record, inbox entry, token and outbox message stored under a role name in this database; returns how many';

REVOKE ALL ON FUNCTION idempotency.forget_role(pg_catalog.text) FROM PUBLIC;
