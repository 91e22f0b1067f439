/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  Shared state, present only when the library is preloaded.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/base/shmem.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_SHMEM_H
#define IDEMPOTENCY_SHMEM_H

#include "port/atomics.h"
#include "storage/block.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "base/stat_counters.h"

#define IDEMPOTENCY_MAX_DATABASES 128
#define CLEANUP_ERROR_LEN 256

/*
 * Where the registry's sweep (sweep.c) stands in one database.  A position
 * in another relation (the registry dropped and created again) or past the
 * end of the heap (TRUNCATE, VACUUM FULL) counts as block 0.
 */
typedef struct SweepPosition
{
	Oid			relid;			/* the registry it is a position in */
	BlockNumber next_block;		/* where the next sweep call starts */
	uint64		pass_blocks;	/* blocks swept since the worker's pass began */
} SweepPosition;

typedef struct CleanupStatus
{
	Oid			dbid;			/* InvalidOid: free slot */
	TimestampTz last_start;		/* last pass of the worker in this database */
	TimestampTz last_end;
	int64		last_deleted;	/* rows deleted by the last pass */
	int64		total_deleted;	/* since the server started */
	int32		failures;		/* consecutive failed passes */
	TimestampTz next_run;		/* no pass before this (backoff) */
	char		last_error[CLEANUP_ERROR_LEN];	/* empty after a good pass */
	bool		backlog;		/* the last worker left expired rows: the
								 * launcher starts another at next_run */
	SweepPosition sweep;		/* the registry's sweep (sweep.c) */
} CleanupStatus;

typedef struct IdempotencySharedState
{
	LWLock	   *lock;			/* guards the cleanup status table */
	CleanupStatus cleanup[IDEMPOTENCY_MAX_DATABASES];
	pg_atomic_uint64 stats[STAT_NUM];	/* atomics: no lock */
	pg_atomic_uint64 stats_reset;	/* TimestampTz of the last reset */
	uint64		claim_lock_seed;	/* random, set once at start: key/locks.c */
} IdempotencySharedState;

extern IdempotencySharedState *IdempotencyShared;
extern void IdempotencyShmemInit(void);
extern CleanupStatus *CleanupStatusFind(Oid dbid);
extern CleanupStatus *CleanupStatusFor(Oid dbid);

#endif							/* IDEMPOTENCY_SHMEM_H */
