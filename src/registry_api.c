/*-------------------------------------------------------------------------
 *
 * registry_api.c
 *	  idempotent_begin, idempotent_finish and idempotent_abandon.
 *
 * A record goes through these states:
 *
 *	 (absent) --begin--> processing --finish--> completed | failed
 *	                         |  ^
 *	                         |  +--begin after the lease ran out (attempt + 1)
 *	                         +----abandon--> (absent)
 *
 * and a record whose expires_at has passed counts as absent, whether or not
 * the cleanup has removed it yet.
 *
 * Concurrency.  Exactly one caller may get "execute" for a live (owner,
 * scope, key).  The unique index is what guarantees it (SCALE_OUT.md rule 5):
 * the claim is an INSERT ... ON CONFLICT DO NOTHING, which waits for a
 * concurrent uncommitted claim and then either conflicts (the other
 * committed: we read and replay its record) or succeeds (it rolled back).
 * Overwriting an expired record and taking over a lapsed lease are UPDATEs
 * that re-check their condition, so under READ COMMITTED the loser re-reads
 * and loops, and under REPEATABLE READ or SERIALIZABLE it gets PostgreSQL's
 * serialization failure (40001), as does a claim that conflicts with a
 * record committed after the caller's snapshot was taken.
 *
 * With wait => false the claim runs in a subtransaction with lock_timeout
 * set to 1 ms; a lock timeout there means another transaction holds the
 * record, and the answer is "in_progress".
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry_api.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "idempotency.h"

/* How often a claim is retried when concurrent changes keep moving the record. */
#define BEGIN_MAX_TRIES 10

/* Columns of idempotent_begin's result row. */
enum
{
	BEGIN_OUTCOME,
	BEGIN_STATUS,
	BEGIN_RESPONSE,
	BEGIN_ATTEMPT,
	BEGIN_EXPIRES_AT,
	BEGIN_LEASE_UNTIL,
	BEGIN_NCOLUMNS
};

typedef struct BeginArgs
{
	Datum		key;
	Datum		scope;
	Datum		fingerprint;	/* bytea, or 0 when there is no request */
	Interval   *ttl;
	Interval   *lease;
	TimestampTz lease_until;	/* now + lease */
	TimestampTz expires_at;		/* now + ttl */
} BeginArgs;

typedef struct BeginResult
{
	const char *outcome;
	const char *status;
	Datum		response;		/* 0 when null */
	int32		attempt;		/* 0 when null */
	TimestampTz expires_at;		/* 0 when null */
	TimestampTz lease_until;	/* 0 when null */
} BeginResult;

/*
 * api_attempt
 *		The optional attempt argument as a statement parameter.
 */
static void
api_attempt(FunctionCallInfo fcinfo, int argno, Datum *value, char *null)
{
	*value = PG_ARGISNULL(argno) ? (Datum) 0 : PG_GETARG_DATUM(argno);
	*null = PG_ARGISNULL(argno) ? 'n' : ' ';
}

/*
 * api_fingerprint
 *		SHA-256 of the request's canonical text.  jsonb has already sorted
 *		object keys and dropped duplicates, so equal requests give equal text;
 *		the text form, unlike the binary one, is stable across versions.
 */
static Datum
api_fingerprint(Jsonb *request)
{
	char	   *canonical = JsonbToCString(NULL, &request->root, VARSIZE(request));
	bytea	   *result = palloc(VARHDRSZ + IDEMPOTENCY_SHA256_LEN);

	IdempotencySha256(canonical, strlen(canonical), (uint8 *) VARDATA(result));
	SET_VARSIZE(result, VARHDRSZ + IDEMPOTENCY_SHA256_LEN);
	pfree(canonical);
	return PointerGetDatum(result);
}

/*
 * api_key_display
 *		The key as text for a message.
 */
static char *
api_key_display(Datum key)
{
	text	   *t = DatumGetTextPP(key);

	return IdempotencyDisplayValue(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

/*
 * api_status
 *		A record's status as one of our own constant strings, so that it
 *		outlives SPI's memory.
 */
static const char *
api_status(HeapTuple row, TupleDesc desc)
{
	bool		isnull;
	text	   *status = DatumGetTextPP(SPI_getbinval(row, desc, LOOKUP_STATUS, &isnull));
	static const char *const statuses[] = {"processing", "completed", "failed"};

	for (size_t i = 0; i < lengthof(statuses); i++)
		if (VARSIZE_ANY_EXHDR(status) == strlen(statuses[i]) &&
			memcmp(VARDATA_ANY(status), statuses[i], strlen(statuses[i])) == 0)
			return statuses[i];
	elog(ERROR, "unexpected idempotency record status \"%s\"", text_to_cstring(status));
	return NULL;				/* keep compiler quiet */
}

/*
 * api_bytea_equal
 *		Content equality of two bytea datums, whatever their header forms.
 */
static bool
api_bytea_equal(Datum a, Datum b)
{
	bytea	   *x = DatumGetByteaPP(a);
	bytea	   *y = DatumGetByteaPP(b);

	return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
		memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

/*
 * begin_attempt
 *		One pass of the claim loop.  Returns true with *result filled in when
 *		it reached an answer, false when the record changed under it and the
 *		caller should try again.
 */
static bool
begin_attempt(RegistryCall *call, BeginArgs *args, BeginResult *result)
{
	Datum		values[7];
	char		nulls[7];
	TimestampTz lease_until = args->lease_until;
	TimestampTz expires_at = args->expires_at;
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	const char *status;
	Datum		stored_fp;
	bool		fp_isnull;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = call->owner;
	values[1] = args->scope;
	values[2] = args->key;
	values[3] = args->fingerprint;
	nulls[3] = args->fingerprint == (Datum) 0 ? 'n' : ' ';
	values[4] = TimestampTzGetDatum(call->now);
	values[5] = TimestampTzGetDatum(lease_until);
	values[6] = TimestampTzGetDatum(expires_at);

	/* the common case: nobody has this key, the claim is ours */
	if (RegistryExecute(RS_CLAIM, values, nulls) == 1)
	{
		result->outcome = "execute";
		result->status = "processing";
		result->attempt = 1;
		result->expires_at = expires_at;
		result->lease_until = lease_until;
		return true;
	}

	if (RegistryExecute(RS_LOOKUP, values, nulls) == 0)
		return false;			/* deleted since the claim conflicted */

	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	/* an expired record counts as absent: overwrite it with a fresh claim */
	if (DatumGetTimestampTz(SPI_getbinval(row, desc, LOOKUP_EXPIRES_AT, &isnull)) <= call->now)
	{
		if (RegistryExecute(RS_RECLAIM_EXPIRED, values, nulls) == 0)
			return false;
		result->outcome = "execute";
		result->status = "processing";
		result->attempt = 1;
		result->expires_at = expires_at;
		result->lease_until = lease_until;
		return true;
	}

	/* reusing a key for a different request is the caller's bug: say so */
	stored_fp = SPI_getbinval(row, desc, LOOKUP_FINGERPRINT, &fp_isnull);
	if (args->fingerprint != (Datum) 0 && !fp_isnull &&
		!api_bytea_equal(stored_fp, args->fingerprint))
	{
		IdempotencyCount(STAT_REQUEST_MISMATCH, 1);
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_REQUEST_MISMATCH),
				 errmsg("idempotency key \"%s\" in scope \"%s\" was already used for a different request",
						api_key_display(args->key),
						TextDatumGetCString(args->scope)),
				 errhint("Use a new key for a new request.")));
	}

	status = api_status(row, desc);
	result->status = status;
	result->attempt = DatumGetInt32(SPI_getbinval(row, desc, LOOKUP_ATTEMPT, &isnull));
	result->expires_at = DatumGetTimestampTz(SPI_getbinval(row, desc, LOOKUP_EXPIRES_AT, &isnull));

	if (strcmp(status, "processing") != 0)
	{
		Datum		response = SPI_getbinval(row, desc, LOOKUP_RESPONSE, &isnull);

		result->outcome = "replay";
		/*
		 * Copy the response out of SPI's memory, detoasted: a toast pointer
		 * could outlive the value it points to once the record is cleaned.
		 */
		if (!isnull)
		{
			MemoryContext oldcontext = MemoryContextSwitchTo(call->caller_cxt);

			result->response = PointerGetDatum(pg_detoast_datum_copy((struct varlena *) DatumGetPointer(response)));
			MemoryContextSwitchTo(oldcontext);
		}
		return true;
	}

	result->lease_until = DatumGetTimestampTz(SPI_getbinval(row, desc, LOOKUP_LEASE_UNTIL, &isnull));
	if (result->lease_until > call->now)
	{
		result->outcome = "in_progress";
		return true;
	}

	/* the lease ran out: the work may have partly happened; take it over */
	memset(nulls, ' ', sizeof(nulls));
	values[3] = TimestampTzGetDatum(call->now);
	values[4] = TimestampTzGetDatum(lease_until);
	if (RegistryExecute(RS_TAKEOVER, values, nulls) == 0)
		return false;
	result->outcome = "execute";
	result->attempt = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1,
												  &isnull));
	result->lease_until = lease_until;
	return true;
}

/*
 * begin_loop
 *		Run begin_attempt until it answers.  Under READ COMMITTED each pass
 *		sees what the previous concurrent change committed, so a few passes
 *		settle any race; running out of passes is reported as a
 *		serialization failure the caller may retry.
 */
static void
begin_loop(RegistryCall *call, BeginArgs *args, BeginResult *result)
{
	for (int tries = 0; tries < BEGIN_MAX_TRIES; tries++)
	{
		if (begin_attempt(call, args, result))
			return;
		CHECK_FOR_INTERRUPTS();
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not claim idempotency key \"%s\" because of concurrent changes",
					api_key_display(args->key)),
			 errhint("Retry the request.")));
}

/* begin_loop's arguments, passed through RegistryTry */
typedef struct BeginNowait
{
	RegistryCall *call;
	BeginArgs  *args;
	BeginResult *result;
} BeginNowait;

/*
 * begin_loop_nowait
 *		begin_loop with lock waits timing out after 1 ms.  The subtransaction
 *		it runs in undoes the setting if it fails.
 */
static void
begin_loop_nowait(void *arg)
{
	BeginNowait *b = (BeginNowait *) arg;
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("lock_timeout", "1", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	begin_loop(b->call, b->args, b->result);
	AtEOXact_GUC(true, nestlevel);
}

/*
 * begin_nowait
 *		begin_loop in a subtransaction whose lock waits time out after 1 ms;
 *		a lock timeout means another transaction holds the record.
 */
static void
begin_nowait(RegistryCall *call, BeginArgs *args, BeginResult *result)
{
	BeginNowait b = {call, args, result};

	if (!RegistryTry(begin_loop_nowait, &b, ERRCODE_LOCK_NOT_AVAILABLE))
	{
		memset(result, 0, sizeof(BeginResult));
		result->outcome = "in_progress";
		result->status = "processing";
	}
}

/*
 * begin_result_desc
 *		The result row's descriptor, built and blessed once per backend.
 *		fn_extra would not keep it: PL/pgSQL evaluates a call such as
 *		"b := idempotency.idempotent_begin(...)" with a new FmgrInfo in every
 *		transaction, and building the descriptor showed in profiles of the
 *		replay path.
 */
static TupleDesc
begin_result_desc(FunctionCallInfo fcinfo)
{
	static TupleDesc desc = NULL;
	static Oid	desc_fn = InvalidOid;
	TupleDesc	tupdesc;
	MemoryContext oldcontext;

	if (desc != NULL && desc_fn == fcinfo->flinfo->fn_oid)
		return desc;

	oldcontext = MemoryContextSwitchTo(TopMemoryContext);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	MemoryContextSwitchTo(oldcontext);

	if (desc != NULL)
		FreeTupleDesc(desc);
	desc = tupdesc;
	desc_fn = fcinfo->flinfo->fn_oid;
	return desc;
}

PG_FUNCTION_INFO_V1(idempotency_idempotent_begin);

/*
 * idempotency_idempotent_begin
 *		idempotent_begin(key, scope, request, ttl, lease, wait, require_token)
 */
Datum
idempotency_idempotent_begin(PG_FUNCTION_ARGS)
{
	BeginArgs	args = {0};
	BeginResult result = {0};
	RegistryCall call;
	TupleDesc	tupdesc;
	Datum		values[BEGIN_NCOLUMNS];
	bool		nulls[BEGIN_NCOLUMNS] = {0};
	bool		wait;
	bool		require_token;

	IdempotencyRequireArg(fcinfo, 0, "idempotency key");
	IdempotencyRequireArg(fcinfo, 3, "ttl");
	IdempotencyRequireArg(fcinfo, 4, "lease");
	IdempotencyRequireArg(fcinfo, 5, "wait");
	args.key = PointerGetDatum(PG_GETARG_TEXT_PP(0));
	args.scope = IdempotencyScopeArg(fcinfo, 1);
	if (!PG_ARGISNULL(2))
		args.fingerprint = api_fingerprint(PG_GETARG_JSONB_P(2));
	args.ttl = PG_GETARG_INTERVAL_P(3);
	args.lease = PG_GETARG_INTERVAL_P(4);
	wait = PG_GETARG_BOOL(5);
	IdempotencyRequireArg(fcinfo, 6, "require_token");
	require_token = PG_GETARG_BOOL(6);

	tupdesc = begin_result_desc(fcinfo);

	RegistryCallBegin(&call);

	args.expires_at = IdempotencyAddPositive(call.now, IntervalPGetDatum(args.ttl), "ttl");
	args.lease_until = IdempotencyAddPositive(call.now, IntervalPGetDatum(args.lease), "lease");
	if (args.lease_until > args.expires_at)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must not be longer than ttl"),
				 errdetail("A claim whose lease outlives its record could never be taken over.")));

	if (require_token)
		TokenRequire(&call, args.scope, args.key);

	if (wait)
		begin_loop(&call, &args, &result);
	else
		begin_nowait(&call, &args, &result);

	RegistryCallEnd(&call);

	if (strcmp(result.outcome, "execute") == 0)
	{
		IdempotencyCount(STAT_BEGIN_EXECUTE, 1);
		if (result.attempt > 1)
			IdempotencyCount(STAT_TAKEOVER, 1);
	}
	else if (strcmp(result.outcome, "replay") == 0)
		IdempotencyCount(STAT_BEGIN_REPLAY, 1);
	else
		IdempotencyCount(STAT_BEGIN_IN_PROGRESS, 1);

	values[BEGIN_OUTCOME] = CStringGetTextDatum(result.outcome);
	values[BEGIN_STATUS] = CStringGetTextDatum(result.status);
	values[BEGIN_RESPONSE] = result.response;
	nulls[BEGIN_RESPONSE] = result.response == (Datum) 0;
	values[BEGIN_ATTEMPT] = Int32GetDatum(result.attempt);
	nulls[BEGIN_ATTEMPT] = result.attempt == 0;
	values[BEGIN_EXPIRES_AT] = TimestampTzGetDatum(result.expires_at);
	nulls[BEGIN_EXPIRES_AT] = result.expires_at == 0;
	values[BEGIN_LEASE_UNTIL] = TimestampTzGetDatum(result.lease_until);
	nulls[BEGIN_LEASE_UNTIL] = result.lease_until == 0;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * api_explain_miss
 *		finish or abandon changed no row: read the record and report why,
 *		with the SQLSTATE that tells the caller what to do about it.
 */
static void
api_explain_miss(RegistryCall *call, Datum scope, Datum key, Datum attempt_value,
				 char attempt_null)
{
	bool		attempt_given = attempt_null != 'n';
	int32		attempt = attempt_given ? DatumGetInt32(attempt_value) : 0;
	Datum		values[3] = {call->owner, scope, key};
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	char	   *keystr = api_key_display(key);
	char	   *scopestr = TextDatumGetCString(scope);
	int32		current;

	if (RegistryExecute(RS_LOOKUP, values, NULL) == 0 ||
		DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
										  SPI_tuptable->tupdesc,
										  LOOKUP_EXPIRES_AT, &isnull)) <= call->now)
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_NO_CLAIM),
				 errmsg("idempotency key \"%s\" in scope \"%s\" has no claim",
						keystr, scopestr),
				 errhint("Call idempotent_begin first; a claim that expired or was abandoned no longer exists.")));

	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	/* a fenced-off attempt hears about that first, whatever happened since */
	current = DatumGetInt32(SPI_getbinval(row, desc, LOOKUP_ATTEMPT, &isnull));
	if (attempt_given && attempt != current)
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_STALE_ATTEMPT),
				 errmsg("attempt %d of idempotency key \"%s\" in scope \"%s\" is no longer current",
						attempt, keystr, scopestr),
				 errdetail("The current attempt is %d; an attempt whose lease ran out was taken over.", current)));

	if (strcmp(api_status(row, desc), "processing") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_ALREADY_FINISHED),
				 errmsg("idempotency key \"%s\" in scope \"%s\" is already finished",
						keystr, scopestr),
				 errdetail("Its status is \"%s\".", api_status(row, desc))));

	/* the row changed between the two statements; report it as retryable */
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("idempotency key \"%s\" in scope \"%s\" changed concurrently",
					keystr, scopestr)));
}

PG_FUNCTION_INFO_V1(idempotency_idempotent_finish);

/*
 * idempotency_idempotent_finish
 *		idempotent_finish(key, response, scope, attempt, failed)
 */
Datum
idempotency_idempotent_finish(PG_FUNCTION_ARGS)
{
	RegistryCall call;
	Datum		key;
	Datum		scope;
	Datum		values[7];
	char		nulls[7];
	bool		failed;

	IdempotencyRequireArg(fcinfo, 0, "idempotency key");
	IdempotencyRequireArg(fcinfo, 4, "failed");
	key = PointerGetDatum(PG_GETARG_TEXT_PP(0));
	scope = IdempotencyScopeArg(fcinfo, 2);
	failed = PG_GETARG_BOOL(4);
	memset(nulls, ' ', sizeof(nulls));

	if (!PG_ARGISNULL(1))
	{
		Jsonb	   *response = PG_GETARG_JSONB_P(1);
		Size		size = VARSIZE(response);

		if (size > (Size) idempotency_max_response_size * 1024)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("response for idempotency key \"%s\" is too large to store",
							api_key_display(key)),
					 errdetail("The response takes %zu bytes; \"idempotency.max_response_size\" allows %d kB.",
							   size, idempotency_max_response_size)));
		values[4] = JsonbPGetDatum(response);
	}
	else
		nulls[4] = 'n';

	RegistryCallBegin(&call);

	values[0] = call.owner;
	values[1] = scope;
	values[2] = key;
	values[3] = CStringGetTextDatum(failed ? "failed" : "completed");
	values[5] = TimestampTzGetDatum(call.now);
	api_attempt(fcinfo, 3, &values[6], &nulls[6]);

	if (RegistryExecute(RS_FINISH, values, nulls) == 0)
		api_explain_miss(&call, scope, key, values[6], nulls[6]);

	RegistryCallEnd(&call);
	IdempotencyCount(STAT_FINISH, 1);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(idempotency_idempotent_abandon);

/*
 * idempotency_idempotent_abandon
 *		idempotent_abandon(key, scope, attempt): drop a live claim so that the
 *		next begin executes again.
 */
Datum
idempotency_idempotent_abandon(PG_FUNCTION_ARGS)
{
	RegistryCall call;
	Datum		key;
	Datum		scope;
	Datum		values[5];
	char		nulls[5];

	IdempotencyRequireArg(fcinfo, 0, "idempotency key");
	key = PointerGetDatum(PG_GETARG_TEXT_PP(0));
	scope = IdempotencyScopeArg(fcinfo, 1);
	memset(nulls, ' ', sizeof(nulls));

	RegistryCallBegin(&call);

	values[0] = call.owner;
	values[1] = scope;
	values[2] = key;
	values[3] = TimestampTzGetDatum(call.now);
	api_attempt(fcinfo, 2, &values[4], &nulls[4]);

	if (RegistryExecute(RS_ABANDON, values, nulls) == 0)
		api_explain_miss(&call, scope, key, values[4], nulls[4]);

	RegistryCallEnd(&call);
	IdempotencyCount(STAT_ABANDON, 1);
	PG_RETURN_VOID();
}
