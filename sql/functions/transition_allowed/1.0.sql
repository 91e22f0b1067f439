CREATE FUNCTION idempotency.transition_allowed(machine pg_catalog.text,
											   from_state pg_catalog.text,
											   to_state pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_transition_allowed'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION idempotency.transition_allowed(pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
'whether check_transition lets a row move from one state to another (staying is allowed)';
