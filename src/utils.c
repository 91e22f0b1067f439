/*-------------------------------------------------------------------------
 *
 * utils.c
 *	  Argument checks and helpers that the SQL-callable functions share:
 *	  required arguments, keys, scopes, positive intervals, a key's display
 *	  form and SHA-256.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/utils.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "utils/builtins.h"
#include "utils/resowner.h"

#include "idempotency.h"
#include "key.h"
#include "utils.h"

/*
 * IdempotencyRequireArg
 *		Reject a NULL argument that the function cannot do without.
 */
void
IdempotencyRequireArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

/*
 * IdempotencyKeyArg
 *		A key argument, checked: the functions take text (so that a text or
 *		varchar value needs no cast) and apply the key type's own rules.
 */
Datum
IdempotencyKeyArg(FunctionCallInfo fcinfo, int argno)
{
	text	   *t;

	IdempotencyRequireArg(fcinfo, argno, "idempotency key");
	t = PG_GETARG_TEXT_PP(argno);
	return PointerGetDatum(IdempotencyKeyFromBytes(VARDATA_ANY(t),
												   VARSIZE_ANY_EXHDR(t)));
}

/*
 * IdempotencyScopeArg
 *		A scope argument, checked.  The empty string is the default scope.
 */
Datum
IdempotencyScopeArg(FunctionCallInfo fcinfo, int argno)
{
	text	   *scope;

	IdempotencyRequireArg(fcinfo, argno, "scope");
	scope = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(scope) > IDEMPOTENCY_SCOPE_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scope must be at most %d bytes long",
						IDEMPOTENCY_SCOPE_MAXLEN)));
	return PointerGetDatum(scope);
}

/*
 * IdempotencyAddPositive
 *		now + interval, which must lie after now (ttl, lease); timestamptz's
 *		own error if it overflows.
 */
TimestampTz
IdempotencyAddPositive(TimestampTz now, Datum interval, const char *name)
{
	TimestampTz result = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
																 TimestampTzGetDatum(now),
																 interval));

	if (result <= now)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a positive interval", name)));
	return result;
}

/*
 * IdempotencyKeyDisplay
 *		A key (a text datum) as a message shows it.
 */
char *
IdempotencyKeyDisplay(Datum key)
{
	text	   *t = DatumGetTextPP(key);

	return IdempotencyDisplayValue(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

/*
 * IdempotencySha256
 *		SHA-256 of a byte string, through PostgreSQL's own cryptohash API
 *		(OpenSSL when the server was built with it).
 *
 * Every begin with a request hashes its fingerprint, and setting a hash
 * context up (OpenSSL's EVP context, the resource owner's bookkeeping) costs
 * more than hashing a small request.  So one context is kept for the life
 * of the backend and initialised again for each hash.  It belongs to a
 * resource owner of its own, never released: the transaction's would free
 * it (with a leak warning) at the end of the transaction.  An error in the
 * middle of a hash leaves it to the next pg_cryptohash_init, which starts
 * afresh.
 */
void
IdempotencySha256(const char *data, size_t len,
				  uint8 digest[IDEMPOTENCY_SHA256_LEN])
{
	static pg_cryptohash_ctx *ctx = NULL;

	if (ctx == NULL)
	{
		static ResourceOwner owner = NULL;
		ResourceOwner save = CurrentResourceOwner;

		if (owner == NULL)
			owner = ResourceOwnerCreate(NULL, "idempotency SHA-256");
		CurrentResourceOwner = owner;
		PG_TRY();
		{
			ctx = pg_cryptohash_create(PG_SHA256);
		}
		PG_FINALLY();
		{
			CurrentResourceOwner = save;
		}
		PG_END_TRY();
	}

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) data, len) < 0 ||
		pg_cryptohash_final(ctx, digest, IDEMPOTENCY_SHA256_LEN) < 0)
		elog(ERROR, "could not compute SHA-256 hash: %s", pg_cryptohash_error(ctx));
}
