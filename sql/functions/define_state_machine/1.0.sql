/*
 * define_state_machine(name, transitions, initial): check and store a
 * definition, replacing any earlier one in one statement.  In C (linear in
 * the size of the definition, and the same checks as the cache's loader).
 * SECURITY DEFINER so that a role granted this function needs no privilege
 * on the table, and cannot store a definition that has not been checked.
 * Limits: 10000 states, 100000 transitions, state names of 255 bytes.
 */
CREATE FUNCTION idempotency.define_state_machine(name pg_catalog.text,
												 transitions pg_catalog.jsonb,
												 initial pg_catalog.text[] DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_define_state_machine'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION idempotency.define_state_machine(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text[]) IS
'define or replace a state machine: each state mapped to the states it may move to (at most 10000 states and 100000 transitions)';

REVOKE ALL ON FUNCTION idempotency.define_state_machine(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text[]) FROM PUBLIC;
