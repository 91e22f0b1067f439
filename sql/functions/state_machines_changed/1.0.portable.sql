/*
 * The portable edition keeps no per-backend cache of the machines (its
 * trigger functions read the table), so there is nothing to tell when a
 * definition changes: the triggers on state_machines call this, which does
 * nothing.
 */
CREATE FUNCTION idempotency.state_machines_changed()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION idempotency.state_machines_changed() FROM PUBLIC;

COMMENT ON FUNCTION idempotency.state_machines_changed() IS 'trigger on state_machines: tells every backend''s cache that a definition changed';
