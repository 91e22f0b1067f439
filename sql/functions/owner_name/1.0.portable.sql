/*
 * owner.c's rule, in PL/pgSQL: an application role and a superuser store
 * under their own names; another role under the one application role whose
 * privileges it has (IK007 if more than one); a role that has none but holds
 * part of the API is refused (IK008); any other role, its own name.
 *
 * SECURITY DEFINER, to read application_roles; inside it current_user is
 * its owner, so the caller is the session's role: the one SET ROLE chose,
 * or the login (doc/portable.md: a call from inside another SECURITY
 * DEFINER function is the session's, not that function owner's, as it is
 * in the C edition).
 */
CREATE FUNCTION idempotency.owner_name()
RETURNS pg_catalog.text
LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	caller pg_catalog.name := COALESCE(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user);
	found pg_catalog.name;
	app pg_catalog.name;
BEGIN
	IF (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) caller) THEN
		RETURN caller;
	END IF;
	IF EXISTS (SELECT FROM idempotency.application_roles AS a
				WHERE a.role_name OPERATOR(pg_catalog.=) caller::pg_catalog.text) THEN
		RETURN caller;
	END IF;
	FOR app IN
		SELECT a.role_name::pg_catalog.name FROM idempotency.application_roles AS a
		 WHERE pg_catalog.to_regrole(pg_catalog.quote_ident(a.role_name)) IS NOT NULL
	LOOP
		CONTINUE WHEN NOT pg_catalog.pg_has_role(caller, app, 'USAGE');
		IF found IS NOT NULL THEN
			RAISE EXCEPTION 'role "%" belongs to more than one application role of extension "idempotency"', caller
				USING ERRCODE = 'IK007',
					  DETAIL = pg_catalog.format('It has the privileges of "%s" and of "%s", which were both granted the API, so its records could be stored under either.', found, app),
					  HINT = 'Grant the API to this role itself, make it a member of one application role only, or SET ROLE to the application role first.';
		END IF;
		found := app;
	END LOOP;
	IF found IS NOT NULL THEN
		RETURN found;
	END IF;
	IF EXISTS (SELECT FROM idempotency.application_api AS a,
					LATERAL (SELECT p.proacl AS acl FROM pg_catalog.pg_proc AS p
							  WHERE a.object_type OPERATOR(pg_catalog.=) 'function'
								AND p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regproc('idempotency.'
									OPERATOR(pg_catalog.||) pg_catalog.quote_ident(a.object_name))
							 UNION ALL
							 SELECT c.relacl FROM pg_catalog.pg_class AS c
							  WHERE a.object_type OPERATOR(pg_catalog.<>) 'function'
								AND c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass('idempotency.'
									OPERATOR(pg_catalog.||) pg_catalog.quote_ident(a.object_name))) AS o,
					pg_catalog.aclexplode(o.acl) AS x
				WHERE x.grantee OPERATOR(pg_catalog.<>) 0
				  AND x.privilege_type OPERATOR(pg_catalog.=) a.privilege
				  AND pg_catalog.pg_has_role(caller, x.grantee, 'USAGE')) THEN
		RAISE EXCEPTION 'role "%" is not an application role of extension "idempotency"', caller
			USING ERRCODE = 'IK008',
				  DETAIL = 'It holds privileges on the API, but grant_usage() was not given to it or to a role it has the privileges of, so it has no records of its own to work on.',
				  HINT = pg_catalog.format('As a superuser, run SELECT idempotency.grant_usage(''%s''), or make it a member of its application role.', caller);
	END IF;
	RETURN caller;
END
$$;

COMMENT ON FUNCTION idempotency.owner_name() IS
'the role name the caller''s records are stored under: the application role grant_usage was given to';
