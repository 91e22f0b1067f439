/*-------------------------------------------------------------------------
 *
 * citus_metadata.c
 *	  Which of the extension's tables Citus distributes, and how: read from
 *	  Citus's catalog table pg_dist_partition, kept per backend.
 *
 * Nothing here links against Citus: Citus is optional.  Its catalog is
 * read the way Citus's own metadata cache reads it, with a scan of the
 * table under the catalog snapshot, so that the SQL frame (frame/sqlcall.c),
 * which plans differently for distributed tables, can ask before any SQL
 * runs.  A database without Citus pays one syscache probe per backend and
 * table.  The answer is kept until a relcache invalidation of the table
 * (Citus sends one when it distributes a table, on every node that learns
 * of it).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/objects/citus_metadata.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "objects/citus_metadata.h"
#include "objects/extension.h"

/* The tables whose distribution we keep track of, among the extension's. */
static const IdempotencyRelation citus_table_relations[CITUS_NUM_TABLES] = {
	[CITUS_REGISTRY] = IR_REGISTRY,
	[CITUS_INBOX] = IR_INBOX,
	[CITUS_TOKENS] = IR_TOKENS,
	[CITUS_HISTORY] = IR_STATE_HISTORY,
	[CITUS_OUTBOX] = IR_OUTBOX,
};

typedef struct CitusTableState
{
	bool		valid;
	Oid			relid;
	char		partmethod;		/* pg_dist_partition.partmethod; '\0': not a
								 * Citus table */
} CitusTableState;

static CitusTableState citus_tables[CITUS_NUM_TABLES];

/*
 * IdempotencyCitusCatalogExists
 *		Whether Citus's catalog tables are there (the extension is created in
 *		this database).  A syscache probe.
 */
bool
IdempotencyCitusCatalogExists(void)
{
	return OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE));
}

/*
 * citus_attnum
 *		A column of one of Citus's catalog tables, by name: Citus adds
 *		columns between its versions, so positions are not relied on.
 */
static AttrNumber
citus_attnum(Relation rel, const char *name)
{
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att->attnum;
	}
	elog(ERROR, "column %s.%s does not exist", RelationGetRelationName(rel), name);
	return InvalidAttrNumber;	/* keep the compiler quiet */
}

/*
 * citus_read_partmethod
 *		pg_dist_partition.partmethod of relid, '\0' without a row.
 */
static char
citus_read_partmethod(Oid relid)
{
	Oid			partition = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char		partmethod = '\0';

	if (!OidIsValid(partition))
		return '\0';
	rel = table_open(partition, AccessShareLock);
	ScanKeyInit(&key, citus_attnum(rel, "logicalrelid"), BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		value = heap_getattr(tuple, citus_attnum(rel, "partmethod"),
										 RelationGetDescr(rel), &isnull);

		if (!isnull)
			partmethod = DatumGetChar(value);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return partmethod;
}

/*
 * IdempotencyCitusPartMethod
 *		How Citus distributes one of our tables: 'h' (hash), 'n' (reference
 *		or Citus local table), ..., or '\0' when it is a plain table.
 */
char
IdempotencyCitusPartMethod(CitusTable table)
{
	CitusTableState *state = &citus_tables[table];

	if (state->valid)
		return state->partmethod;

	state->relid = IdempotencyCatalogGet()->relids[citus_table_relations[table]];
	state->partmethod = OidIsValid(state->relid) ? citus_read_partmethod(state->relid) : '\0';
	state->valid = true;
	return state->partmethod;
}

/*
 * IdempotencyCitusTableRelid
 *		The table IdempotencyCitusPartMethod last answered for (kept when its
 *		answer is invalidated), InvalidOid if none yet: what an invalidation
 *		callback may compare with, without looking anything up.
 */
Oid
IdempotencyCitusTableRelid(CitusTable table)
{
	return citus_tables[table].relid;
}

/*
 * IdempotencyCitusMetadataInvalidate
 *		Forget what we know about a table when it (or everything, InvalidOid)
 *		is invalidated.
 */
void
IdempotencyCitusMetadataInvalidate(Oid relid)
{
	for (int i = 0; i < CITUS_NUM_TABLES; i++)
		if (relid == InvalidOid || relid == citus_tables[i].relid)
			citus_tables[i].valid = false;
}
