CREATE FUNCTION idempotency.record_transition()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idempotency_record_transition'
LANGUAGE C;

COMMENT ON FUNCTION idempotency.record_transition() IS
'AFTER INSERT OR UPDATE ... FOR EACH ROW trigger: record_transition(state_column) writes state_history';
