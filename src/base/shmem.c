/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The extension's shared memory: the cleanup status of each database.
 *
 * Shared memory exists only when the library is in shared_preload_libraries;
 * IdempotencyShared is NULL otherwise, and everything that reads it must say
 * so instead of failing.
 *
 * Locking: IdempotencyShared->lock (a named LWLock tranche of one) guards the
 * whole status table.  The statistics counters are atomics and need no lock.
 * Writers (the launcher and the cleanup workers) take it exclusively for a few
 * stores; readers (the cleanup_status view) take it shared and copy what they
 * need.  Nothing is done while holding it but copying.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/base/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "base/shmem.h"

IdempotencySharedState *IdempotencyShared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * idempotency_shmem_request
 *		Ask for our space and our lock.
 */
static void
idempotency_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(IdempotencySharedState)));
	RequestNamedLWLockTranche("idempotency", 1);
}

/*
 * idempotency_shmem_startup
 *		Find or create the shared state; the first process zeroes it.
 */
static void
idempotency_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	IdempotencyShared = ShmemInitStruct("idempotency", sizeof(IdempotencySharedState),
										&found);
	if (!found)
	{
		memset(IdempotencyShared, 0, sizeof(IdempotencySharedState));
		IdempotencyShared->lock = &(GetNamedLWLockTranche("idempotency"))->lock;
		for (int i = 0; i < STAT_NUM; i++)
			pg_atomic_init_u64(&IdempotencyShared->stats[i], 0);
		pg_atomic_init_u64(&IdempotencyShared->stats_reset, (uint64) GetCurrentTimestamp());
		if (!pg_strong_random(&IdempotencyShared->claim_lock_seed,
							  sizeof(IdempotencyShared->claim_lock_seed)))
			IdempotencyShared->claim_lock_seed = (uint64) GetCurrentTimestamp() ^ (uint64) MyProcPid;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * IdempotencyShmemInit
 *		Install the hooks; called from _PG_init when preloading.
 */
void
IdempotencyShmemInit(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = idempotency_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = idempotency_shmem_startup;
}

/*
 * CleanupStatusFind
 *		The status slot of a database, or NULL if it has none.  Caller holds
 *		the lock.
 */
CleanupStatus *
CleanupStatusFind(Oid dbid)
{
	Assert(IdempotencyShared != NULL);
	for (int i = 0; i < IDEMPOTENCY_MAX_DATABASES; i++)
		if (IdempotencyShared->cleanup[i].dbid == dbid)
			return &IdempotencyShared->cleanup[i];
	return NULL;
}

/*
 * CleanupStatusFor
 *		The status slot of a database, claiming a free one (or the slot of a
 *		database that no longer exists, which the launcher clears) if it has
 *		none.  Returns NULL when every slot is taken.  Caller holds the lock
 *		exclusively.
 */
CleanupStatus *
CleanupStatusFor(Oid dbid)
{
	CleanupStatus *slot = CleanupStatusFind(dbid);

	if (slot == NULL)
		slot = CleanupStatusFind(InvalidOid);
	if (slot != NULL && slot->dbid == InvalidOid)
	{
		memset(slot, 0, sizeof(CleanupStatus));
		slot->dbid = dbid;
	}
	return slot;
}
