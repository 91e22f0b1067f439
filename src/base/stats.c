/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Statistics: what the extension has done, for idempotency.stats.
 *
 * Each backend counts in a local array, which costs nothing measurable on
 * the hot paths (the transition checker counts every row), and adds it to
 * the shared atomics when its transaction ends, committed or not: the
 * counters count calls, like pg_stat_statements, including calls whose
 * transaction rolled back.  Without shared memory (the library not
 * preloaded) nothing is kept and the view says so.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/base/stats.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "funcapi.h"
#include "utils/timestamp.h"

#include "base/shmem.h"
#include "base/stats.h"

uint64		IdempotencyLocalStats[STAT_NUM];

/*
 * stats_flush
 *		Add this backend's counts to shared memory and start again from zero.
 */
static void
stats_flush(void)
{
	if (IdempotencyShared == NULL)
		return;
	for (int i = 0; i < STAT_NUM; i++)
	{
		if (IdempotencyLocalStats[i] != 0)
		{
			pg_atomic_fetch_add_u64(&IdempotencyShared->stats[i], IdempotencyLocalStats[i]);
			IdempotencyLocalStats[i] = 0;
		}
	}
}

/*
 * stats_xact_callback
 *		Flush at the end of every transaction.
 */
static void
stats_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		stats_flush();
}

/*
 * IdempotencyStatsInit
 *		Register the flush; called from _PG_init.
 */
void
IdempotencyStatsInit(void)
{
	RegisterXactCallback(stats_xact_callback, NULL);
}

/*
 * stats_require_shmem
 *		Whether there are statistics to show; a notice if not.
 */
static bool
stats_require_shmem(void)
{
	if (IdempotencyShared != NULL)
		return true;
	ereport(NOTICE,
			(errmsg("statistics are not kept because \"idempotency\" is not in \"shared_preload_libraries\"")));
	return false;
}

/*
 * stats_row
 *		stats()'s one row: the counters before STAT_NUM_1_0, when they were
 *		last reset, and, if all, the counters 1.2 added after it.
 */
static Datum
stats_row(FunctionCallInfo fcinfo, bool all)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[STAT_NUM + 1];
	bool		nulls[STAT_NUM + 1] = {0};
	int			n = 0;

	InitMaterializedSRF(fcinfo, 0);
	if (!stats_require_shmem())
		return (Datum) 0;

	for (int i = 0; i < STAT_NUM_1_0; i++)
		values[n++] = Int64GetDatum((int64) pg_atomic_read_u64(&IdempotencyShared->stats[i]));
	values[n++] = TimestampTzGetDatum((TimestampTz) pg_atomic_read_u64(&IdempotencyShared->stats_reset));
	if (all)
		for (int i = STAT_NUM_1_0; i < STAT_NUM; i++)
			values[n++] = Int64GetDatum((int64) pg_atomic_read_u64(&IdempotencyShared->stats[i]));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(idempotency_stats);

/*
 * idempotency_stats
 *		The 1.0 and 1.1 declaration: the counters those versions had, and
 *		when they were last reset.
 */
Datum
idempotency_stats(PG_FUNCTION_ARGS)
{
	return stats_row(fcinfo, false);
}

PG_FUNCTION_INFO_V1(idempotency_stats_1_2);

/*
 * idempotency_stats_1_2
 *		Every counter, with stats_reset where 1.0 had it.
 */
Datum
idempotency_stats_1_2(PG_FUNCTION_ARGS)
{
	return stats_row(fcinfo, true);
}

PG_FUNCTION_INFO_V1(idempotency_stats_reset);

/*
 * idempotency_stats_reset
 *		Set every counter back to zero.
 */
Datum
idempotency_stats_reset(PG_FUNCTION_ARGS)
{
	/*
	 * Reading statistics that are not kept shows nothing, with a notice (the
	 * views); resetting them is an action that cannot be done, so it fails,
	 * as pg_stat_statements_reset does.
	 */
	if (IdempotencyShared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("statistics are not kept because \"idempotency\" is not in \"shared_preload_libraries\""),
				 errhint("Add idempotency to shared_preload_libraries and restart the server.")));

	for (int i = 0; i < STAT_NUM; i++)
		pg_atomic_write_u64(&IdempotencyShared->stats[i], 0);
	pg_atomic_write_u64(&IdempotencyShared->stats_reset, (uint64) GetCurrentTimestamp());
	PG_RETURN_VOID();
}
