CREATE FUNCTION idempotency.check_transition()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idempotency_check_transition'
LANGUAGE C;

COMMENT ON FUNCTION idempotency.check_transition() IS
'BEFORE INSERT OR UPDATE ... FOR EACH ROW trigger: check_transition(machine, state_column)';
