/*-------------------------------------------------------------------------
 *
 * utils.h
 *	  Argument checks and helpers shared by the SQL-callable functions.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/utils.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_UTILS_H
#define IDEMPOTENCY_UTILS_H

#include "fmgr.h"
#include "utils/timestamp.h"

/* Length of a SHA-256 digest in bytes. */
#define IDEMPOTENCY_SHA256_LEN	32

extern void IdempotencyRequireArg(FunctionCallInfo fcinfo, int argno, const char *name);
extern Datum IdempotencyKeyArg(FunctionCallInfo fcinfo, int argno);
extern Datum IdempotencyScopeArg(FunctionCallInfo fcinfo, int argno);
extern TimestampTz IdempotencyAddPositive(TimestampTz now, Datum interval, const char *name);
extern char *IdempotencyKeyDisplay(Datum key);
extern void IdempotencySha256(const char *data, size_t len,
							  uint8 digest[IDEMPOTENCY_SHA256_LEN]);

#endif							/* IDEMPOTENCY_UTILS_H */
