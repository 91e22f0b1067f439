/*-------------------------------------------------------------------------
 *
 * hints.h
 *	  A hint at grant_usage() on permission errors for the extension's API.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/admin/hints.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_HINTS_H
#define IDEMPOTENCY_HINTS_H

extern void IdempotencyHintsInit(void);

#endif							/* IDEMPOTENCY_HINTS_H */
