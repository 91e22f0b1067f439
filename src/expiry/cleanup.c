/*-------------------------------------------------------------------------
 *
 * cleanup.c
 *	  idempotency.cleanup(): delete one batch of expired records.
 *
 * This is the one code path for removing expired records: the background
 * worker (worker.c) calls IdempotencyCleanup directly, batch after batch,
 * each in its own transaction, never a function found by name through SQL;
 * an administrator may call it by hand as cleanup(), and must on a server
 * where the library is not preloaded.  A record past its expires_at
 * already counts as absent for idempotent_begin, so cleaning late is never
 * wrong, only wasteful.  The registry has no index on expires_at: its part
 * of a batch is a sweep of the heap by block ranges (sweep.c); the other
 * tables' statements take their oldest expired rows through an index.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/expiry/cleanup.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "base/idempotency.h"
#include "base/shmem.h"
#include "base/stats.h"
#include "expiry/citus_cleanup.h"
#include "expiry/cleanup.h"
#include "expiry/sweep.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "machines/history.h"
#include "messages/inbox.h"
#include "messages/outbox.h"
#include "messages/tokens.h"
#include "objects/citus_metadata.h"
#include "objects/extension.h"

/* Deletes up to limit expired rows of one table, in the caller's frame. */
typedef uint64 (*CleanupDelete) (SqlCall *call, int32 limit);

/*
 * The tables a batch visits after the registry, in this order, each with its
 * statement.
 */
static const struct
{
	CitusTable	table;
	CleanupDelete delete_expired;
}			cleanup_tables[] = {
	{CITUS_INBOX, InboxDeleteExpired},
	{CITUS_TOKENS, TokensDeleteExpired},
	{CITUS_OUTBOX, OutboxDeleteExpired},
	{CITUS_HISTORY, HistoryDeleteExpired},
};

/*
 * IdempotencyCleanup
 *		Delete up to batch_size expired records (swept in heap order from
 *		where the last batch stopped, sweep.c), then, with what is left of
 *		the batch, expired inbox entries, tokens, delivered outbox messages
 *		and state history (the oldest first); return how many rows went.
 *		The statements run as the tables' owner (SqlCallBegin), so the
 *		caller needs no privilege on them.  A table that Citus distributes is cleaned shard by shard
 *		(citus_cleanup.c).
 *
 * paced is the background worker's: the registry's sweep then also stops
 * after SWEEP_PACED_BLOCKS blocks, and *more says that the worker's pass
 * has not yet swept the whole registry, so a batch that comes back short
 * does not end the pass.  A hand call (not paced) sweeps until it has its
 * batch or has swept the whole registry once; *more is then false.
 */
uint64
IdempotencyCleanup(int32 batch_size, bool paced, bool *more)
{
	SqlCall		call;
	uint64		deleted = 0;

	Assert(batch_size > 0);
	*more = false;

	SqlCallBegin(&call);
	if (!IdempotencyCitusCleanup(CITUS_REGISTRY, call.now, batch_size, &deleted))
		deleted = SweepRegistry(&call, batch_size, paced, more);
	for (size_t i = 0; i < lengthof(cleanup_tables) && deleted < (uint64) batch_size; i++)
	{
		int32		limit = batch_size - (int32) deleted;
		uint64		n;

		if (!IdempotencyCitusCleanup(cleanup_tables[i].table, call.now, limit, &n))
			n = cleanup_tables[i].delete_expired(&call, limit);
		deleted += n;
	}
	SqlCallEnd(&call);
	IdempotencyCount(STAT_ROWS_CLEANED, deleted);
	return deleted;
}

PG_FUNCTION_INFO_V1(idempotency_cleanup);

/*
 * idempotency_cleanup
 *		cleanup(batch_size): one batch of IdempotencyCleanup.  NULL
 *		batch_size means idempotency.cleanup_batch_size.
 */
Datum
idempotency_cleanup(PG_FUNCTION_ARGS)
{
	int32		batch_size = idempotency_cleanup_batch_size;
	bool		more;

	IdempotencyCheckNargs(fcinfo, 1);
	if (!PG_ARGISNULL(0))
		batch_size = PG_GETARG_INT32(0);
	if (batch_size <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must be greater than zero")));

	PG_RETURN_INT64((int64) IdempotencyCleanup(batch_size, false, &more));
}

PG_FUNCTION_INFO_V1(idempotency_cleanup_status);

/*
 * idempotency_cleanup_status
 *		The background cleanup's status per database, from shared memory.
 *		Without shared memory (the library not preloaded) there is nothing to
 *		show: a notice says why, and no row comes back.
 */
Datum
idempotency_cleanup_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CleanupStatus *copy;
	int			n = 0;

	InitMaterializedSRF(fcinfo, 0);

	if (IdempotencyShared == NULL)
	{
		ereport(NOTICE,
				(errmsg("background cleanup is not running because \"idempotency\" is not in \"shared_preload_libraries\""),
				 errhint("Call idempotency.cleanup() to remove expired records by hand.")));
		return (Datum) 0;
	}

	copy = palloc(sizeof(CleanupStatus) * IDEMPOTENCY_MAX_DATABASES);
	LWLockAcquire(IdempotencyShared->lock, LW_SHARED);
	for (int i = 0; i < IDEMPOTENCY_MAX_DATABASES; i++)
		if (IdempotencyShared->cleanup[i].dbid != InvalidOid)
			copy[n++] = IdempotencyShared->cleanup[i];
	LWLockRelease(IdempotencyShared->lock);

	for (int i = 0; i < n; i++)
	{
		Datum		values[8];
		bool		nulls[8] = {0};

		values[0] = ObjectIdGetDatum(copy[i].dbid);
		values[1] = TimestampTzGetDatum(copy[i].last_start);
		nulls[1] = copy[i].last_start == 0;
		values[2] = TimestampTzGetDatum(copy[i].last_end);
		nulls[2] = copy[i].last_end == 0;
		values[3] = Int64GetDatum(copy[i].last_deleted);
		values[4] = Int64GetDatum(copy[i].total_deleted);
		values[5] = Int32GetDatum(copy[i].failures);
		values[6] = TimestampTzGetDatum(copy[i].next_run);
		nulls[6] = copy[i].next_run == 0;
		values[7] = CStringGetTextDatum(copy[i].last_error);
		nulls[7] = copy[i].last_error[0] == '\0';
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
