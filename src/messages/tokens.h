/*-------------------------------------------------------------------------
 *
 * tokens.h
 *	  One-time tokens issued by the server.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/messages/tokens.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_TOKENS_H
#define IDEMPOTENCY_TOKENS_H

#include "frame/sqlcall.h"

extern void TokenRequire(SqlCall *call, Datum scope, Datum key);
extern uint64 TokensDeleteExpired(SqlCall *call, int32 limit);

#endif							/* IDEMPOTENCY_TOKENS_H */
