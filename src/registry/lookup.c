/*-------------------------------------------------------------------------
 *
 * lookup.c
 *	  lookup: the caller's live record, read without claiming anything.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/lookup.c
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



PG_FUNCTION_INFO_V1(idempotency_lookup);

/*
 * idempotency_lookup
 *		lookup(key, scope, request): the caller's live record, read without
 *		claiming anything.  A claim whose transaction has not committed is
 *		not visible, so it is not found, but for this transaction's own: one
 *		held in memory is found as it would be written.
 */
Datum
idempotency_lookup(PG_FUNCTION_ARGS)
{
	static ApiResult result_cache;
	ApiResult  *res;
	SqlCall		call;
	Datum	   *values;
	bool	   *nulls;
	Datum		key;
	Datum		scope;
	Jsonb	   *request = NULL;
	RegistryRow rec;
	XactClaim  *mine;
	bool		found = false;
	int			matches_col;
	Datum		delegated;

	IdempotencyCheckNargs(fcinfo, 3);
	key = IdempotencyKeyArg(fcinfo, 0);
	scope = IdempotencyScopeArg(fcinfo, 1);
	if (IdempotencyCitusDelegate(fcinfo, CITUS_DELEGATE_LOOKUP, &delegated))
		return delegated;
	if (!PG_ARGISNULL(2))
		request = PG_GETARG_JSONB_P(2);
	res = RegistryApiResult(fcinfo, &result_cache, "found");
	values = palloc0(res->out->desc->natts * sizeof(Datum));
	nulls = palloc(res->out->desc->natts * sizeof(bool));
	memset(nulls, true, res->out->desc->natts * sizeof(bool));
	matches_col = RegistryApiColumn(res->out->desc, "request_matches");

	SqlCallBegin(&call);
	mine = XactClaimFind(call.owner, scope, key);
	if (mine != NULL && mine->written_level == 0 && mine->kind == XACT_CLAIM_TRANSACTIONAL)
	{
		/* this transaction's claim, held in memory: as if it were written */
		found = true;
		rec = mine->row;
	}
	else if (RegistryLookup(&call, scope, key, &rec) && RegistryRowLive(&rec, call.now))
		found = true;
	if (found)
	{
		if (request != NULL && !rec.nulls[RC_fingerprint])
		{
			values[matches_col] =
				BoolGetDatum(RegistryByteaEqual(rec.values[RC_fingerprint],
												RegistryFingerprint(request)));
			nulls[matches_col] = false;
		}
		RegistryRowKeep(&call, &rec);
		RegistryOutputFill(res->out, &rec, values, nulls);
	}
	SqlCallEnd(&call);

	values[res->own] = BoolGetDatum(found);
	nulls[res->own] = false;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(res->out->desc, values, nulls)));
}
