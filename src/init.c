/*-------------------------------------------------------------------------
 *
 * init.c
 *	  Module entry point: PG_MODULE_MAGIC and _PG_init.
 *
 * The library works both preloaded (shared_preload_libraries) and loaded on
 * first use.  Preloaded, it also sets up shared memory and registers the
 * cleanup launcher; loaded later, _PG_init defines the settings and returns
 * quietly, and the features that need shared memory check for it themselves
 * (IdempotencyShared is NULL) and say so.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/init.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "admin/hints.h"
#include "base/compat.h"
#include "base/idempotency.h"
#include "base/shmem.h"
#include "base/stats.h"
#include "cache_invalidate.h"
#include "distributed/planner_guard.h"
#include "expiry/cleanup.h"
#include "machines/triggers.h"

IDEMPOTENCY_MODULE_MAGIC;

void		_PG_init(void);

/*
 * _PG_init
 *		Define the settings, register the invalidation callbacks and the
 *		hooks; preloaded, also shared memory and the cleanup launcher.
 */
void
_PG_init(void)
{
	IdempotencySettingsInit();

	IdempotencyCacheInvalidateInit();
	IdempotencyStatsInit();
	IdempotencyHintsInit();
	VersionGuardInit();
	IdempotencyCitusNullArgInit();

	if (!process_shared_preload_libraries_in_progress)
		return;

	IdempotencyShmemInit();

	/* pg_upgrade starts the server in binary upgrade mode: no cleanup then */
	if (!IsBinaryUpgrade)
		IdempotencyWorkerRegister();
}
