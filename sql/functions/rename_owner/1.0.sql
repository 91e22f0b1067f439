CREATE FUNCTION idempotency.rename_owner(old_name pg_catalog.text, new_name pg_catalog.text)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'idempotency_rename_owner'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.rename_owner(pg_catalog.text, pg_catalog.text) IS
'move every record, inbox entry, token and outbox message from one role name to another in this database; returns how many';

REVOKE ALL ON FUNCTION idempotency.rename_owner(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
