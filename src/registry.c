/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  The statements on idempotency.registry, each with the one function that
 *	  fills its parameters and reads its result.
 *
 * Every statement is single-table and addressed by the primary key (owner,
 * scope, key): $1 owner, $2 scope, $3 key, always.  They run in the caller's
 * SQL frame (sqlcall.c), as the table's owner, filtered on the caller's role
 * name.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "registry.h"

/*
 * RegistryFence
 *		The fencing token a claim made now starts from: whole seconds since
 *		2000-01-01, read from the clock at the moment of the claim.
 *
 * An attempt number is a fencing token, and one must never be issued twice
 * for the same key.  While a record exists, every claim that changes its
 * holder sets attempt = GREATEST(attempt + 1, RegistryFence()), so the
 * number only grows.  An abandoned claim is not deleted but marked
 * "abandoned" (it counts as absent), so its number is remembered too.  Only
 * the cleanup deletes records, and only those whose attempt lies at least
 * two seconds behind the clock (sweep.c); a claim of the key
 * after that starts from the clock, which is past every number the deleted
 * record held.  This holds as long as the server's clock does not step back
 * by a second or more between a deletion and the next claim of the key; an
 * int4 of seconds lasts until 2068.
 */
int32
RegistryFence(void)
{
	return (int32) (GetCurrentTimestamp() / USECS_PER_SEC);
}

/*
 * Relies on INSERT ... ON CONFLICT to wait for a concurrent claim that is
 * not yet committed: that wait is what lets a duplicate request replay the
 * first one's answer instead of failing.
 *
 * $4 fingerprint, $5 now, $6 lease_until, $7 expires_at, $8 fence.
 */
static SqlStatement claim_stmt = {
	.sql = "INSERT INTO idempotency.registry AS r"
	" (owner, scope, key, status, attempt, fingerprint, response,"
	"  created_at, updated_at, lease_until, expires_at)"
	" VALUES ($1, $2, $3, 'processing', $8, $4, NULL, $5, $5, $6, $7)"
	" ON CONFLICT (owner, scope, key) DO NOTHING",
	.nargs = 8,
	.argtypes = {TEXTOID, TEXTOID, SQL_KEYTYPE, BYTEAOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID},
	.expected_rc = SPI_OK_INSERT,
};

/*
 * claim_params
 *		The parameters claim_stmt and reclaim_stmt share.
 */
static void
claim_params(SqlCall *call, const RegistryClaim *claim, Datum *values, char *nulls)
{
	memset(nulls, ' ', 8);
	values[0] = call->owner;
	values[1] = claim->scope;
	values[2] = claim->key;
	values[3] = claim->fingerprint;
	nulls[3] = claim->fingerprint == (Datum) 0 ? 'n' : ' ';
	values[4] = TimestampTzGetDatum(call->now);
	values[5] = TimestampTzGetDatum(claim->lease_until);
	values[6] = TimestampTzGetDatum(claim->expires_at);
	values[7] = Int32GetDatum(claim->fence);
}

/*
 * RegistryInsertClaim
 *		Claim a key nobody has a record of; false if a record exists (once
 *		any concurrent claim of it has committed).  The attempt is the fence.
 */
bool
RegistryInsertClaim(SqlCall *call, const RegistryClaim *claim)
{
	Datum		values[8];
	char		nulls[8];

	claim_params(call, claim, values, nulls);
	return SqlExecute(&claim_stmt, values, nulls) == 1;
}

/*
 * $1, $2, $3 only; the columns in the order of the LOOKUP_ numbers.
 */
static SqlStatement lookup_stmt = {
	.sql = "SELECT r.status, r.attempt, r.fingerprint, r.response,"
	" r.lease_until, r.expires_at, r.status_code, r.body"
	" FROM idempotency.registry AS r"
	" WHERE r.owner OPERATOR(pg_catalog.=) $1"
	" AND r.scope OPERATOR(pg_catalog.=) $2"
	" AND r.key OPERATOR(pg_catalog.=) $3",
	.nargs = 3,
	.argtypes = {TEXTOID, TEXTOID, SQL_KEYTYPE},
	.expected_rc = SPI_OK_SELECT,
	.natts = 8,
};

#define LOOKUP_STATUS		1
#define LOOKUP_ATTEMPT		2
#define LOOKUP_FINGERPRINT	3
#define LOOKUP_RESPONSE		4
#define LOOKUP_LEASE_UNTIL	5
#define LOOKUP_EXPIRES_AT	6
#define LOOKUP_STATUS_CODE	7
#define LOOKUP_BODY			8

/*
 * lookup_status
 *		A record's status as one of our own constant strings, so that it
 *		outlives SPI's memory.
 */
static const char *
lookup_status(Datum value)
{
	text	   *status = DatumGetTextPP(value);
	static const char *const statuses[] = {"processing", "completed", "failed", "abandoned"};

	for (size_t i = 0; i < lengthof(statuses); i++)
		if (VARSIZE_ANY_EXHDR(status) == strlen(statuses[i]) &&
			memcmp(VARDATA_ANY(status), statuses[i], strlen(statuses[i])) == 0)
			return statuses[i];
	elog(ERROR, "unexpected idempotency record status \"%s\"", text_to_cstring(status));
	return NULL;				/* keep compiler quiet */
}

/*
 * RegistryLookup
 *		Read the caller's record of (scope, key), whatever its state; false
 *		if there is none.
 */
bool
RegistryLookup(SqlCall *call, Datum scope, Datum key, RegistryRecord *rec)
{
	Datum		values[3] = {call->owner, scope, key};
	bool		isnull;
	Datum		d;

	if (SqlExecute(&lookup_stmt, values, NULL) == 0)
		return false;

	rec->status = lookup_status(SqlResult(0, LOOKUP_STATUS, &isnull));
	rec->attempt = DatumGetInt32(SqlResult(0, LOOKUP_ATTEMPT, &isnull));
	d = SqlResult(0, LOOKUP_FINGERPRINT, &isnull);
	rec->fingerprint = isnull ? (Datum) 0 : d;
	d = SqlResult(0, LOOKUP_RESPONSE, &isnull);
	rec->response = isnull ? (Datum) 0 : d;
	d = SqlResult(0, LOOKUP_LEASE_UNTIL, &isnull);
	rec->lease_until = isnull ? 0 : DatumGetTimestampTz(d);
	rec->expires_at = DatumGetTimestampTz(SqlResult(0, LOOKUP_EXPIRES_AT, &isnull));
	d = SqlResult(0, LOOKUP_STATUS_CODE, &isnull);
	rec->status_code = isnull ? 0 : DatumGetInt32(d);
	d = SqlResult(0, LOOKUP_BODY, &isnull);
	rec->body = isnull ? (Datum) 0 : d;
	return true;
}

/*
 * RegistryRecordKeep
 *		Copy the record's response and body (detoasted) into the caller's
 *		memory, for an answer that outlives the call.
 */
void
RegistryRecordKeep(SqlCall *call, RegistryRecord *rec)
{
	rec->response = SqlKeep(call, rec->response);
	rec->body = SqlKeep(call, rec->body);
	rec->fingerprint = (Datum) 0;	/* only compared, never kept */
}

/*
 * RegistryRecordLive
 *		Whether a record counts as present: neither expired nor abandoned.
 */
bool
RegistryRecordLive(SqlCall *call, const RegistryRecord *rec)
{
	return rec->expires_at > call->now && strcmp(rec->status, "abandoned") != 0;
}

/*
 * Overwrites an expired or abandoned record with a fresh claim, re-checking
 * that condition, so that of two sessions racing for the record exactly one
 * updates it.  Parameters as claim_stmt's.
 */
static SqlStatement reclaim_stmt = {
	.sql = "UPDATE idempotency.registry AS r"
	" SET status = 'processing',"
	" attempt = GREATEST(r.attempt OPERATOR(pg_catalog.+) 1, $8),"
	" fingerprint = $4, response = NULL, created_at = $5, updated_at = $5,"
	" lease_until = $6, expires_at = $7"
	" WHERE r.owner OPERATOR(pg_catalog.=) $1"
	" AND r.scope OPERATOR(pg_catalog.=) $2"
	" AND r.key OPERATOR(pg_catalog.=) $3"
	" AND (r.expires_at OPERATOR(pg_catalog.<=) $5"
	"      OR r.status OPERATOR(pg_catalog.=) 'abandoned')"
	" RETURNING r.attempt",
	.nargs = 8,
	.argtypes = {TEXTOID, TEXTOID, SQL_KEYTYPE, BYTEAOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID},
	.expected_rc = SPI_OK_UPDATE_RETURNING,
	.natts = 1,
};

/*
 * RegistryReclaim
 *		Claim a key whose record is expired or abandoned; false if the record
 *		changed since it was read.  *attempt is the new claim's.
 */
bool
RegistryReclaim(SqlCall *call, const RegistryClaim *claim, int32 *attempt)
{
	Datum		values[8];
	char		nulls[8];
	bool		isnull;

	claim_params(call, claim, values, nulls);
	if (SqlExecute(&reclaim_stmt, values, nulls) == 0)
		return false;
	*attempt = DatumGetInt32(SqlResult(0, 1, &isnull));
	return true;
}

/*
 * Takes over a claim whose lease ran out, re-checking that condition like
 * reclaim_stmt.  $4 now, $5 lease_until, $6 fence.
 */
static SqlStatement takeover_stmt = {
	.sql = "UPDATE idempotency.registry AS r"
	" SET attempt = GREATEST(r.attempt OPERATOR(pg_catalog.+) 1, $6),"
	" updated_at = $4, lease_until = $5"
	" WHERE r.owner OPERATOR(pg_catalog.=) $1"
	" AND r.scope OPERATOR(pg_catalog.=) $2"
	" AND r.key OPERATOR(pg_catalog.=) $3"
	" AND r.status OPERATOR(pg_catalog.=) 'processing'"
	" AND r.lease_until OPERATOR(pg_catalog.<=) $4"
	" AND r.expires_at OPERATOR(pg_catalog.>) $4"
	" RETURNING r.attempt, r.expires_at",
	.nargs = 6,
	.argtypes = {TEXTOID, TEXTOID, SQL_KEYTYPE, TIMESTAMPTZOID,
	TIMESTAMPTZOID, INT4OID},
	.expected_rc = SPI_OK_UPDATE_RETURNING,
	.natts = 2,
};

/*
 * RegistryTakeover
 *		Take over a live claim whose lease ran out; false if the record
 *		changed since it was read.  The record keeps its expiry, which comes
 *		back in *expires_at with the new *attempt.
 */
bool
RegistryTakeover(SqlCall *call, const RegistryClaim *claim, int32 *attempt,
				 TimestampTz *expires_at)
{
	Datum		values[6] = {call->owner, claim->scope, claim->key,
		TimestampTzGetDatum(call->now), TimestampTzGetDatum(claim->lease_until),
	Int32GetDatum(claim->fence)};
	bool		isnull;

	if (SqlExecute(&takeover_stmt, values, NULL) == 0)
		return false;
	*attempt = DatumGetInt32(SqlResult(0, 1, &isnull));
	*expires_at = DatumGetTimestampTz(SqlResult(0, 2, &isnull));
	return true;
}

/*
 * Stores the answer of a live claim, of the given attempt if $7 is not null.
 * $4 status, $5 response, $6 now, $7 attempt, $8 status_code, $9 body,
 * $10 a new expires_at or null.
 */
static SqlStatement finish_stmt = {
	.sql = "UPDATE idempotency.registry AS r"
	" SET status = $4, response = $5, updated_at = $6, lease_until = NULL,"
	" status_code = $8, body = $9,"
	" expires_at = COALESCE($10, r.expires_at)"
	" WHERE r.owner OPERATOR(pg_catalog.=) $1"
	" AND r.scope OPERATOR(pg_catalog.=) $2"
	" AND r.key OPERATOR(pg_catalog.=) $3"
	" AND r.status OPERATOR(pg_catalog.=) 'processing'"
	" AND r.expires_at OPERATOR(pg_catalog.>) $6"
	" AND ($7 IS NULL OR r.attempt OPERATOR(pg_catalog.=) $7)",
	.nargs = 10,
	.argtypes = {TEXTOID, TEXTOID, SQL_KEYTYPE, TEXTOID, JSONBOID,
	TIMESTAMPTZOID, INT4OID, INT4OID, BYTEAOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_UPDATE,
};

/*
 * answer_param
 *		An optional value of a finish as a statement parameter.
 */
static void
answer_param(Datum value, bool present, Datum *param, char *null)
{
	*param = present ? value : (Datum) 0;
	*null = present ? ' ' : 'n';
}

/*
 * RegistryFinish
 *		Store the answer of the caller's live claim (of that attempt, if one
 *		is named); false if there is no such claim.
 */
bool
RegistryFinish(SqlCall *call, Datum scope, Datum key, const RegistryAnswer *answer,
			   RegistryAttempt attempt)
{
	Datum		values[10];
	char		nulls[10];

	memset(nulls, ' ', sizeof(nulls));
	values[0] = call->owner;
	values[1] = scope;
	values[2] = key;
	values[3] = CStringGetTextDatum(answer->failed ? "failed" : "completed");
	answer_param(answer->response, answer->response != (Datum) 0, &values[4], &nulls[4]);
	values[5] = TimestampTzGetDatum(call->now);
	answer_param(Int32GetDatum(attempt.value), attempt.given, &values[6], &nulls[6]);
	answer_param(Int32GetDatum(answer->status_code), answer->status_code != 0,
				 &values[7], &nulls[7]);
	answer_param(answer->body, answer->body != (Datum) 0, &values[8], &nulls[8]);
	answer_param(TimestampTzGetDatum(answer->expires_at), answer->expires_at != 0,
				 &values[9], &nulls[9]);
	return SqlExecute(&finish_stmt, values, nulls) == 1;
}

/*
 * Gives up a live claim (of the given attempt if $5 is not null): the record
 * stays, marked abandoned, so that its attempt is remembered.  $4 now.
 */
static SqlStatement abandon_stmt = {
	.sql = "UPDATE idempotency.registry AS r"
	" SET status = 'abandoned', response = NULL, updated_at = $4,"
	" lease_until = NULL, expires_at = $4"
	" WHERE r.owner OPERATOR(pg_catalog.=) $1"
	" AND r.scope OPERATOR(pg_catalog.=) $2"
	" AND r.key OPERATOR(pg_catalog.=) $3"
	" AND r.status OPERATOR(pg_catalog.=) 'processing'"
	" AND r.expires_at OPERATOR(pg_catalog.>) $4"
	" AND ($5 IS NULL OR r.attempt OPERATOR(pg_catalog.=) $5)",
	.nargs = 5,
	.argtypes = {TEXTOID, TEXTOID, SQL_KEYTYPE, TIMESTAMPTZOID, INT4OID},
	.expected_rc = SPI_OK_UPDATE,
};

/*
 * RegistryAbandon
 *		Give up the caller's live claim (of that attempt, if one is named);
 *		false if there is no such claim.
 */
bool
RegistryAbandon(SqlCall *call, Datum scope, Datum key, RegistryAttempt attempt)
{
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	values[0] = call->owner;
	values[1] = scope;
	values[2] = key;
	values[3] = TimestampTzGetDatum(call->now);
	answer_param(Int32GetDatum(attempt.value), attempt.given, &values[4], &nulls[4]);
	return SqlExecute(&abandon_stmt, values, nulls) == 1;
}

/*
 * A claim taken with defer_claim is written once, complete, by its finish.
 * A plain INSERT, not ON CONFLICT: a conflict can only end the transaction
 * (RegistryInsertFinished), so the speculative insertion that ON CONFLICT
 * pays for on every call (a pre-check of the index, a speculative lock, a
 * confirmation record) would buy nothing.  The unique check still waits for
 * a concurrent uncommitted record of the key.  $4 status, $5 attempt,
 * $6 fingerprint, $7 response, $8 status_code, $9 body, $10 created_at,
 * $11 now, $12 expires_at.
 */
static SqlStatement insert_finished_stmt = {
	.sql = "INSERT INTO idempotency.registry AS r"
	" (owner, scope, key, status, attempt, fingerprint, response,"
	"  status_code, body, created_at, updated_at, lease_until, expires_at)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, $12)",
	.nargs = 12,
	.argtypes = {TEXTOID, TEXTOID, SQL_KEYTYPE, TEXTOID, INT4OID, BYTEAOID,
		JSONBOID, INT4OID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID},
	.expected_rc = SPI_OK_INSERT,
};

/*
 * RegistryInsertFinished
 *		Write a deferred claim as a finished record.
 *
 * If a record of the key exists (a duplicate request raced past this one's
 * begin), the insert first waits for its transaction: if that rolls back,
 * ours goes in; if it committed, the other request did the work, and this
 * transaction, whose business write is a second one, must roll back.  The
 * unique violation becomes a serialization failure, whose retry replays the
 * other request's answer.  Nothing is caught and carried on from: the error
 * only changes its SQLSTATE and words on its way out.
 */
void
RegistryInsertFinished(SqlCall *call, const DeferredClaim *claim,
					   const RegistryAnswer *answer)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	Datum		values[12];
	char		nulls[12];

	memset(nulls, ' ', sizeof(nulls));
	values[0] = call->owner;
	values[1] = PointerGetDatum(claim->scope);
	values[2] = PointerGetDatum(claim->key);
	values[3] = CStringGetTextDatum(answer->failed ? "failed" : "completed");
	values[4] = Int32GetDatum(claim->attempt);
	answer_param(PointerGetDatum(claim->fingerprint), claim->fingerprint != NULL,
				 &values[5], &nulls[5]);
	answer_param(answer->response, answer->response != (Datum) 0, &values[6], &nulls[6]);
	answer_param(Int32GetDatum(answer->status_code), answer->status_code != 0,
				 &values[7], &nulls[7]);
	answer_param(answer->body, answer->body != (Datum) 0, &values[8], &nulls[8]);
	values[9] = TimestampTzGetDatum(claim->created_at);
	values[10] = TimestampTzGetDatum(call->now);
	values[11] = TimestampTzGetDatum(answer->expires_at != 0 ?
									 answer->expires_at : claim->expires_at);

	PG_TRY();
	{
		SqlExecute(&insert_finished_stmt, values, nulls);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not finish idempotency key \"%s\" in scope \"%s\": a concurrent request with the same key finished first",
						text_to_cstring(claim->key), text_to_cstring(claim->scope)),
				 errdetail("The claim was taken with defer_claim, so the duplicate was noticed only at finish."),
				 errhint("Roll back and retry the transaction; the retry replays the other request's answer.")));
	}
	PG_END_TRY();
}
