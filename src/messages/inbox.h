/*-------------------------------------------------------------------------
 *
 * inbox.h
 *	  The inbox of message ids a consumer has seen.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/messages/inbox.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_INBOX_H
#define IDEMPOTENCY_INBOX_H

#include "frame/sqlcall.h"

/* The most message ids inbox_receive_batch takes at once. */
#define IDEMPOTENCY_INBOX_MAX_BATCH 10000

extern uint64 InboxDeleteExpired(SqlCall *call, int32 limit);

#endif							/* IDEMPOTENCY_INBOX_H */
