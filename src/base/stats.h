/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Counters of the statistics view, counted per backend.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/base/stats.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_STATS_H
#define IDEMPOTENCY_STATS_H

#include "base/stat_counters.h"


/* stats.c: counted per backend, added to shared memory at transaction end */
extern uint64 IdempotencyLocalStats[STAT_NUM];
#define IdempotencyCount(stat, n) (IdempotencyLocalStats[(stat)] += (n))
extern void IdempotencyStatsInit(void);

#endif							/* IDEMPOTENCY_STATS_H */
