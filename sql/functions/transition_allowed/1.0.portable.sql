/*
 * statemachine.c's transition_allowed, in SQL: staying in a known state is
 * allowed; an unknown state is never part of an allowed transition; an
 * unknown machine is an error.
 */
CREATE FUNCTION idempotency.portable_machine(machine pg_catalog.text)
RETURNS pg_catalog.jsonb
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_def pg_catalog.jsonb;
BEGIN
	SELECT m.transitions INTO v_def FROM idempotency.state_machines AS m WHERE m.name OPERATOR(pg_catalog.=) machine;
	IF NOT FOUND THEN
		IF pg_catalog.octet_length(machine) OPERATOR(pg_catalog.>=) 64 THEN
			RAISE EXCEPTION 'state machine "%" does not exist', machine USING ERRCODE = 'undefined_object';
		END IF;
		RAISE EXCEPTION 'state machine "%" does not exist', machine
			USING ERRCODE = 'undefined_object', HINT = 'Define it with idempotency.define_state_machine().';
	END IF;
	RETURN v_def;
END
$$;

COMMENT ON FUNCTION idempotency.portable_machine(pg_catalog.text) IS
'a state machine''s definition; an error if there is none';

CREATE FUNCTION idempotency.transition_allowed(machine pg_catalog.text,
											   from_state pg_catalog.text,
											   to_state pg_catalog.text)
RETURNS pg_catalog.bool
LANGUAGE sql STABLE STRICT PARALLEL RESTRICTED
BEGIN ATOMIC
	SELECT from_state OPERATOR(pg_catalog.=) ANY (s.states) AND to_state OPERATOR(pg_catalog.=) ANY (s.states)
		   AND (from_state OPERATOR(pg_catalog.=) to_state
				OR to_state OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT pg_catalog.jsonb_array_elements_text(s.def OPERATOR(pg_catalog.->) from_state))))
	  FROM (SELECT d.def, idempotency.portable_machine_states(d.def) AS states
			  FROM (SELECT idempotency.portable_machine(machine) AS def) AS d) AS s;
END;

COMMENT ON FUNCTION idempotency.transition_allowed(pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
'whether check_transition lets a row move from one state to another (staying is allowed)';
