/*-------------------------------------------------------------------------
 *
 * locks.c
 *	  idempotency.lock() and idempotency.try_lock(): transaction-scoped
 *	  advisory locks on a key, to serialise work on a hot key before the
 *	  registry is touched (pessimistic locking, beside the version column's
 *	  optimistic one).
 *
 * The lock is PostgreSQL's advisory lock on a 64-bit hash of (owner, scope,
 * key), so two roles never contend on each other's keys.  Advisory locks are
 * node-local: under Citus each node has its own, and claims are serialised
 * by the registry's unique index, never by these locks (Citus rule 5).
 * The 64-bit space is shared with the application's own
 * pg_advisory_xact_lock(bigint) calls; a collision only serialises more.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/locks.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "extension.h"
#include "idempotency.h"
#include "sqlcall.h"
#include "utils.h"

/* A fixed seed, so that the same key maps to the same lock in every backend. */
#define LOCK_HASH_SEED UINT64CONST(0x69646d70)

/*
 * lock_tag
 *		The 64-bit lock number of (current role, scope, key).
 */
static int64
lock_tag(FunctionCallInfo fcinfo)
{
	text	   *key;
	text	   *scope;
	text	   *owner = DatumGetTextPP(SqlRoleName(GetUserId()));
	StringInfoData buf;
	uint64		h;

	key = DatumGetTextPP(IdempotencyKeyArg(fcinfo, 0));
	scope = DatumGetTextPP(IdempotencyScopeArg(fcinfo, 1));

	/* NUL separators: no two different triples give the same bytes */
	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, VARDATA_ANY(owner), VARSIZE_ANY_EXHDR(owner));
	appendStringInfoChar(&buf, '\0');
	appendBinaryStringInfo(&buf, VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope));
	appendStringInfoChar(&buf, '\0');
	appendBinaryStringInfo(&buf, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
	h = DatumGetUInt64(hash_any_extended((unsigned char *) buf.data, buf.len, LOCK_HASH_SEED));
	return (int64) h;
}

PG_FUNCTION_INFO_V1(idempotency_lock);

/*
 * idempotency_lock
 *		lock(key, scope): wait for the key's lock, held to the end of the
 *		transaction.
 */
Datum
idempotency_lock(PG_FUNCTION_ARGS)
{
	IdempotencyCheckNargs(fcinfo, 2);
	DirectFunctionCall1(pg_advisory_xact_lock_int8, Int64GetDatum(lock_tag(fcinfo)));
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(idempotency_try_lock);

/*
 * idempotency_try_lock
 *		try_lock(key, scope): take the key's lock if it is free.
 */
Datum
idempotency_try_lock(PG_FUNCTION_ARGS)
{
	IdempotencyCheckNargs(fcinfo, 2);
	return DirectFunctionCall1(pg_try_advisory_xact_lock_int8,
							   Int64GetDatum(lock_tag(fcinfo)));
}
