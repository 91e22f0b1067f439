/*
 * grant_usage(role) grants what application_api lists, and nothing else.
 * The role is a regrole, printed quoted by format('%s'); the object names
 * come from the list above and are quoted by %I.
 */
CREATE OR REPLACE FUNCTION idempotency.grant_usage(role pg_catalog.regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	api record;
BEGIN
	IF role IS NULL THEN
		RAISE EXCEPTION 'role must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	FOR api IN SELECT a.object_type, a.object_name, a.privilege
				 FROM idempotency.application_api AS a
	LOOP
		EXECUTE pg_catalog.format('GRANT %s ON %s idempotency.%I TO %s',
								  api.privilege,
								  CASE api.object_type WHEN 'function' THEN 'FUNCTION' ELSE 'TABLE' END,
								  api.object_name, role);
	END LOOP;
END;
$$;

COMMENT ON FUNCTION idempotency.grant_usage(pg_catalog.regrole) IS
'grant a role the application API and nothing else: the functions and views listed in idempotency.application_api';
