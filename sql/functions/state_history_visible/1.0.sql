/*
 * state_history_visible(table_oid, table_name): whether the current role may
 * read a history row about that table: the table still exists under that
 * name (a table dropped, renamed, or created again under the old name is
 * another table), the role may SELECT it, and no row-level security
 * applies to the role there (it sees every row the history describes).
 */
CREATE FUNCTION idempotency.state_history_visible(table_oid pg_catalog.oid,
												  table_name pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_state_history_visible'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.state_history_visible(pg_catalog.oid, pg_catalog.text) IS
'whether the current role may read state_history rows about a table: it is still that table, readable in full';
