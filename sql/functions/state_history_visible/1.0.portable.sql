/*
 * history.c's state_history_visible, in SQL: the table is still the one
 * written (its OID has the recorded name), the role may SELECT it, and no
 * row-level security of it applies to the role.
 */
CREATE FUNCTION idempotency.state_history_visible(table_oid pg_catalog.oid,
												  table_name pg_catalog.text)
RETURNS pg_catalog.bool
LANGUAGE sql STABLE STRICT PARALLEL SAFE
BEGIN ATOMIC
	SELECT COALESCE((SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname)
							OPERATOR(pg_catalog.=) table_name
						AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
						AND NOT pg_catalog.row_security_active(c.oid)
					   FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
					  WHERE c.oid OPERATOR(pg_catalog.=) table_oid), false);
END;

COMMENT ON FUNCTION idempotency.state_history_visible(pg_catalog.oid, pg_catalog.text) IS
'whether the current role may read state_history rows about a table: it is still that table, readable in full';
