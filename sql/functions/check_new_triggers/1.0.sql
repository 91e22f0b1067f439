/*
 * A check_transition, record_transition or version_guard trigger that is
 * defined wrongly (unknown machine, missing column, wrong timing, level,
 * events, column type or number of arguments, no primary key) is refused by
 * CREATE TRIGGER, not at the first row written.  The function recognises our
 * trigger functions by OID, through the extension's own dependencies; the
 * trigger functions repeat the checks when they fire.
 */
CREATE FUNCTION idempotency.check_new_triggers()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'idempotency_check_new_triggers'
LANGUAGE C;

COMMENT ON FUNCTION idempotency.check_new_triggers() IS
'event trigger: refuse a check_transition, record_transition or version_guard trigger that is defined wrongly';

REVOKE ALL ON FUNCTION idempotency.check_new_triggers() FROM PUBLIC;
