/*-------------------------------------------------------------------------
 *
 * tokens.c
 *	  One-time tokens issued by the server: issue_token(), consume_token(),
 *	  and the require_token check of idempotent_begin.
 *
 * A form or checkout page asks for a token before it submits; the server
 * accepts each token once.  A token is 128 bits from the operating system's
 * cryptographic source (pg_strong_random), written as "tk_" and 32 hex
 * digits, so it is also a valid idempotency.key.  consume_token() answers
 * false alike for a used, an expired and a never-issued token, so that the
 * answer reveals nothing; the owner can see which in my_tokens.  Concurrent
 * consumers of one token are serialised by its row lock: the second re-checks
 * consumed_at on the newest row version and gets false.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/tokens.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "idempotency.h"

#define TOKEN_RANDOM_BYTES 16
#define TOKEN_PREFIX "tk_"

PG_FUNCTION_INFO_V1(idempotency_issue_token);

/*
 * idempotency_issue_token
 *		issue_token(scope, ttl): a new unguessable token for the caller.
 */
Datum
idempotency_issue_token(PG_FUNCTION_ARGS)
{
	RegistryCall call;
	uint8		raw[TOKEN_RANDOM_BYTES];
	char		str[sizeof(TOKEN_PREFIX) - 1 + TOKEN_RANDOM_BYTES * 2 + 1];
	Datum		values[5];
	text	   *token;
	TimestampTz expires;

	values[1] = IdempotencyScopeArg(fcinfo, 0);
	IdempotencyRequireArg(fcinfo, 1, "ttl");

	if (!pg_strong_random(raw, sizeof(raw)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random token")));
	strcpy(str, TOKEN_PREFIX);
	hex_encode((const char *) raw, sizeof(raw), str + strlen(TOKEN_PREFIX));
	str[sizeof(str) - 1] = '\0';

	RegistryCallBegin(&call);
	expires = IdempotencyAddPositive(call.now, PG_GETARG_DATUM(1), "ttl");

	token = IdempotencyKeyFromBytes(str, strlen(str));
	values[0] = call.owner;
	values[2] = PointerGetDatum(token);
	values[3] = TimestampTzGetDatum(call.now);
	values[4] = TimestampTzGetDatum(expires);
	RegistryExecute(RS_TOKEN_ISSUE, values, NULL);
	RegistryCallEnd(&call);
	IdempotencyCount(STAT_TOKEN_ISSUED, 1);

	PG_RETURN_TEXT_P(token);
}

PG_FUNCTION_INFO_V1(idempotency_consume_token);

/*
 * idempotency_consume_token
 *		consume_token(token, scope): true exactly once while unexpired.
 */
Datum
idempotency_consume_token(PG_FUNCTION_ARGS)
{
	RegistryCall call;
	Datum		values[4];
	bool		consumed;

	IdempotencyRequireArg(fcinfo, 0, "token");
	values[2] = IdempotencyKeyArg(fcinfo, 0);
	values[1] = IdempotencyScopeArg(fcinfo, 1);

	RegistryCallBegin(&call);
	values[0] = call.owner;
	values[3] = TimestampTzGetDatum(call.now);
	consumed = RegistryExecute(RS_TOKEN_CONSUME, values, NULL) == 1;
	RegistryCallEnd(&call);
	if (consumed)
		IdempotencyCount(STAT_TOKEN_CONSUMED, 1);

	PG_RETURN_BOOL(consumed);
}

/*
 * TokenRequire
 *		For idempotent_begin(..., require_token => true): the key must be a
 *		token issued to the caller in this scope.  An unused one is consumed
 *		now (the begin then executes); a used one passes (the begin replays);
 *		a never-issued or expired one is refused with IK005.  Runs inside the
 *		caller's registry frame.
 */
void
TokenRequire(RegistryCall *call, Datum scope, Datum key)
{
	Datum		values[4] = {call->owner, scope, key, TimestampTzGetDatum(call->now)};
	bool		isnull;

	if (RegistryExecute(RS_TOKEN_CONSUME, values, NULL) == 1)
	{
		IdempotencyCount(STAT_TOKEN_CONSUMED, 1);
		return;
	}
	if (RegistryExecute(RS_TOKEN_LOOKUP, values, NULL) == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		return;					/* used: let the registry replay it */

	ereport(ERROR,
			(errcode(ERRCODE_IDEMPOTENCY_TOKEN_REFUSED),
			 errmsg("idempotency key \"%s\" is not a valid token in scope \"%s\"",
					IdempotencyDisplayValue(VARDATA_ANY(DatumGetTextPP(key)),
											VARSIZE_ANY_EXHDR(DatumGetTextPP(key))),
					TextDatumGetCString(scope)),
			 errdetail("It was never issued to this role, or it expired unused."),
			 errhint("Ask for a new token with idempotency.issue_token().")));
}
