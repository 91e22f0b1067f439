/*-------------------------------------------------------------------------
 *
 * outbox.h
 *	  The transactional outbox: messages sent in a transaction and handed
 *	  to relays once it commits.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/messages/outbox.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_OUTBOX_H
#define IDEMPOTENCY_OUTBOX_H

#include "frame/sqlcall.h"

/* The most messages outbox_fetch hands out, and outbox_ack takes, at once. */
#define IDEMPOTENCY_OUTBOX_MAX_BATCH 10000

extern uint64 OutboxDeleteExpired(SqlCall *call, int32 limit);

#endif							/* IDEMPOTENCY_OUTBOX_H */
