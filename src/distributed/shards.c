/*-------------------------------------------------------------------------
 *
 * shards.c
 *	  Shards seen by triggers (Citus rule 15): the distributed table a shard
 *	  belongs to, for history rows and for the state machine cache.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/distributed/shards.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "distributed/shards.h"
#include "frame/sqlcall.h"
#include "objects/citus_metadata.h"

/* The last relation asked about by IdempotencyCitusShardOf, and the answer. */
static Oid	shard_cache_relid = InvalidOid;
static Oid	shard_cache_parent = InvalidOid;

/* the distributed table a shard id belongs to, on the caller's snapshot */
static SqlStatement shard_table_stmt = {
	.sql = "SELECT s.logicalrelid::pg_catalog.oid FROM pg_catalog.pg_dist_shard AS s"
	" WHERE s.shardid OPERATOR(pg_catalog.=) $1",
	.nargs = 1,
	.argtypes = {INT8OID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
	.snapshot = SQL_SNAPSHOT_CALLER,
	.catalog_only = true,
};


/*
 * IdempotencyCitusShardInvalidate
 *		Forget the last answer when its relation (or everything) is
 *		invalidated.
 */
void
IdempotencyCitusShardInvalidate(Oid relid)
{
	if (relid == InvalidOid || relid == shard_cache_relid)
		shard_cache_relid = InvalidOid;
}

/*
 * IdempotencyCitusShardOf
 *		The distributed table that rel is a shard of, or InvalidOid.  A
 *		trigger on a distributed table fires on its shards, where TG_RELID is
 *		the shard: "orders_102173" in the table's schema, the table's name and
 *		its shard id, which pg_dist_shard confirms.  The answer for the last
 *		relation asked about is kept until it is invalidated, so a statement
 *		writing many rows asks Citus once.
 */
Oid
IdempotencyCitusShardOf(Relation rel)
{
	const char *name = RelationGetRelationName(rel);
	const char *suffix = strrchr(name, '_');
	Oid			parent = InvalidOid;

	if (RelationGetRelid(rel) == shard_cache_relid)
		return shard_cache_parent;

	if (suffix != NULL && suffix[1] != '\0' &&
		strspn(suffix + 1, "0123456789") == strlen(suffix + 1) &&
		strlen(suffix + 1) < 19 && IdempotencyCitusCatalogExists())
	{
		Datum		values[1] = {Int64GetDatum(strtoi64(suffix + 1, NULL, 10))};
		bool		isnull;
		SqlCall		call;

		SqlCallBeginAsCaller(&call);
		if (SqlExecute(&shard_table_stmt, values, NULL) == 1)
		{
			Oid			candidate = DatumGetObjectId(SqlResult(0, 1, &isnull));
			char	   *candidate_name = get_rel_name(candidate);

			if (candidate_name != NULL &&
				get_rel_namespace(candidate) == RelationGetNamespace(rel) &&
				strlen(candidate_name) == (size_t) (suffix - name) &&
				strncmp(candidate_name, name, suffix - name) == 0)
				parent = candidate;
		}
		SqlCallEnd(&call);
	}
	shard_cache_relid = RelationGetRelid(rel);
	shard_cache_parent = parent;
	return parent;
}

/*
 * IdempotencyCitusTableName
 *		The schema-qualified name of the table a trigger fired for: of the
 *		distributed table when it fired on a shard.
 */
char *
IdempotencyCitusTableName(Relation rel)
{
	Oid			parent = IdempotencyCitusShardOf(rel);

	if (OidIsValid(parent))
		return quote_qualified_identifier(get_namespace_name(get_rel_namespace(parent)),
										  get_rel_name(parent));
	return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
									  RelationGetRelationName(rel));
}
