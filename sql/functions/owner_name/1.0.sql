/*
 * owner_name(): the name the caller's records, inbox entries, tokens and
 * outbox messages are stored under: the role grant_usage() was given to,
 * which the caller is or is a member of (src/owner.c).  It tells the caller
 * nothing but that name, so it is left to PUBLIC.
 */
CREATE FUNCTION idempotency.owner_name()
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_owner_name'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.owner_name() IS
'the role name the caller''s records are stored under: the application role grant_usage was given to';
