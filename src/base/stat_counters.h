/*-------------------------------------------------------------------------
 *
 * stat_counters.h
 *	  The counters of the stats view: what the shared state holds
 *	  (shmem.h) and backends count (stats.h).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/base/stat_counters.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_STAT_COUNTERS_H
#define IDEMPOTENCY_STAT_COUNTERS_H

/*
 * Counters of the stats view, in the order of the view's columns as the
 * install script defines them (idempotency.stats).  1.2 added the counters
 * after STAT_NUM_1_0 as columns after stats_reset (a view may only grow at
 * its end), so the 1.0 and 1.1 declaration of stats() returns the ones
 * before it.
 */
typedef enum IdempotencyStat
{
	STAT_BEGIN_EXECUTE,
	STAT_BEGIN_REPLAY,
	STAT_BEGIN_IN_PROGRESS,
	STAT_TAKEOVER,
	STAT_REQUEST_MISMATCH,
	STAT_FINISH,
	STAT_ABANDON,
	STAT_INBOX_NEW,
	STAT_INBOX_DUPLICATE,
	STAT_TOKEN_ISSUED,
	STAT_TOKEN_CONSUMED,
	STAT_TRANSITION_CHECKED,
	STAT_TRANSITION_REJECTED,
	STAT_STALE_WRITE,
	STAT_ROWS_CLEANED,
	STAT_BEGIN_WAITED,
	STAT_KEY_FORGOTTEN,
	STAT_NUM
} IdempotencyStat;

#define STAT_NUM_1_0 (STAT_ROWS_CLEANED + 1)

#endif							/* IDEMPOTENCY_STAT_COUNTERS_H */
