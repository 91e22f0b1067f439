/*
 * owner.c's rule, in PL/pgSQL: an application role and a superuser store
 * under their own names; another role under the one application role whose
 * privileges it has (IK007 if more than one); a role that has none but holds
 * part of the API is refused (IK008); any other role, its own name.
 *
 * Whose call it is: in the C edition, current_user.  Inside a SECURITY
 * DEFINER function current_user is that function's owner, so every API
 * function of the portable edition is a SECURITY INVOKER function in SQL
 * that passes its current_user to a SECURITY DEFINER body, and the body
 * asks portable_owner for the owner.  A body can be called directly with
 * any name, so portable_owner believes the name only if the session's role
 * (the one SET ROLE chose, while the login may still choose it, or the
 * login; neither can be claimed without the right to) has the privileges of
 * the role named: what a session could
 * do as that role anyway.  A caller that is a SECURITY DEFINER function
 * owned by a role whose privileges the session does not have is refused,
 * where the C edition works on that owner's records (doc/portable.md).  With
 * api, the caller must also hold EXECUTE on that function of the API, as
 * it must to call it: a body is no way around a grant revoked.
 *
 * Only the bodies call it, with their owner's rights and search_path, so it
 * has neither of its own (each costs every call of the API); owner_name()
 * asks it through a body of its own.
 */
CREATE FUNCTION idempotency.portable_owner(caller pg_catalog.name, api pg_catalog.regprocedure)
RETURNS pg_catalog.text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
	session_role pg_catalog.name := COALESCE(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user);
	found pg_catalog.name;
	app pg_catalog.name;
BEGIN
	IF caller IS NULL THEN
		RAISE EXCEPTION 'caller must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	-- the setting keeps the name SET ROLE was given, also once that role is
	-- renamed (and the name perhaps given to another): believed only while
	-- the login may still SET ROLE to the role of that name, else the
	-- session is its login's
	IF session_role OPERATOR(pg_catalog.<>) session_user
	   AND (pg_catalog.to_regrole(pg_catalog.quote_ident(session_role)) IS NULL
			OR NOT pg_catalog.pg_has_role(session_user, session_role, 'MEMBER')) THEN
		session_role := session_user;
	END IF;
	IF caller OPERATOR(pg_catalog.<>) session_role AND NOT pg_catalog.pg_has_role(session_role, caller, 'USAGE') THEN
		RAISE EXCEPTION 'the portable edition of idempotency cannot work for role "%" in a session of role "%"', caller, session_role
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = pg_catalog.format('The call came from code running as "%s" (a SECURITY DEFINER function) whose privileges "%s" does not have; the portable edition works only for roles whose privileges the session has.', caller, session_role),
				  HINT = 'Make the call outside SECURITY DEFINER code owned by another role, or use the C edition.';
	END IF;
	IF api IS NOT NULL AND NOT pg_catalog.has_function_privilege(caller, api, 'EXECUTE') THEN
		RAISE EXCEPTION 'permission denied for function %',
			(SELECT p.proname FROM pg_catalog.pg_proc AS p WHERE p.oid OPERATOR(pg_catalog.=) api)
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	-- an application role (the common caller, asked first) or a superuser:
	-- its own name
	IF EXISTS (SELECT FROM idempotency.application_roles AS a
				WHERE a.role_name OPERATOR(pg_catalog.=) caller::pg_catalog.text) THEN
		RETURN caller;
	END IF;
	IF (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) caller) THEN
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
				  HINT = pg_catalog.format('As the database owner who installed idempotency, run SELECT idempotency.grant_usage(''%s''), or make it a member of its application role.', caller);
	END IF;
	RETURN caller;
END
$$;

COMMENT ON FUNCTION idempotency.portable_owner(pg_catalog.name, pg_catalog.regprocedure) IS
'the role name a caller''s records are stored under, the caller checked against the session';

REVOKE ALL ON FUNCTION idempotency.portable_owner(pg_catalog.name, pg_catalog.regprocedure) FROM PUBLIC;

CREATE FUNCTION idempotency.portable_owner_name(caller pg_catalog.name)
RETURNS pg_catalog.text
LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	RETURN idempotency.portable_owner(caller, NULL);
END
$$;

COMMENT ON FUNCTION idempotency.portable_owner_name(pg_catalog.name) IS
'owner_name() for a caller, checked against the session';

CREATE FUNCTION idempotency.owner_name()
RETURNS pg_catalog.text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN idempotency.portable_owner_name(CURRENT_USER);

COMMENT ON FUNCTION idempotency.owner_name() IS
'the role name the caller''s records are stored under: the application role grant_usage was given to';
