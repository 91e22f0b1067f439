/*-------------------------------------------------------------------------
 *
 * cleanup.h
 *	  Removing expired rows: one batch (cleanup.c) and the background workers
 *	  (worker.c).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/expiry/cleanup.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_CLEANUP_H
#define IDEMPOTENCY_CLEANUP_H

/* cleanup.c: one batch of the cleanup, for cleanup() and the worker */
extern uint64 IdempotencyCleanup(int32 batch_size, bool paced, bool *more);

/* worker.c */
extern void IdempotencyWorkerRegister(void);

#endif							/* IDEMPOTENCY_CLEANUP_H */
