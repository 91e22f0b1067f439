/*
 * A machine's transitions, one row each; an error for an unknown machine.
 * The C edition's checks first that the schema is the extension's; the
 * portable edition's schema belongs to no extension.
 */
CREATE FUNCTION idempotency.state_machine_transitions(machine pg_catalog.text,
													  OUT from_state pg_catalog.text,
													  OUT to_state pg_catalog.text,
													  OUT from_initial pg_catalog.bool)
RETURNS SETOF pg_catalog.record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT EXISTS (SELECT FROM idempotency.state_machines AS m WHERE m.name = machine) THEN
		RAISE EXCEPTION 'state machine "%" does not exist', machine USING ERRCODE = 'undefined_object';
	END IF;
	RETURN QUERY
		SELECT f.key, t.value, f.key = ANY (m.initial)
		  FROM idempotency.state_machines AS m,
			   jsonb_each(m.transitions) AS f,
			   jsonb_array_elements_text(f.value) AS t
		 WHERE m.name = machine
		 ORDER BY 1, 2;
END;
$$;

COMMENT ON FUNCTION idempotency.state_machine_transitions(pg_catalog.text) IS 'a state machine''s transitions, one row each';
