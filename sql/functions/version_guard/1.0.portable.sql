/*
 * version_guard.c's version_guard, in PL/pgSQL, with one difference: a
 * PL/pgSQL trigger cannot tell which columns the UPDATE set (the C edition
 * reads tg_updatedcols), so an update that leaves the version as it was,
 * whether it left the column out or set it to the row's version from a
 * stale copy, is refused as a stale write rather than bumped: every update
 * must set the version to one more than the row's (doc/portable.md).  That
 * never lets a stale write through; it refuses updates that left the
 * column out.
 */
CREATE FUNCTION idempotency.version_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_column pg_catalog.text := TG_ARGV[0];
	v_typid pg_catalog.oid;
	v_old pg_catalog.int8;
	v_new pg_catalog.int8;
BEGIN
	v_typid := idempotency.portable_trigger_check('version_guard', TG_RELID, TG_NAME, true, true, 1,
												  'one argument, the version column', v_column, NULL);
	IF v_typid OPERATOR(pg_catalog.<>) ALL (ARRAY['pg_catalog.int2'::pg_catalog.regtype, 'pg_catalog.int4'::pg_catalog.regtype,
												  'pg_catalog.int8'::pg_catalog.regtype]::pg_catalog.oid[]) THEN
		RAISE EXCEPTION 'version column "%" must be of type smallint, integer or bigint', v_column
			USING ERRCODE = 'datatype_mismatch';
	END IF;
	EXECUTE pg_catalog.format('SELECT ($1).%I::pg_catalog.int8, ($2).%I::pg_catalog.int8', v_column, v_column)
	   INTO v_old, v_new USING OLD, NEW;
	IF v_old IS NULL OR v_new IS NULL THEN
		RAISE EXCEPTION 'null value in version column "%" of relation "%"', v_column, TG_TABLE_NAME
			USING ERRCODE = 'not_null_violation', TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA, COLUMN = v_column;
	END IF;
	IF v_new OPERATOR(pg_catalog.<>) (v_old OPERATOR(pg_catalog.+) 1) THEN
		RAISE EXCEPTION 'stale write to relation "%"', TG_TABLE_NAME
			USING ERRCODE = 'IV001',
				  DETAIL = pg_catalog.format('The update sets "%s" to %s, but the row is at version %s: an update must set it to %s%s.',
											 v_column, v_new, v_old, v_old OPERATOR(pg_catalog.+) 1,
											 CASE WHEN v_new OPERATOR(pg_catalog.=) v_old THEN ' (the portable edition cannot tell an update that leaves it out)' ELSE ', or leave it out' END),
				  HINT = 'Read the row again and retry.',
				  TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA, COLUMN = v_column;
	END IF;
	RETURN NEW;
END
$$;

COMMENT ON FUNCTION idempotency.version_guard() IS
'BEFORE UPDATE ... FOR EACH ROW trigger: version_guard(column) bumps the version by one and refuses stale writes';
