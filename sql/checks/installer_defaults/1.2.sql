-- The installer's default privileges (ALTER DEFAULT PRIVILEGES, which an
-- administrator often has for a reporting role) would apply to every object
-- created below: grants would open the records, the installation's secret
-- and the administration to other roles, and revokes would close the bodies
-- to the applications.  Refuse any, and name them.  The statements of a
-- DO block that declares defaults pg_catalog.text.
SELECT pg_catalog.string_agg(pg_catalog.format('for %s %s',
		CASE WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'r' THEN 'tables'
			 WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'S' THEN 'sequences'
			 WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'f' THEN 'functions'
			 WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'T' THEN 'types' ELSE 'schemas' END,
		d.defaclacl::pg_catalog.text), ', ' ORDER BY d.defaclobjtype)
  INTO defaults
  FROM pg_catalog.pg_default_acl AS d
 WHERE d.defaclrole OPERATOR(pg_catalog.=) (SELECT r.oid FROM pg_catalog.pg_roles AS r
											 WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
   AND (d.defaclnamespace OPERATOR(pg_catalog.=) 0
		OR d.defaclnamespace OPERATOR(pg_catalog.=) (SELECT n.oid FROM pg_catalog.pg_namespace AS n
													  WHERE n.nspname OPERATOR(pg_catalog.=) 'idempotency'))
   AND d.defaclobjtype OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'S', 'f', 'T', 'n']::pg_catalog."char"[]);
IF defaults IS NOT NULL THEN
	RAISE EXCEPTION 'role "%" has default privileges, which would apply to the objects of idempotency', CURRENT_USER
		USING ERRCODE = 'object_not_in_prerequisite_state',
			  DETAIL = pg_catalog.format('Its default privileges are %s.', defaults),
			  HINT = 'Revoke them with ALTER DEFAULT PRIVILEGES for the installation or the update, and grant them again after it.';
END IF;
