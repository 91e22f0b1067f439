/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Counters of the statistics view, counted per backend.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/stats.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_STATS_H
#define IDEMPOTENCY_STATS_H

/*
 * Counters of the stats view, in the order of the view's columns as the
 * install script defines them (idempotency.stats).
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
	STAT_NUM
} IdempotencyStat;

/* stats.c: counted per backend, added to shared memory at transaction end */
extern uint64 IdempotencyLocalStats[STAT_NUM];
#define IdempotencyCount(stat, n) (IdempotencyLocalStats[(stat)] += (n))
extern void IdempotencyStatsInit(void);

#endif							/* IDEMPOTENCY_STATS_H */
