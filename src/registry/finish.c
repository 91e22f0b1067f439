/*-------------------------------------------------------------------------
 *
 * finish.c
 *	  idempotent_finish and idempotent_abandon: the end of a claim, fenced
 *	  by its attempt, and the error that says why one missed.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/finish.c
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
 * api_same_answer
 *		Whether a finished record holds exactly this answer: the same status,
 *		response and headers (equal as jsonb), status code and body.
 */
static bool
api_same_answer(const RegistryRow *rec, const RegistryAnswer *answer)
{
	Datum		response = RegistryRowGet(rec, RC_response);
	Datum		body = RegistryRowGet(rec, RC_body);
	Datum		headers = RegistryRowGet(rec, RC_headers);

	if (rec->status != (answer->failed ? RS_FAILED : RS_COMPLETED) ||
		DatumGetInt32(RegistryRowGet(rec, RC_status_code)) != answer->status_code ||
		(response == (Datum) 0) != (answer->response == (Datum) 0) ||
		(body == (Datum) 0) != (answer->body == (Datum) 0) ||
		(headers == (Datum) 0) != (answer->headers == (Datum) 0))
		return false;
	if (response != (Datum) 0 &&
		!DatumGetBool(DirectFunctionCall2(jsonb_eq, response, answer->response)))
		return false;
	if (headers != (Datum) 0 &&
		!DatumGetBool(DirectFunctionCall2(jsonb_eq, headers, answer->headers)))
		return false;
	return body == (Datum) 0 || RegistryByteaEqual(body, answer->body);
}

/*
 * api_attempt_never_issued
 *		Refuse an attempt number that no claim of this record was given:
 *		larger than the latest, or not positive (attempts start from the
 *		clock's seconds, and a driver may read a NULL attempt as 0).  latest
 *		is the record's attempt, or the deferred claim's.
 */
static void
api_attempt_never_issued(RegistryAttempt attempt, const char *keystr,
						 const char *scopestr, int32 latest, bool deferred)
{
	ereport(ERROR,
			(errcode(ERRCODE_IDEMPOTENCY_STALE_ATTEMPT),
			 errmsg("attempt %d of idempotency key \"%s\" in scope \"%s\" was never issued",
					attempt.value, keystr, scopestr),
			 attempt.value <= 0 ?
			 (deferred ?
			  errdetail("Attempt numbers are positive; this transaction's deferred claim of the key is attempt %d.", latest) :
			  errdetail("Attempt numbers are positive; the latest attempt is %d.", latest)) :
			 (deferred ?
			  errdetail("This transaction's deferred claim of the key is attempt %d.", latest) :
			  errdetail("The latest attempt is %d.", latest)),
			 attempt.value == 0 ?
			 errhint("Pass the attempt that idempotent_begin returned (NULL only inside the transaction that made the claim); a driver may read a NULL attempt as 0.") :
			 errhint("Pass the attempt that idempotent_begin returned.")));
}

/*
 * api_attempt_before_record
 *		Refuse an attempt number smaller than any this record was given.  The
 *		record keeps only its latest attempt, but its first claim's clock
 *		reading too (created_at, which a take-over keeps and a new claim of
 *		an expired or abandoned record resets), and every attempt it was
 *		given is at least the fence of that moment (RegistryFenceAt).  An
 *		attempt below it was not taken over from this record: it was given
 *		to an earlier record of the key, since expired or abandoned, or to
 *		no claim at all, and which of the two is not known.  Returns if the
 *		attempt may be one of the record's.
 */
static void
api_attempt_before_record(RegistryAttempt attempt, const char *keystr,
						  const char *scopestr, int32 current, TimestampTz created_at)
{
	int32		first = RegistryFenceAt(created_at);

	if (attempt.value >= first)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_IDEMPOTENCY_STALE_ATTEMPT),
			 errmsg("attempt %d of idempotency key \"%s\" in scope \"%s\" is older than the key's record",
					attempt.value, keystr, scopestr),
			 errdetail("Attempt numbers start from the clock's seconds at their claim: the record's first claim was given attempt %d or a larger one, and attempt %d holds the key now. Attempt %d was never issued to this record: it belonged to an earlier record of the key, since expired or abandoned, or to no claim at all.",
					   first, current, attempt.value),
			 errhint("Pass the attempt that idempotent_begin returned.")));
}

/*
 * api_explain_miss
 *		finish or abandon changed no row: read the record and report why,
 *		with the SQLSTATE that tells the caller what to do about it.  A
 *		finish that was already done, with the same attempt and the same
 *		answer (a retry whose first acknowledgement was lost), is no error:
 *		it returns.
 */
static void
api_explain_miss(SqlCall *call, Datum scope, Datum key, RegistryAttempt attempt,
				 const RegistryAnswer *answer, const char *doing)
{
	RegistryRow rec;
	int32		current;
	char	   *keystr = IdempotencyKeyDisplay(key);
	char	   *scopestr = TextDatumGetCString(scope);

	if (!RegistryLookup(call, scope, key, &rec))
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_NO_CLAIM),
				 errmsg("idempotency key \"%s\" in scope \"%s\" has no claim",
						keystr, scopestr),
				 errhint("Call idempotent_begin first; a claim that expired or was abandoned no longer exists.")));
	current = DatumGetInt32(rec.values[RC_attempt]);

	/* a fenced-off attempt hears about that first, whatever happened since */
	if (attempt.given && (attempt.value <= 0 || attempt.value > current))
		api_attempt_never_issued(attempt, keystr, scopestr, current, false);
	if (attempt.given && attempt.value < current)
		api_attempt_before_record(attempt, keystr, scopestr, current,
								  DatumGetTimestampTz(rec.values[RC_created_at]));
	if (attempt.given && attempt.value != current)
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_STALE_ATTEMPT),
				 errmsg("attempt %d of idempotency key \"%s\" in scope \"%s\" is no longer current",
						attempt.value, keystr, scopestr),
				 errdetail("A later claim, attempt %d, holds the key now: the lease of attempt %d ran out and it was taken over, or its record expired or was abandoned and the key was claimed again.",
						   current, attempt.value)));

	if (!RegistryRowLive(&rec, call->now))
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_NO_CLAIM),
				 errmsg("idempotency key \"%s\" in scope \"%s\" has no claim",
						keystr, scopestr),
				 errdetail("Its claim %s.",
						   rec.status == RS_ABANDONED ?
						   "was abandoned" : "expired"),
				 errhint("Call idempotent_begin first; a claim that expired or was abandoned no longer exists.")));

	if (rec.status != RS_PROCESSING)
	{
		/* the same finish again, its acknowledgement lost: done already */
		if (answer != NULL && attempt.given && api_same_answer(&rec, answer))
			return;
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_ALREADY_FINISHED),
				 errmsg("idempotency key \"%s\" in scope \"%s\" is already finished",
						keystr, scopestr),
				 errdetail("Its status is \"%s\".", RegistryStatusName(rec.status)),
				 answer != NULL && attempt.given ?
				 errhint("A finish repeated with the same attempt and the same answer returns the stored status; this one differs.") : 0));
	}

	/* a claim committed in an earlier transaction is ended by its attempt */
	if (!attempt.given)
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_ATTEMPT_REQUIRED),
				 errmsg("idempotency key \"%s\" in scope \"%s\" was claimed in an earlier transaction",
						keystr, scopestr),
				 errdetail("Outside the transaction that took a claim, %s it takes the attempt idempotent_begin returned: a worker whose claim was taken over must not overwrite the new owner's answer.",
						   doing),
				 errhint("Pass attempt => the attempt that idempotent_begin returned.")));

	/* the row changed between the two statements; report it as retryable */
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("idempotency key \"%s\" in scope \"%s\" changed concurrently",
					keystr, scopestr)));
}

/*
 * api_own_attempt
 *		finish or abandon (or a recovery point or a renewal) of this
 *		transaction's claim named an attempt: it must be the claim's.
 */
static void
api_own_attempt(XactClaim *claim, RegistryAttempt attempt)
{
	int32		current = DatumGetInt32(claim->row.values[RC_attempt]);

	if (attempt.given && (attempt.value <= 0 || attempt.value > current))
		api_attempt_never_issued(attempt, TextDatumGetCString(claim->row.values[RC_key]),
								 TextDatumGetCString(claim->row.values[RC_scope]), current,
								 claim->kind == XACT_CLAIM_DEFERRED);
	if (attempt.given && attempt.value != current)
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_STALE_ATTEMPT),
				 errmsg("attempt %d of idempotency key \"%s\" in scope \"%s\" is not current",
						attempt.value,
						TextDatumGetCString(claim->row.values[RC_key]),
						TextDatumGetCString(claim->row.values[RC_scope])),
				 errdetail("This transaction's claim of the key is attempt %d.",
						   current)));
}

/*
 * api_end_claim
 *		What finish (with an answer) and abandon (answer NULL) share: end the
 *		caller's live claim of the key, or explain why there is none.  ttl,
 *		if not 0, is a new lifetime for the finished record, counted from now.
 *
 * A claim this transaction took is ended fenced by its own attempt, named
 * or not.  Any other is ended only by the attempt the caller names
 * (api_explain_miss says so).  A claim not written yet (deferred, or held
 * in memory by its key's lock) is written whole by its finish; a duplicate
 * request that raced past its begin and committed first makes it a
 * serialization failure (RegistryInsertFinished).  Its abandon writes the
 * record as abandoned, as that of a claim written at begin would be, so that
 * the next begin reports it as the previous attempt; a deferred claim's
 * abandon only forgets it, as it always did.
 */
static void
api_end_claim(Datum key, Datum scope, RegistryAttempt attempt,
			  RegistryAnswer *answer, Datum ttl)
{
	SqlCall		call;
	XactClaim  *mine;
	bool		ended = false;

	SqlCallBegin(&call);
	if (ttl != (Datum) 0)
		answer->expires_at = IdempotencyAddPositive(call.now, ttl, "ttl");

	mine = XactClaimFind(call.owner, scope, key);
	if (mine != NULL)
	{
		api_own_attempt(mine, attempt);
		attempt.given = true;
		attempt.value = DatumGetInt32(mine->row.values[RC_attempt]);
	}
	if (mine != NULL && mine->written_level == 0)
	{
		if (answer != NULL || mine->kind != XACT_CLAIM_DEFERRED)
			RegistryInsertFinished(&call, &mine->row, answer);
		ended = true;
	}
	else if (attempt.given)
		ended = answer != NULL ?
			RegistryFinish(&call, scope, key, answer, attempt) :
			RegistryAbandon(&call, scope, key, attempt);
	if (!ended)
		api_explain_miss(&call, scope, key, attempt, answer, "finishing or abandoning");
	if (mine != NULL)
		XactClaimEnd(mine);

	SqlCallEnd(&call);
	IdempotencyCount(answer != NULL ? STAT_FINISH : STAT_ABANDON, 1);
}

/*
 * api_check_size
 *		An answer of size bytes (response, body and headers) may be stored.
 */
static void
api_check_size(Datum key, Size size)
{
	if (size > (Size) idempotency_max_response_size * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("response for idempotency key \"%s\" is too large to store",
						IdempotencyKeyDisplay(key)),
				 errdetail("The response, body and headers take %zu bytes; \"idempotency.max_response_size\" allows %d kB.",
						   size, idempotency_max_response_size)));
}

/*
 * RegistryApiFinish
 *		idempotent_finish(key, response, scope) of this transaction's own
 *		claim, for idempotent_call (begin.c): response may be NULL.
 */
void
RegistryApiFinish(Datum key, Datum scope, Jsonb *response)
{
	RegistryAnswer answer = {0};
	RegistryAttempt none = {false, 0};

	if (response != NULL)
	{
		answer.response = JsonbPGetDatum(response);
		api_check_size(key, VARSIZE(response));
	}
	api_end_claim(key, scope, none, &answer, (Datum) 0);
}

/*
 * api_attempt_arg
 *		The optional attempt argument.
 */
static RegistryAttempt
api_attempt_arg(FunctionCallInfo fcinfo, int argno)
{
	RegistryAttempt attempt = {!PG_ARGISNULL(argno), 0};

	if (attempt.given)
		attempt.value = PG_GETARG_INT32(argno);
	return attempt;
}

/*
 * api_headers_arg
 *		The optional headers argument: the response headers a replay gives
 *		back, stored as given in one of the forms http_headers.c accepts (an
 *		object of strings or arrays of strings, or an array of [name, value]
 *		pairs, which keeps their order).  Anything else is refused here, not
 *		when a replay cannot send it.
 */
static Jsonb *
api_headers_arg(FunctionCallInfo fcinfo, int argno)
{
	Jsonb	   *headers;

	if (PG_ARGISNULL(argno))
		return NULL;
	headers = PG_GETARG_JSONB_P(argno);
	IdempotencyHttpHeadersCheck(headers);
	return headers;
}

PG_FUNCTION_INFO_V1(idempotency_idempotent_finish);

/*
 * idempotency_idempotent_finish
 *		idempotent_finish(key, response, scope, attempt, failed, status_code,
 *		body, ttl, headers)
 *
 * A NULL response is allowed: it stores "no JSON response" (an answer made
 * only of a status code and a body, or none at all, such as a 204), and the
 * replay returns the same NULL.
 *
 * Returns the status it stored.  A function with a result can be called in
 * a PL/pgSQL assignment ("status := idempotent_finish(...)"), which
 * PL/pgSQL evaluates as a simple expression, without the executor start-up
 * and shutdown that PERFORM costs on every call.
 */
Datum
idempotency_idempotent_finish(PG_FUNCTION_ARGS)
{
	RegistryAnswer answer = {0};
	Datum		key;
	Datum		scope;
	Size		size = 0;
	Jsonb	   *headers;
	Datum		delegated;

	IdempotencyCheckNargs(fcinfo, 9);
	key = IdempotencyKeyArg(fcinfo, 0);
	scope = IdempotencyScopeArg(fcinfo, 2);
	if (IdempotencyCitusDelegate(fcinfo, CITUS_DELEGATE_FINISH, &delegated))
		return delegated;
	IdempotencyRequireArg(fcinfo, 4, "failed");
	answer.failed = PG_GETARG_BOOL(4);

	if (!PG_ARGISNULL(1))
	{
		Jsonb	   *response = PG_GETARG_JSONB_P(1);

		answer.response = JsonbPGetDatum(response);
		size += VARSIZE(response);
	}

	if (!PG_ARGISNULL(5))
	{
		int32		code = PG_GETARG_INT32(5);

		if (code < 100 || code > 599)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("status_code must be between 100 and 599"),
					 errdetail("It is %d.", code)));
		answer.status_code = code;
	}

	if (!PG_ARGISNULL(6))
	{
		bytea	   *body = PG_GETARG_BYTEA_PP(6);

		answer.body = PointerGetDatum(body);
		size += VARSIZE_ANY_EXHDR(body);
	}

	headers = api_headers_arg(fcinfo, 8);
	if (headers != NULL)
	{
		answer.headers = JsonbPGetDatum(headers);
		size += VARSIZE(headers);
	}

	api_check_size(key, size);
	api_end_claim(key, scope, api_attempt_arg(fcinfo, 3), &answer,
				  PG_ARGISNULL(7) ? (Datum) 0 : PG_GETARG_DATUM(7));
	PG_RETURN_TEXT_P(cstring_to_text(answer.failed ? "failed" : "completed"));
}

PG_FUNCTION_INFO_V1(idempotency_idempotent_abandon);

/*
 * idempotency_idempotent_abandon
 *		idempotent_abandon(key, scope, attempt): give up a live claim so that
 *		the next begin executes again.
 */
Datum
idempotency_idempotent_abandon(PG_FUNCTION_ARGS)
{
	Datum		key;
	Datum		scope;
	Datum		delegated;

	IdempotencyCheckNargs(fcinfo, 3);
	key = IdempotencyKeyArg(fcinfo, 0);
	scope = IdempotencyScopeArg(fcinfo, 1);
	if (IdempotencyCitusDelegate(fcinfo, CITUS_DELEGATE_ABANDON, &delegated))
		PG_RETURN_VOID();
	api_end_claim(key, scope, api_attempt_arg(fcinfo, 2), NULL, (Datum) 0);
	PG_RETURN_VOID();
}

/*
 * RegistryOwnWrite
 *		Write the record of this transaction's claim held in memory, for a
 *		call that needs it (a recovery point, a renewal: doing names it).  A
 *		deferred claim is never written before its finish.
 */
void
RegistryOwnWrite(SqlCall *call, XactClaim *claim, const char *doing)
{
	if (claim->written_level != 0)
		return;
	if (claim->kind == XACT_CLAIM_DEFERRED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot %s idempotency key \"%s\" in scope \"%s\": it was claimed with defer_claim",
						doing, TextDatumGetCString(claim->row.values[RC_key]),
						TextDatumGetCString(claim->row.values[RC_scope])),
				 errdetail("A deferred claim is written whole by its finish, in the transaction that took it.")));
	if (!RegistryInsertClaim(call, &claim->row))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not write the claim of idempotency key \"%s\" in scope \"%s\": a concurrent request with the same key finished first",
						TextDatumGetCString(claim->row.values[RC_key]),
						TextDatumGetCString(claim->row.values[RC_scope])),
				 errhint("Roll back and retry the transaction; the retry replays the other request's answer.")));
	XactClaimWritten(claim);
}

/*
 * RegistryExplainMiss
 *		A fenced statement on a claim other than a finish or an abandon
 *		(a recovery point, a renewal) changed no row: the error that says
 *		why, as a finish's.  doing names it in the IK006 detail ("renewing
 *		the lease of").
 */
void
RegistryExplainMiss(SqlCall *call, Datum scope, Datum key, RegistryAttempt attempt,
					const char *doing)
{
	api_explain_miss(call, scope, key, attempt, NULL, doing);
}

/*
 * RegistryOwnAttempt
 *		This transaction's claim of a key: the attempt a call named must be
 *		its (api_own_attempt).
 */
void
RegistryOwnAttempt(XactClaim *claim, RegistryAttempt attempt)
{
	api_own_attempt(claim, attempt);
}
