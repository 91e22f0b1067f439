CREATE FUNCTION idempotency.state_machines_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idempotency_state_machines_changed'
LANGUAGE C;

REVOKE ALL ON FUNCTION idempotency.state_machines_changed() FROM PUBLIC;

COMMENT ON FUNCTION idempotency.state_machines_changed() IS 'trigger on state_machines: tells every backend''s cache that a definition changed';
