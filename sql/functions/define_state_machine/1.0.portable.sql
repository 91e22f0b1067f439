/*
 * statemachine.c's define_state_machine, in PL/pgSQL: the same checks, in
 * the same order (the first problem met in a walk of the definition, in
 * jsonb's order of keys), the same messages, then the definition stored.
 * The walk is one query: each key and each element of its array in order,
 * with the running count of states seen and of transitions; the first row
 * that breaks a rule names the error.  SECURITY DEFINER, to write the table;
 * revoked from PUBLIC.
 */
CREATE FUNCTION idempotency.define_state_machine(name pg_catalog.text,
												 transitions pg_catalog.jsonb,
												 initial pg_catalog.text[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_name pg_catalog.text := define_state_machine.name;
	v_def pg_catalog.jsonb := define_state_machine.transitions;
	v_initial pg_catalog.text[] := define_state_machine.initial;
	bad record;
	v_states pg_catalog.text[];
	v_missing pg_catalog.text;
BEGIN
	IF v_name IS NULL OR v_name OPERATOR(pg_catalog.=) '' THEN
		RAISE EXCEPTION 'state machine name must not be empty' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF pg_catalog.octet_length(v_name) OPERATOR(pg_catalog.>) 63 THEN
		RAISE EXCEPTION 'state machine name "%" is too long', idempotency.portable_display(v_name)
			USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Names are at most 63 bytes long.';
	END IF;
	IF v_def IS NULL OR pg_catalog.jsonb_typeof(v_def) OPERATOR(pg_catalog.<>) 'object'
	   OR v_def OPERATOR(pg_catalog.=) '{}'::pg_catalog.jsonb THEN
		RAISE EXCEPTION 'transitions of state machine "%" must be a non-empty JSON object', v_name
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Map each state to the array of states it may move to, as in {"created": ["paid"], "paid": []}.';
	END IF;

	-- the walk: a key (elem 0), then its array's elements; kind says what
	-- the row is, state the state it names (NULL when it names none)
	WITH walk AS (
		SELECT k.ord, 0::pg_catalog.int8 AS elem, 'key' AS kind, k.key AS state, k.key AS from_state,
			   pg_catalog.jsonb_typeof(k.value) AS value_type, k.value
		  FROM pg_catalog.jsonb_each(v_def) WITH ORDINALITY AS k(key, value, ord)
		UNION ALL
		SELECT k.ord, e.ord, 'element',
			   CASE WHEN pg_catalog.jsonb_typeof(e.value) OPERATOR(pg_catalog.=) 'string' THEN e.value OPERATOR(pg_catalog.#>>) '{}' END,
			   k.key, pg_catalog.jsonb_typeof(e.value), e.value
		  FROM pg_catalog.jsonb_each(v_def) WITH ORDINALITY AS k(key, value, ord),
			   LATERAL pg_catalog.jsonb_array_elements(CASE WHEN pg_catalog.jsonb_typeof(k.value) OPERATOR(pg_catalog.=) 'array'
															THEN k.value ELSE '[]' END) WITH ORDINALITY AS e(value, ord)),
	numbered AS (
		SELECT w.*,
			   w.state IS NOT NULL AND pg_catalog.row_number() OVER (PARTITION BY w.state ORDER BY w.ord, w.elem) OPERATOR(pg_catalog.=) 1 AS is_new,
			   pg_catalog.count(*) FILTER (WHERE w.kind OPERATOR(pg_catalog.=) 'element') OVER (ORDER BY w.ord, w.elem) AS pairs
		  FROM walk AS w),
	counted AS (
		SELECT n.*, pg_catalog.count(*) FILTER (WHERE n.is_new) OVER (ORDER BY n.ord, n.elem) AS states
		  FROM numbered AS n)
	SELECT c.* INTO bad FROM counted AS c
	 WHERE (c.kind OPERATOR(pg_catalog.=) 'key' AND (c.state OPERATOR(pg_catalog.=) ''
				OR pg_catalog.octet_length(c.state) OPERATOR(pg_catalog.>) 255
				OR (c.is_new AND c.states OPERATOR(pg_catalog.>) 10000)
				OR c.value_type OPERATOR(pg_catalog.<>) 'array'))
		OR (c.kind OPERATOR(pg_catalog.=) 'element' AND (c.state IS NULL OR c.state OPERATOR(pg_catalog.=) ''
				OR pg_catalog.octet_length(c.state) OPERATOR(pg_catalog.>) 255
				OR (c.is_new AND c.states OPERATOR(pg_catalog.>) 10000)
				OR c.pairs OPERATOR(pg_catalog.>) 100000))
	 ORDER BY c.ord, c.elem LIMIT 1;
	IF FOUND THEN
		IF bad.kind OPERATOR(pg_catalog.=) 'key' AND bad.state OPERATOR(pg_catalog.=) '' THEN
			RAISE EXCEPTION 'state machine "%" has an empty state name', v_name USING ERRCODE = 'invalid_parameter_value';
		ELSIF bad.kind OPERATOR(pg_catalog.=) 'element' AND (bad.state IS NULL OR bad.state OPERATOR(pg_catalog.=) '') THEN
			RAISE EXCEPTION 'transitions from state "%" of state machine "%" must name states as non-empty strings', bad.from_state, v_name
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = pg_catalog.format('Found %s.', idempotency.portable_json_display(bad.value));
		ELSIF pg_catalog.octet_length(bad.state) OPERATOR(pg_catalog.>) 255 THEN
			RAISE EXCEPTION 'state name "%" of state machine "%" is too long', idempotency.portable_display(bad.state), v_name
				USING ERRCODE = 'invalid_parameter_value', DETAIL = 'State names are at most 255 bytes long.';
		ELSIF bad.is_new AND bad.states OPERATOR(pg_catalog.>) 10000 THEN
			RAISE EXCEPTION 'state machine "%" has too many states', v_name
				USING ERRCODE = 'program_limit_exceeded', DETAIL = 'A state machine can have at most 10000 states.';
		ELSIF bad.kind OPERATOR(pg_catalog.=) 'key' THEN
			RAISE EXCEPTION 'transitions from state "%" of state machine "%" must be a JSON array', bad.from_state, v_name
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = pg_catalog.format('Found %s.', idempotency.portable_json_display(bad.value));
		ELSE
			RAISE EXCEPTION 'state machine "%" has too many transitions', v_name
				USING ERRCODE = 'program_limit_exceeded', DETAIL = 'A state machine can have at most 100000 transitions.';
		END IF;
	END IF;

	-- the states in the order they were first met
	v_states := idempotency.portable_machine_states(v_def);
	IF v_initial IS NULL THEN
		v_initial := ARRAY(SELECT s.state FROM pg_catalog.unnest(v_states) WITH ORDINALITY AS s(state, ord)
							WHERE NOT EXISTS (SELECT FROM pg_catalog.jsonb_each(v_def) AS k,
												  pg_catalog.jsonb_array_elements_text(k.value) AS e(to_state)
											   WHERE e.to_state OPERATOR(pg_catalog.=) s.state)
							ORDER BY s.ord);
		IF pg_catalog.cardinality(v_initial) OPERATOR(pg_catalog.=) 0 THEN
			RAISE EXCEPTION 'state machine "%" has no initial state', v_name
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = 'Every state has a transition into it.',
					  HINT = 'Name the initial states in the third argument.';
		END IF;
	ELSE
		IF COALESCE(pg_catalog.cardinality(v_initial), 0) OPERATOR(pg_catalog.=) 0
		   OR pg_catalog.array_position(v_initial, NULL) IS NOT NULL THEN
			RAISE EXCEPTION 'initial states of state machine "%" must be a non-empty array without nulls', v_name
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		SELECT i.state INTO v_missing FROM pg_catalog.unnest(v_initial) WITH ORDINALITY AS i(state, ord)
		 WHERE i.state OPERATOR(pg_catalog.<>) ALL (v_states) ORDER BY i.ord LIMIT 1;
		IF v_missing IS NOT NULL THEN
			RAISE EXCEPTION 'initial state "%" is not a state of state machine "%"', idempotency.portable_display(v_missing), v_name
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = pg_catalog.format('Its states are %s.', idempotency.portable_state_list(v_states, false));
		END IF;
	END IF;

	INSERT INTO idempotency.state_machines AS m (name, transitions, initial, updated_at)
	VALUES (v_name, v_def, v_initial, pg_catalog.now())
	ON CONFLICT ON CONSTRAINT state_machines_pkey DO UPDATE
	   SET transitions = excluded.transitions, initial = excluded.initial, updated_at = excluded.updated_at;
END
$$;

COMMENT ON FUNCTION idempotency.define_state_machine(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text[]) IS
'define or replace a state machine: each state mapped to the states it may move to (at most 10000 states and 100000 transitions)';

REVOKE ALL ON FUNCTION idempotency.define_state_machine(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text[]) FROM PUBLIC;
