/*
 * extend_usage(object_type, object_name): an object added to
 * application_api by an update script is granted to every application role
 * (the rows of application_roles whose role exists), and its initial
 * privileges are put back as they were before, for pg_dump's sake (see
 * carry_privileges).
 */
CREATE OR REPLACE FUNCTION idempotency.extend_usage(object_type pg_catalog.text,
													object_name pg_catalog.text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	target pg_catalog.oid;
	target_class pg_catalog.regclass;
	app record;
	saved pg_catalog.pg_init_privs;
BEGIN
	IF object_type OPERATOR(pg_catalog.=) 'function' THEN
		target := pg_catalog.to_regproc('idempotency.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(object_name));
		target_class := 'pg_catalog.pg_proc';
	ELSE
		target := pg_catalog.to_regclass('idempotency.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(object_name));
		target_class := 'pg_catalog.pg_class';
	END IF;
	IF target IS NULL THEN
		RAISE EXCEPTION 'extension object idempotency.% does not exist', object_name
			USING ERRCODE = 'undefined_object';
	END IF;

	SELECT i.* INTO saved FROM pg_catalog.pg_init_privs AS i
	 WHERE i.objoid OPERATOR(pg_catalog.=) target
	   AND i.classoid OPERATOR(pg_catalog.=) target_class
	   AND i.objsubid OPERATOR(pg_catalog.=) 0;

	FOR app IN
		SELECT r.role_name FROM idempotency.application_roles AS r
		 WHERE pg_catalog.to_regrole(pg_catalog.quote_ident(r.role_name)) IS NOT NULL
	LOOP
		EXECUTE pg_catalog.format('GRANT %s ON %s idempotency.%I TO %I',
								  (SELECT l.privilege FROM idempotency.application_api AS l
									WHERE l.object_type OPERATOR(pg_catalog.=) extend_usage.object_type
									  AND l.object_name OPERATOR(pg_catalog.=) extend_usage.object_name),
								  CASE object_type WHEN 'function' THEN 'FUNCTION' ELSE 'TABLE' END,
								  object_name, app.role_name);
	END LOOP;

#if c
	DELETE FROM pg_catalog.pg_init_privs
	 WHERE objoid OPERATOR(pg_catalog.=) target
	   AND classoid OPERATOR(pg_catalog.=) target_class
	   AND objsubid OPERATOR(pg_catalog.=) 0;
	IF saved.objoid IS NOT NULL THEN
		INSERT INTO pg_catalog.pg_init_privs SELECT saved.*;
	END IF;
#endif
END;
$$;
