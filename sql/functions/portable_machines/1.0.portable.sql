/*
 * What the portable edition's state machine functions share: a machine's
 * states in the order statemachine.c numbers them (first met in a walk of
 * the definition: each key in jsonb's order, then its array), and the
 * lists its messages show.  The C edition caches each machine per backend;
 * these read the definition on every call.
 */
CREATE FUNCTION idempotency.portable_machine_states(transitions pg_catalog.jsonb)
RETURNS pg_catalog.text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
	SELECT COALESCE(pg_catalog.array_agg(s.state ORDER BY s.first_ord, s.first_elem), '{}')
	  FROM (SELECT w.state, pg_catalog.min(w.pos) AS first_pos,
				   (pg_catalog.min(w.pos) OPERATOR(pg_catalog./) 1000000) AS first_ord,
				   (pg_catalog.min(w.pos) OPERATOR(pg_catalog.%) 1000000) AS first_elem
			  FROM (SELECT k.key AS state, k.ord OPERATOR(pg_catalog.*) 1000000 AS pos
					  FROM pg_catalog.jsonb_each(transitions) WITH ORDINALITY AS k(key, value, ord)
					UNION ALL
					SELECT e.value, k.ord OPERATOR(pg_catalog.*) 1000000 OPERATOR(pg_catalog.+) e.ord
					  FROM pg_catalog.jsonb_each(transitions) WITH ORDINALITY AS k(key, value, ord),
						   LATERAL pg_catalog.jsonb_array_elements_text(CASE WHEN pg_catalog.jsonb_typeof(k.value) OPERATOR(pg_catalog.=) 'array'
																			 THEN k.value ELSE '[]' END) WITH ORDINALITY AS e(value, ord)) AS w
			 GROUP BY w.state) AS s;
END;

COMMENT ON FUNCTION idempotency.portable_machine_states(pg_catalog.jsonb) IS
'a state machine''s states in the order the C edition numbers them';

/* the first 50 of some states, for a message: a, b or "a", "b", and N more */
CREATE FUNCTION idempotency.portable_state_list(states pg_catalog.text[], quoted pg_catalog.bool)
RETURNS pg_catalog.text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
	SELECT COALESCE(pg_catalog.string_agg(CASE WHEN quoted THEN '"' OPERATOR(pg_catalog.||) s.state OPERATOR(pg_catalog.||) '"'
											   ELSE s.state END, ', ' ORDER BY s.ord)
					FILTER (WHERE s.ord OPERATOR(pg_catalog.<=) 50), '')
		   OPERATOR(pg_catalog.||) CASE WHEN pg_catalog.cardinality(states) OPERATOR(pg_catalog.>) 50
									THEN ' and ' OPERATOR(pg_catalog.||) (pg_catalog.cardinality(states) OPERATOR(pg_catalog.-) 50)::pg_catalog.text
										 OPERATOR(pg_catalog.||) ' more'
									ELSE '' END
	  FROM pg_catalog.unnest(states) WITH ORDINALITY AS s(state, ord);
END;

COMMENT ON FUNCTION idempotency.portable_state_list(pg_catalog.text[], pg_catalog.bool) IS
'the first 50 of some states, for a message';

/*
 * A JSON value for a message, cut after 200 bytes; a large array or object
 * not printed at all (statemachine.c's machine_json_display).
 */
CREATE FUNCTION idempotency.portable_json_display(value pg_catalog.jsonb)
RETURNS pg_catalog.text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
	SELECT CASE WHEN pg_catalog.jsonb_typeof(value) OPERATOR(pg_catalog.=) ANY (ARRAY['array', 'object'])
					 AND pg_catalog.pg_column_size(value) OPERATOR(pg_catalog.>) 12800
				THEN CASE WHEN pg_catalog.jsonb_typeof(value) OPERATOR(pg_catalog.=) 'array' THEN '[...]' ELSE '{...}' END
				WHEN pg_catalog.octet_length(value::pg_catalog.text) OPERATOR(pg_catalog.>) 200
				THEN pg_catalog.left(value::pg_catalog.text, 200) OPERATOR(pg_catalog.||) '...'
				ELSE value::pg_catalog.text END;
END;

COMMENT ON FUNCTION idempotency.portable_json_display(pg_catalog.jsonb) IS
'a JSON value for a message, cut after 200 bytes';

/*
 * The states a machine allows from one state, in the order the C edition
 * lists them (by state number), each once.
 */
CREATE FUNCTION idempotency.portable_machine_targets(transitions pg_catalog.jsonb, from_state pg_catalog.text)
RETURNS pg_catalog.text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
	SELECT ARRAY(SELECT s.state FROM pg_catalog.unnest(idempotency.portable_machine_states(transitions)) WITH ORDINALITY AS s(state, ord)
				  WHERE s.state OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT pg_catalog.jsonb_array_elements_text(transitions OPERATOR(pg_catalog.->) from_state)))
				  ORDER BY s.ord);
END;

COMMENT ON FUNCTION idempotency.portable_machine_targets(pg_catalog.jsonb, pg_catalog.text) IS
'the states a machine allows from one state, in the C edition''s order';

/*
 * A trigger of the portable edition's, checked as trigger.c's
 * IdempotencyTriggerCheck checks it (row level, timing, events, arguments,
 * the column it names, not generated for a BEFORE trigger); returns the
 * column's type.  The C edition checks this once per statement; this is
 * read from the catalogs on every row.
 */
CREATE FUNCTION idempotency.portable_trigger_check(fn pg_catalog.text, relid pg_catalog.oid, trigger_name pg_catalog.name,
												   before pg_catalog.bool, update_only pg_catalog.bool, nargs pg_catalog.int4,
												   args_message pg_catalog.text, column_name pg_catalog.text, column_role pg_catalog.text)
RETURNS pg_catalog.oid
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_type pg_catalog.int2;
	v_nargs pg_catalog.int2;
	v_typid pg_catalog.oid;
	v_generated pg_catalog.char;
	v_relname pg_catalog.name := (SELECT c.relname FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) relid);
BEGIN
	SELECT g.tgtype, g.tgnargs INTO v_type, v_nargs FROM pg_catalog.pg_trigger AS g
	 WHERE g.tgrelid OPERATOR(pg_catalog.=) relid AND g.tgname OPERATOR(pg_catalog.=) trigger_name;
	-- tgtype: 1 row, 2 before, 4 insert, 8 delete, 16 update, 32 truncate, 64 instead
	IF (v_type OPERATOR(pg_catalog.&) 1) OPERATOR(pg_catalog.=) 0 THEN
		RAISE EXCEPTION '%: %', fn, CASE WHEN fn OPERATOR(pg_catalog.=) 'version_guard' THEN 'must be fired BEFORE UPDATE FOR EACH ROW' ELSE 'must be fired for each row' END USING ERRCODE = '39P01';
	END IF;
	IF before AND ((v_type OPERATOR(pg_catalog.&) 2) OPERATOR(pg_catalog.=) 0 OR (v_type OPERATOR(pg_catalog.&) 64) OPERATOR(pg_catalog.<>) 0) THEN
		RAISE EXCEPTION '%: %', fn, CASE WHEN fn OPERATOR(pg_catalog.=) 'version_guard' THEN 'must be fired BEFORE UPDATE FOR EACH ROW' ELSE 'must be fired before the event' END USING ERRCODE = '39P01';
	END IF;
	IF NOT before AND (v_type OPERATOR(pg_catalog.&) 66) OPERATOR(pg_catalog.<>) 0 THEN
		RAISE EXCEPTION '%: %', fn, CASE WHEN fn OPERATOR(pg_catalog.=) 'version_guard' THEN 'must be fired BEFORE UPDATE FOR EACH ROW' ELSE 'must be fired after the event' END USING ERRCODE = '39P01';
	END IF;
	IF (v_type OPERATOR(pg_catalog.&) 40) OPERATOR(pg_catalog.<>) 0
	   OR (update_only AND ((v_type OPERATOR(pg_catalog.&) 4) OPERATOR(pg_catalog.<>) 0 OR (v_type OPERATOR(pg_catalog.&) 16) OPERATOR(pg_catalog.=) 0)) THEN
		RAISE EXCEPTION '%: %', fn, CASE WHEN fn OPERATOR(pg_catalog.=) 'version_guard' THEN 'must be fired BEFORE UPDATE FOR EACH ROW' ELSE 'must be fired for INSERT or UPDATE' END USING ERRCODE = '39P01';
	END IF;
	IF v_nargs OPERATOR(pg_catalog.<>) nargs THEN
		RAISE EXCEPTION '%: trigger "%" must have %', fn, trigger_name, args_message USING ERRCODE = '39P01';
	END IF;
	SELECT x.atttypid, x.attgenerated INTO v_typid, v_generated FROM pg_catalog.pg_attribute AS x
	 WHERE x.attrelid OPERATOR(pg_catalog.=) relid AND x.attname OPERATOR(pg_catalog.=) column_name
	   AND x.attnum OPERATOR(pg_catalog.>) 0 AND NOT x.attisdropped;
	IF NOT FOUND THEN
		IF column_role IS NULL THEN
			RAISE EXCEPTION 'column "%" of relation "%" does not exist', column_name, v_relname USING ERRCODE = 'undefined_column';
		END IF;
		RAISE EXCEPTION 'column "%" of relation "%" does not exist', column_name, v_relname
			USING ERRCODE = 'undefined_column',
				  DETAIL = pg_catalog.format('Trigger "%s" names it as the %s column.', trigger_name, column_role);
	END IF;
	IF before AND v_generated OPERATOR(pg_catalog.<>) '' THEN
		RAISE EXCEPTION '%: column "%" of relation "%" is a generated column', fn, column_name, v_relname
			USING ERRCODE = 'invalid_column_reference',
				  DETAIL = pg_catalog.format('Trigger "%s" fires before the column is computed, so it never sees the value written.', trigger_name);
	END IF;
	RETURN v_typid;
END
$$;

COMMENT ON FUNCTION idempotency.portable_trigger_check(pg_catalog.text, pg_catalog.oid, pg_catalog.name, pg_catalog.bool, pg_catalog.bool, pg_catalog.int4, pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
'a trigger of the extension, checked against its protocol; the type of the column it names';
