/*-------------------------------------------------------------------------
 *
 * result.c
 *	  The result rows of idempotent_begin and lookup.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/result.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "base/sha256.h"
#include "base/stats.h"
#include "distributed/delegate.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "key/args.h"
#include "key/key.h"
#include "messages/tokens.h"
#include "objects/extension.h"
#include "registry/api.h"
#include "registry/http_headers.h"
#include "registry/registry.h"
#include "registry/xactclaims.h"




/*
 * RegistryApiColumnFind
 *		The position of a function's own result column, -1 if it has none
 *		of that name.
 */
int
RegistryApiColumnFind(TupleDesc desc, const char *name)
{
	for (int i = 0; i < desc->natts; i++)
		if (strcmp(NameStr(TupleDescAttr(desc, i)->attname), name) == 0)
			return i;
	return -1;
}

/*
 * RegistryApiColumn
 *		The position of a function's own result column.
 */
int
RegistryApiColumn(TupleDesc desc, const char *name)
{
	int			i = RegistryApiColumnFind(desc, name);

	if (i < 0)
		elog(ERROR, "result has no column \"%s\"", name);
	return i;
}

/*
 * RegistryApiResult
 *		The result row of the function being called, from its cache.
 */
ApiResult  *
RegistryApiResult(FunctionCallInfo fcinfo, ApiResult *cache, const char *own)
{
	TupleDesc	tupdesc;
	MemoryContext oldcontext;

	if (cache->out != NULL && cache->fn == fcinfo->flinfo->fn_oid)
		return cache;

	oldcontext = MemoryContextSwitchTo(TopMemoryContext);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	MemoryContextSwitchTo(oldcontext);

	if (cache->out != NULL)
	{
		FreeTupleDesc(cache->out->desc);
		pfree(cache->out);
	}
	oldcontext = MemoryContextSwitchTo(TopMemoryContext);
	cache->out = RegistryOutputMap(tupdesc);
	MemoryContextSwitchTo(oldcontext);
	cache->fn = fcinfo->flinfo->fn_oid;
	cache->own = RegistryApiColumn(tupdesc, own);
	cache->previous_attempt = RegistryApiColumnFind(tupdesc, "previous_attempt");
	cache->previous_end = RegistryApiColumnFind(tupdesc, "previous_end");
	cache->retry_after = RegistryApiColumnFind(tupdesc, "retry_after");
	return cache;
}
