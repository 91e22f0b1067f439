/*-------------------------------------------------------------------------
 *
 * args.h
 *	  Argument checks shared by the SQL-callable functions.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/key/args.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_ARGS_H
#define IDEMPOTENCY_ARGS_H

#include "fmgr.h"
#include "utils/timestamp.h"

extern void IdempotencyRequireArg(FunctionCallInfo fcinfo, int argno, const char *name);
extern Datum IdempotencyKeyArg(FunctionCallInfo fcinfo, int argno);
extern Datum IdempotencyScopeArg(FunctionCallInfo fcinfo, int argno);
extern Datum IdempotencyTextArg(FunctionCallInfo fcinfo, int argno, const char *name);
extern TimestampTz IdempotencyAddPositive(TimestampTz now, Datum interval, const char *name);

#endif							/* IDEMPOTENCY_ARGS_H */
