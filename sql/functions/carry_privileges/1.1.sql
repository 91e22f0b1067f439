/*
 * carry_privileges(old, new): give new the privileges that were granted on
 * old after the extension was installed, and take from it those that were
 * revoked from old, so that new has old's ACL; then record new's initial
 * privileges as old's, so that pg_dump dumps the same grants for new as it
 * did for old.  Runs as the superuser running the update script.
 */
CREATE FUNCTION idempotency.carry_privileges(old_fn pg_catalog.regprocedure,
											 new_fn pg_catalog.regprocedure)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	change record;
BEGIN
	FOR change IN
		WITH now_acl AS (
			SELECT a.grantee, a.privilege_type, a.is_grantable
			  FROM pg_catalog.pg_proc AS p,
				   pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) AS a
			 WHERE p.oid OPERATOR(pg_catalog.=) old_fn),
		new_acl AS (
			SELECT a.grantee, a.privilege_type, a.is_grantable
			  FROM pg_catalog.pg_proc AS p,
				   pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) AS a
			 WHERE p.oid OPERATOR(pg_catalog.=) new_fn)
		SELECT 'GRANT' AS verb, g.* FROM (TABLE now_acl EXCEPT TABLE new_acl) AS g
		UNION ALL
		SELECT 'REVOKE', r.* FROM (TABLE new_acl EXCEPT TABLE now_acl) AS r
	LOOP
		EXECUTE pg_catalog.format('%s %s ON FUNCTION %s %s %s%s',
								  change.verb, change.privilege_type, new_fn,
								  CASE change.verb WHEN 'GRANT' THEN 'TO' ELSE 'FROM' END,
								  CASE change.grantee WHEN 0 THEN 'PUBLIC'
								  ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(change.grantee)) END,
								  CASE WHEN change.verb OPERATOR(pg_catalog.=) 'GRANT' AND change.is_grantable
								  THEN ' WITH GRANT OPTION' ELSE '' END);
	END LOOP;

#if c
	DELETE FROM pg_catalog.pg_init_privs
	 WHERE objoid OPERATOR(pg_catalog.=) new_fn
	   AND classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
	   AND objsubid OPERATOR(pg_catalog.=) 0;
	INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
	SELECT new_fn, i.classoid, i.objsubid, i.privtype, i.initprivs
	  FROM pg_catalog.pg_init_privs AS i
	 WHERE i.objoid OPERATOR(pg_catalog.=) old_fn
	   AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
	   AND i.objsubid OPERATOR(pg_catalog.=) 0;
#endif
END;
$$;

COMMENT ON FUNCTION idempotency.carry_privileges(pg_catalog.regprocedure, pg_catalog.regprocedure) IS
'for update scripts: give a function that replaces another the other''s privileges, as an installation granted them';

REVOKE ALL ON FUNCTION idempotency.carry_privileges(pg_catalog.regprocedure, pg_catalog.regprocedure) FROM PUBLIC;
