/*-------------------------------------------------------------------------
 *
 * citus_records.c
 *	  my_records once citus_setup() has distributed the registry (Citus
 *	  rule 14): the caller's records read as the registry's owner, because
 *	  Citus checks shard privileges as the caller.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/citus_records.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "funcapi.h"
#include "utils/tuplestore.h"

#include "distributed/delegate.h"
#include "registry/registry.h"

/*
 * citus_emit_record
 *		One row of my_records: the registry's columns, and whether it expired
 *		(as of the transaction's start, as now() in the view).
 */
static void
citus_emit_record(ReturnSetInfo *rsinfo, HeapTuple tuple, TupleDesc desc)
{
	TupleDesc	out = rsinfo->setDesc;
	RegistryOutput *map = RegistryOutputMap(out);
	RegistryRow row;
	Datum	   *values = palloc0(out->natts * sizeof(Datum));
	bool	   *nulls = palloc(out->natts * sizeof(bool));

	memset(nulls, true, out->natts * sizeof(bool));
	RegistryRowFromTuple(&row, tuple, desc);
	RegistryOutputFill(map, &row, values, nulls);
	for (int i = 0; i < out->natts; i++)
	{
		if (strcmp(NameStr(TupleDescAttr(out, i)->attname), "expired") != 0)
			continue;
		values[i] = BoolGetDatum(!RegistryRowLive(&row, GetCurrentTransactionStartTimestamp()));
		nulls[i] = false;
	}
	tuplestore_putvalues(rsinfo->setResult, out, values, nulls);
}

PG_FUNCTION_INFO_V1(idempotency_citus_my_records);

/*
 * idempotency_citus_my_records
 *		The caller's records, read as the registry's owner: what my_records
 *		shows once citus_setup() has distributed the registry.
 */
Datum
idempotency_citus_my_records(PG_FUNCTION_ARGS)
{
	IdempotencyCitusOwnRows(fcinfo, "my_records", RegistrySelectOwn, citus_emit_record);
	return (Datum) 0;
}
