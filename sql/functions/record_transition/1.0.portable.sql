/*
 * history.c's record_transition, in PL/pgSQL: a change of state recorded
 * in state_history, the row named by its primary key (numbers and booleans
 * as such, everything else, NaN and infinities too, as its text), under
 * the writer's owner name.  The trigger runs as the writer, who may not
 * write state_history: portable_record_history, SECURITY DEFINER, writes
 * the row, and takes it only from a trigger (pg_trigger_depth) of a role
 * that may write the table it names (doc/portable.md: such a role could
 * call it from a trigger of its own, so the history of a table is only as
 * trustworthy as the roles that may write it).
 */
CREATE FUNCTION idempotency.portable_record_history(caller pg_catalog.name, table_oid pg_catalog.oid,
													row_key pg_catalog.jsonb, from_state pg_catalog.text,
													to_state pg_catalog.text)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_owner pg_catalog.text := idempotency.portable_owner(caller, NULL);
	v_name pg_catalog.text;
	v_ttl pg_catalog.int8 := idempotency.portable_setting('idempotency.history_ttl', 's', 2592000, 0, 2147483647);
BEGIN
	IF pg_catalog.pg_trigger_depth() OPERATOR(pg_catalog.<) 1
	   OR NOT (pg_catalog.has_table_privilege(caller, portable_record_history.table_oid, 'INSERT')
			   OR pg_catalog.has_table_privilege(caller, portable_record_history.table_oid, 'UPDATE')) THEN
		RAISE EXCEPTION 'permission denied to record state history of relation with OID %', portable_record_history.table_oid
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname)
	  INTO v_name FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
	 WHERE c.oid OPERATOR(pg_catalog.=) portable_record_history.table_oid;
	INSERT INTO idempotency.state_history (table_name, row_key, from_state, to_state, changed_at, xid, role, expires_at, table_oid)
	VALUES (v_name, portable_record_history.row_key, portable_record_history.from_state, portable_record_history.to_state,
			pg_catalog.now(), pg_catalog.pg_current_xact_id(), v_owner,
			pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_ttl), portable_record_history.table_oid);
END
$$;

COMMENT ON FUNCTION idempotency.portable_record_history(pg_catalog.name, pg_catalog.oid, pg_catalog.jsonb, pg_catalog.text, pg_catalog.text) IS
'record_transition()''s write of a history row, for a caller who may write the table';

CREATE FUNCTION idempotency.record_transition()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_column pg_catalog.text := TG_ARGV[0];
	v_new pg_catalog.text;
	v_old pg_catalog.text;
	v_key pg_catalog.jsonb;
	v_row pg_catalog.jsonb := pg_catalog.to_jsonb(NEW);
BEGIN
	PERFORM idempotency.portable_trigger_check('record_transition', TG_RELID, TG_NAME, false, false, 1,
											   'one argument, the state column', v_column, NULL);
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_index AS i WHERE i.indrelid OPERATOR(pg_catalog.=) TG_RELID AND i.indisprimary) THEN
		RAISE EXCEPTION 'relation "%" has no primary key', TG_TABLE_NAME
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'record_transition identifies the rows it records by their primary key.';
	END IF;
	EXECUTE pg_catalog.format('SELECT CASE WHEN ($1).%1$I IS NOT NULL THEN pg_catalog.format(''%%s'', ($1).%1$I) END', v_column) INTO v_new USING NEW;
	IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
		EXECUTE pg_catalog.format('SELECT CASE WHEN ($1).%1$I IS NOT NULL THEN pg_catalog.format(''%%s'', ($1).%1$I) END', v_column) INTO v_old USING OLD;
	END IF;
	IF v_new IS NULL OR v_old OPERATOR(pg_catalog.=) v_new THEN
		RETURN NULL;			-- no change of state to record
	END IF;
	-- the primary key, in column order: numbers and booleans as such
	SELECT pg_catalog.jsonb_object_agg(a.attname,
			CASE WHEN v_row OPERATOR(pg_catalog.->) a.attname::pg_catalog.text OPERATOR(pg_catalog.=) 'null'::pg_catalog.jsonb THEN 'null'::pg_catalog.jsonb
				 WHEN t.typcategory OPERATOR(pg_catalog.=) 'B' THEN v_row OPERATOR(pg_catalog.->) a.attname::pg_catalog.text
				 WHEN t.typcategory OPERATOR(pg_catalog.=) 'N' AND t.oid OPERATOR(pg_catalog.<>) ALL (ARRAY['pg_catalog.float4'::pg_catalog.regtype, 'pg_catalog.float8'::pg_catalog.regtype, 'pg_catalog.money'::pg_catalog.regtype]::pg_catalog.oid[])
					  AND pg_catalog.jsonb_typeof(v_row OPERATOR(pg_catalog.->) a.attname::pg_catalog.text) OPERATOR(pg_catalog.=) 'number'
					  THEN v_row OPERATOR(pg_catalog.->) a.attname::pg_catalog.text
				 ELSE pg_catalog.to_jsonb(idempotency.portable_column_text(NEW, a.attname)) END
			ORDER BY a.attnum)
	  INTO v_key
	  FROM pg_catalog.pg_index AS i
	  JOIN pg_catalog.pg_attribute AS a ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid AND a.attnum OPERATOR(pg_catalog.=) ANY (i.indkey)
	  JOIN pg_catalog.pg_type AS t ON t.oid OPERATOR(pg_catalog.=) CASE WHEN (SELECT y.typtype FROM pg_catalog.pg_type AS y WHERE y.oid OPERATOR(pg_catalog.=) a.atttypid) OPERATOR(pg_catalog.=) 'd'
																	  THEN (SELECT y.typbasetype FROM pg_catalog.pg_type AS y WHERE y.oid OPERATOR(pg_catalog.=) a.atttypid)
																	  ELSE a.atttypid END
	 WHERE i.indrelid OPERATOR(pg_catalog.=) TG_RELID AND i.indisprimary;
	PERFORM idempotency.portable_record_history(CURRENT_USER, TG_RELID, v_key, v_old, v_new);
	RETURN NULL;
END
$$;

COMMENT ON FUNCTION idempotency.record_transition() IS
'AFTER INSERT OR UPDATE ... FOR EACH ROW trigger: record_transition(state_column) writes state_history';

/* a column of a row as its text output */
CREATE FUNCTION idempotency.portable_column_text(r anyelement, column_name pg_catalog.name)
RETURNS pg_catalog.text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v pg_catalog.text;
BEGIN
	EXECUTE pg_catalog.format('SELECT CASE WHEN ($1).%1$I IS NOT NULL THEN pg_catalog.format(''%%s'', ($1).%1$I) END', column_name) INTO v USING r;
	RETURN v;
END
$$;

COMMENT ON FUNCTION idempotency.portable_column_text(anyelement, pg_catalog.name) IS
'a column of a row as its text output';
