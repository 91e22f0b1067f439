/*-------------------------------------------------------------------------
 *
 * cache_invalidate.h
 *	  The extension's one entry point for invalidations.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/cache_invalidate.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_CACHE_INVALIDATE_H
#define IDEMPOTENCY_CACHE_INVALIDATE_H

extern void IdempotencyCacheInvalidateInit(void);

#endif							/* IDEMPOTENCY_CACHE_INVALIDATE_H */
