/*-------------------------------------------------------------------------
 *
 * outbox.h
 *	  The transactional outbox: messages sent in a transaction and handed
 *	  to relays once it commits.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/outbox.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_OUTBOX_H
#define IDEMPOTENCY_OUTBOX_H

#include "sqlcall.h"

/* idempotency.outbox_delivery: how sent messages reach their consumers */
typedef enum OutboxDelivery
{
	OUTBOX_DELIVERY_RELAY,		/* relays fetch and acknowledge them */
	OUTBOX_DELIVERY_LOGICAL		/* logical decoding messages, for CDC */
} OutboxDelivery;

/* The most messages outbox_fetch hands out, and outbox_ack takes, at once. */
#define IDEMPOTENCY_OUTBOX_MAX_BATCH 10000

extern uint64 OutboxDeleteExpired(SqlCall *call, int32 limit);

#endif							/* IDEMPOTENCY_OUTBOX_H */
