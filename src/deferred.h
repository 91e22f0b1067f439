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

#include "registry.h"

/*
 * A deferred claim: the image of the record its finish will write, and the
 * subtransactions that took it and ended it.
 */
typedef struct DeferredClaim
{
	RegistryRow row;
	int			nest_level;		/* the subtransaction that took it */
	int			ended_level;	/* the one that ended it; 0 while open */
} DeferredClaim;

extern DeferredClaim *DeferredClaimFind(Datum owner, Datum scope, Datum key);
extern DeferredClaim *DeferredClaimAdd(const RegistryRow *claim);
extern void DeferredClaimEnd(DeferredClaim *claim);

#endif							/* IDEMPOTENCY_DEFERRED_H */
