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
 *	  src/messages/tokens.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/idempotency.h"
#include "base/stats.h"
#include "distributed/delegate.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "key/args.h"
#include "key/key.h"
#include "messages/tokens.h"
#include "objects/extension.h"

#define TOKEN_RANDOM_BYTES 16
#define TOKEN_PREFIX "tk_"

/* The statements: $1 owner, $2 scope, $3 token. */

/* $4 now, $5 expires_at */
static SqlStatement issue_stmt = {
	.sql = "INSERT INTO idempotency.tokens (owner, scope, token, issued_at, expires_at)"
	" VALUES ($1, $2, $3, $4, $5)",
	.nargs = 5,
	.argtypes = {TEXTOID, TEXTOID, SQL_KEYTYPE, TIMESTAMPTZOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_INSERT,
};

/* use a token once: $4 now */
static SqlStatement consume_stmt = {
	.sql = "UPDATE idempotency.tokens AS t SET consumed_at = $4"
	" WHERE t.token OPERATOR(pg_catalog.=) $3"
	" AND t.scope OPERATOR(pg_catalog.=) $2"
	" AND t.owner OPERATOR(pg_catalog.=) $1"
	" AND t.consumed_at IS NULL AND t.expires_at OPERATOR(pg_catalog.>) $4",
	.nargs = 4,
	.argtypes = {TEXTOID, TEXTOID, SQL_KEYTYPE, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_UPDATE,
};

/* whether a token was used (to explain a refusal) */
static SqlStatement used_stmt = {
	.sql = "SELECT t.consumed_at IS NOT NULL FROM idempotency.tokens AS t"
	" WHERE t.token OPERATOR(pg_catalog.=) $3"
	" AND t.scope OPERATOR(pg_catalog.=) $2"
	" AND t.owner OPERATOR(pg_catalog.=) $1",
	.nargs = 3,
	.argtypes = {TEXTOID, TEXTOID, SQL_KEYTYPE},
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
};

/* $1 now, $2 batch size: the oldest expired tokens first */
static SqlStatement delete_expired_stmt = {
	.sql = "DELETE FROM idempotency.tokens AS t"
	" USING (SELECT e.token, e.scope, e.owner FROM idempotency.tokens AS e"
	"        WHERE e.expires_at OPERATOR(pg_catalog.<=) $1"
	"        ORDER BY e.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS x"
	" WHERE t.token OPERATOR(pg_catalog.=) x.token"
	" AND t.scope OPERATOR(pg_catalog.=) x.scope"
	" AND t.owner OPERATOR(pg_catalog.=) x.owner",
	.nargs = 2,
	.argtypes = {TIMESTAMPTZOID, INT4OID},
	.expected_rc = SPI_OK_DELETE,
	.custom_plan = true,
};

PG_FUNCTION_INFO_V1(idempotency_issue_token);

/*
 * idempotency_issue_token
 *		issue_token(scope, ttl): a new unguessable token for the caller.
 */
Datum
idempotency_issue_token(PG_FUNCTION_ARGS)
{
	SqlCall		call;
	uint8		raw[TOKEN_RANDOM_BYTES];
	char		str[sizeof(TOKEN_PREFIX) - 1 + TOKEN_RANDOM_BYTES * 2 + 1];
	Datum		values[5];
	text	   *token;
	TimestampTz expires;

	IdempotencyCheckNargs(fcinfo, 2);
	values[1] = IdempotencyScopeArg(fcinfo, 0);
	IdempotencyRequireArg(fcinfo, 1, "ttl");

	if (!pg_strong_random(raw, sizeof(raw)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random token")));
	strcpy(str, TOKEN_PREFIX);
	hex_encode((const char *) raw, sizeof(raw), str + strlen(TOKEN_PREFIX));
	str[sizeof(str) - 1] = '\0';
	/* made before SqlCallBegin: SPI's memory goes at SqlCallEnd */
	token = IdempotencyKeyFromBytes(str, strlen(str));

	SqlCallBegin(&call);
	IdempotencyCitusNoteOwnerAccess();
	expires = IdempotencyAddPositive(call.now, PG_GETARG_DATUM(1), "ttl");

	values[0] = call.owner;
	values[2] = PointerGetDatum(token);
	values[3] = TimestampTzGetDatum(call.now);
	values[4] = TimestampTzGetDatum(expires);
	(void) SqlExecute(&issue_stmt, values, NULL);
	SqlCallEnd(&call);
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
	SqlCall		call;
	Datum		values[4];
	bool		consumed;

	IdempotencyCheckNargs(fcinfo, 2);
	IdempotencyRequireArg(fcinfo, 0, "token");
	values[2] = IdempotencyKeyArg(fcinfo, 0);
	values[1] = IdempotencyScopeArg(fcinfo, 1);

	SqlCallBegin(&call);
	IdempotencyCitusNoteOwnerAccess();
	values[0] = call.owner;
	values[3] = TimestampTzGetDatum(call.now);
	consumed = SqlExecute(&consume_stmt, values, NULL) == 1;
	SqlCallEnd(&call);
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
 *		caller's SQL frame.
 */
void
TokenRequire(SqlCall *call, Datum scope, Datum key)
{
	Datum		values[4] = {call->owner, scope, key, TimestampTzGetDatum(call->now)};
	bool		isnull;

	if (SqlExecute(&consume_stmt, values, NULL) == 1)
	{
		IdempotencyCount(STAT_TOKEN_CONSUMED, 1);
		return;
	}
	if (SqlExecute(&used_stmt, values, NULL) == 1 &&
		DatumGetBool(SqlResult(0, 1, &isnull)))
		return;					/* used: let the registry replay it */

	ereport(ERROR,
			(errcode(ERRCODE_IDEMPOTENCY_TOKEN_REFUSED),
			 errmsg("idempotency key \"%s\" is not a valid token in scope \"%s\"",
					IdempotencyKeyDisplay(key),
					TextDatumGetCString(scope)),
			 errdetail("It was never issued to this role, or it expired unused."),
			 errhint("Ask for a new token with idempotency.issue_token().")));
}

/*
 * TokensDeleteExpired
 *		Delete up to limit expired tokens, in the caller's frame.
 */
uint64
TokensDeleteExpired(SqlCall *call, int32 limit)
{
	Datum		values[2] = {TimestampTzGetDatum(call->now), Int32GetDatum(limit)};

	return SqlExecute(&delete_expired_stmt, values, NULL);
}

/* all of a role's tokens, $1 its name, on the caller's snapshot */
static SqlStatement own_tokens_stmt = {
	.sql = "SELECT t.token, t.scope, t.issued_at, t.expires_at, t.consumed_at"
	" FROM idempotency.tokens AS t WHERE t.owner OPERATOR(pg_catalog.=) $1",
	.nargs = 1,
	.argtypes = {TEXTOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 5,
	.snapshot = SQL_SNAPSHOT_CALLER,
};

/*
 * citus_select_tokens
 *		Read all of the caller's tokens; returns how many there are.
 */
static uint64
citus_select_tokens(SqlCall *call)
{
	Datum		values[1] = {call->owner};

	return SqlExecute(&own_tokens_stmt, values, NULL);
}

/*
 * citus_emit_token
 *		One row of my_tokens, with its state.
 */
static void
citus_emit_token(ReturnSetInfo *rsinfo, HeapTuple tuple, TupleDesc desc)
{
	Datum		values[6];
	bool		nulls[6];
	const char *state;

	for (int i = 0; i < 5; i++)
		values[i] = SPI_getbinval(tuple, desc, i + 1, &nulls[i]);
	if (!nulls[4])
		state = "used";
	else if (DatumGetTimestampTz(values[3]) <= GetCurrentTransactionStartTimestamp())
		state = "expired";
	else
		state = "unused";
	values[5] = CStringGetTextDatum(state);
	nulls[5] = false;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

PG_FUNCTION_INFO_V1(idempotency_citus_my_tokens);

/*
 * idempotency_citus_my_tokens
 *		The caller's tokens, read as the tokens table's owner.
 */
Datum
idempotency_citus_my_tokens(PG_FUNCTION_ARGS)
{
	IdempotencyCitusOwnRows(fcinfo, "my_tokens", citus_select_tokens, citus_emit_token);
	return (Datum) 0;
}
