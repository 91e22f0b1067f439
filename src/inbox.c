/*-------------------------------------------------------------------------
 *
 * inbox.c
 *	  Message de-duplication for consumers under at-least-once delivery:
 *	  inbox_receive() and inbox_receive_batch().
 *
 * A message id is recorded per (owner, consumer) in idempotency.inbox, in the
 * caller's transaction: if the transaction rolls back, the id stays unseen
 * and the redelivery is processed.  The unique index serialises concurrent
 * receives of one id: the second waits for the first and then sees it
 * (false) or, if the first rolled back, records it itself (true).  An entry
 * past its expiry counts as unseen and is renewed.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/inbox.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "idempotency.h"

/*
 * inbox_text_arg
 *		A required text argument of at most IDEMPOTENCY_KEY_MAXLEN bytes.
 */
static Datum
inbox_text_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	text	   *t;

	IdempotencyRequireArg(fcinfo, argno, name);
	t = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(t) == 0 || VARSIZE_ANY_EXHDR(t) > IDEMPOTENCY_KEY_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be 1 to %d bytes long", name, IDEMPOTENCY_KEY_MAXLEN)));
	return PointerGetDatum(t);
}

/*
 * inbox_expiry
 *		now + ttl, where ttl must be a positive interval.
 */
static TimestampTz
inbox_expiry(FunctionCallInfo fcinfo, int argno, TimestampTz now)
{
	IdempotencyRequireArg(fcinfo, argno, "ttl");
	return IdempotencyAddPositive(now, PG_GETARG_DATUM(argno), "ttl");
}

PG_FUNCTION_INFO_V1(idempotency_inbox_receive);

/*
 * idempotency_inbox_receive
 *		inbox_receive(consumer, message_id, ttl): true the first time this
 *		role's consumer sees the id (process the message), false for a
 *		redelivery.
 */
Datum
idempotency_inbox_receive(PG_FUNCTION_ARGS)
{
	RegistryCall call;
	Datum		values[5];
	bool		first;

	values[1] = inbox_text_arg(fcinfo, 0, "consumer");
	values[2] = inbox_text_arg(fcinfo, 1, "message_id");

	RegistryCallBegin(&call);
	values[0] = call.owner;
	values[3] = TimestampTzGetDatum(call.now);
	values[4] = TimestampTzGetDatum(inbox_expiry(fcinfo, 2, call.now));

	/* new; or expired and renewed; or cleaned away between the two */
	first = RegistryExecute(RS_INBOX_RECEIVE, values, NULL) == 1 ||
		RegistryExecute(RS_INBOX_RECLAIM, values, NULL) == 1 ||
		RegistryExecute(RS_INBOX_RECEIVE, values, NULL) == 1;
	RegistryCallEnd(&call);

	IdempotencyCount(first ? STAT_INBOX_NEW : STAT_INBOX_DUPLICATE, 1);
	PG_RETURN_BOOL(first);
}

/*
 * inbox_collect
 *		Add the message ids in SPI_tuptable to a set (created if NULL), kept
 *		in the caller's memory.
 */
static HTAB *
inbox_collect(HTAB *set, uint64 nrows)
{
	if (set == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = IDEMPOTENCY_KEY_MAXLEN + 1;
		ctl.entrysize = IDEMPOTENCY_KEY_MAXLEN + 1;
		ctl.hcxt = CurrentMemoryContext;
		set = hash_create("idempotency inbox batch", Max(nrows, 16), &ctl,
						  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	for (uint64 i = 0; i < nrows; i++)
	{
		char	   *id = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

		hash_search(set, id, HASH_ENTER, NULL);
	}
	return set;
}

PG_FUNCTION_INFO_V1(idempotency_inbox_receive_batch);

/*
 * idempotency_inbox_receive_batch
 *		inbox_receive_batch(consumer, message_ids, ttl): the ids not seen
 *		before, in input order, each once.  One statement for a batch of new
 *		ids, two when some were seen, whatever the batch's size.
 */
Datum
idempotency_inbox_receive_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RegistryCall call;
	Datum		values[5];
	ArrayType  *ids;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	HTAB	   *new_ids;
	int			emitted = 0;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	values[1] = inbox_text_arg(fcinfo, 0, "consumer");
	IdempotencyRequireArg(fcinfo, 1, "message_ids");
	ids = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(ids) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("message_ids must be a one-dimensional array")));
	deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n > IDEMPOTENCY_INBOX_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a batch of %d message ids is too large", n),
				 errdetail("inbox_receive_batch takes at most %d ids at once.", IDEMPOTENCY_INBOX_MAX_BATCH)));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("message_ids must not contain nulls")));
		if (VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i])) == 0 ||
			VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i])) > IDEMPOTENCY_KEY_MAXLEN)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message_id must be 1 to %d bytes long", IDEMPOTENCY_KEY_MAXLEN)));
	}
	if (n == 0)
		return (Datum) 0;

	RegistryCallBegin(&call);
	values[0] = call.owner;
	values[2] = PointerGetDatum(ids);
	values[3] = TimestampTzGetDatum(call.now);
	values[4] = TimestampTzGetDatum(inbox_expiry(fcinfo, 2, call.now));

	/*
	 * Record the batch; the ids it returns were new.  Only if some were not
	 * (redeliveries, or repeats inside the batch) look for expired entries
	 * among them, which count as unseen and are renewed: the common all-new
	 * batch costs one statement.
	 */
	new_ids = inbox_collect(NULL, RegistryExecute(RS_INBOX_RECEIVE_BATCH, values, NULL));
	if (hash_get_num_entries(new_ids) < (long) n)
		new_ids = inbox_collect(new_ids, RegistryExecute(RS_INBOX_RENEW_EXPIRED, values, NULL));

	/* the new ids in input order, each once */
	for (int i = 0; i < n; i++)
	{
		char		key[IDEMPOTENCY_KEY_MAXLEN + 1];
		bool		found;

		text_to_cstring_buffer((text *) DatumGetPointer(elems[i]), key, sizeof(key));
		hash_search(new_ids, key, HASH_REMOVE, &found);
		if (found)
		{
			Datum		id[1] = {elems[i]};
			bool		idnull[1] = {false};

			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, id, idnull);
			emitted++;
		}
	}
	IdempotencyCount(STAT_INBOX_NEW, emitted);
	IdempotencyCount(STAT_INBOX_DUPLICATE, n - emitted);
	RegistryCallEnd(&call);
	return (Datum) 0;
}
