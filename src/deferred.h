/*-------------------------------------------------------------------------
 *
 * deferred.h
 *	  Claims taken with defer_claim, written by their finish.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/deferred.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_DEFERRED_H
#define IDEMPOTENCY_DEFERRED_H

#include "utils/timestamp.h"

typedef struct DeferredClaim
{
	text	   *owner;
	text	   *scope;
	text	   *key;
	bytea	   *fingerprint;	/* NULL when there is no request */
	int32		attempt;
	TimestampTz created_at;
	TimestampTz lease_until;
	TimestampTz expires_at;
	int			nest_level;		/* the subtransaction that took it */
} DeferredClaim;

extern DeferredClaim *DeferredClaimFind(Datum owner, Datum scope, Datum key);
extern DeferredClaim *DeferredClaimAdd(Datum owner, Datum scope, Datum key,
									   Datum fingerprint);
extern void DeferredClaimForget(DeferredClaim *claim);

#endif							/* IDEMPOTENCY_DEFERRED_H */
