/*
 * statemachine.c's drop_state_machine, in PL/pgSQL: refused while a
 * check_transition trigger (not a partition's clone) names the machine.
 * SECURITY DEFINER, to write the table; revoked from PUBLIC.
 */
CREATE FUNCTION idempotency.drop_state_machine(name pg_catalog.text)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_name pg_catalog.text := drop_state_machine.name;
	t record;
BEGIN
	IF v_name IS NULL THEN
		RAISE EXCEPTION 'state machine name must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT g.tgname, g.tgrelid::pg_catalog.regclass AS rel INTO t FROM pg_catalog.pg_trigger AS g
	 WHERE g.tgfoid OPERATOR(pg_catalog.=) 'idempotency.check_transition()'::pg_catalog.regprocedure
	   AND g.tgparentid OPERATOR(pg_catalog.=) 0 AND g.tgnargs OPERATOR(pg_catalog.>=) 1
	   AND pg_catalog.convert_from(pg_catalog.substr(g.tgargs, 1, pg_catalog.position(g.tgargs, '\x00'::pg_catalog.bytea) OPERATOR(pg_catalog.-) 1), pg_catalog.current_setting('server_encoding'))
		   OPERATOR(pg_catalog.=) v_name
	 LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'cannot drop state machine "%" because trigger "%" on table % uses it', v_name, t.tgname, t.rel
			USING ERRCODE = 'dependent_objects_still_exist', HINT = 'Drop the trigger first.';
	END IF;
	DELETE FROM idempotency.state_machines AS m WHERE m.name OPERATOR(pg_catalog.=) v_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'state machine "%" does not exist', v_name USING ERRCODE = 'undefined_object';
	END IF;
END
$$;

REVOKE ALL ON FUNCTION idempotency.drop_state_machine(pg_catalog.text) FROM PUBLIC;

COMMENT ON FUNCTION idempotency.drop_state_machine(pg_catalog.text) IS 'drop a state machine that no check_transition trigger uses';
