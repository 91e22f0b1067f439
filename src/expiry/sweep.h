/*-------------------------------------------------------------------------
 *
 * sweep.h
 *	  The registry's cleanup: a sweep of the heap by block ranges.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/expiry/sweep.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_SWEEP_H
#define IDEMPOTENCY_SWEEP_H

#include "base/shmem.h"
#include "frame/sqlcall.h"

/*
 * The registry has no expires_at index; its cleanup walks the heap in
 * ranges of SWEEP_RANGE_BLOCKS blocks (TID range scans) and remembers where
 * it stopped.  A paced call (the background worker's) sweeps at most
 * SWEEP_PACED_BLOCKS blocks.
 */
#define SWEEP_RANGE_BLOCKS	4096
#define SWEEP_PACED_BLOCKS	4096

extern uint64 SweepRegistry(SqlCall *call, int32 limit, bool paced, bool *more);
extern void SweepPassBegin(CleanupStatus *slot);

#endif							/* IDEMPOTENCY_SWEEP_H */
