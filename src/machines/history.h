/*-------------------------------------------------------------------------
 *
 * history.h
 *	  The state history that record_transition writes.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/machines/history.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_HISTORY_H
#define IDEMPOTENCY_HISTORY_H

#include "frame/sqlcall.h"

extern uint64 HistoryDeleteExpired(SqlCall *call, int32 limit);

#endif							/* IDEMPOTENCY_HISTORY_H */
