/*
 * drop_state_machine(name): refused while a check_transition trigger names
 * the machine, so that no table is left with a trigger that fails every row.
 */
CREATE FUNCTION idempotency.drop_state_machine(name pg_catalog.text)
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_drop_state_machine'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION idempotency.drop_state_machine(pg_catalog.text) FROM PUBLIC;

COMMENT ON FUNCTION idempotency.drop_state_machine(pg_catalog.text) IS 'drop a state machine that no check_transition trigger uses';
