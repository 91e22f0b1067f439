/*-------------------------------------------------------------------------
 *
 * xactclaims.h
 *	  The claims the current transaction took.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/xactclaims.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_XACTCLAIMS_H
#define IDEMPOTENCY_XACTCLAIMS_H

#include "lib/ilist.h"

#include "registry.h"

/*
 * A claim of this transaction: the image of its record (for a deferred
 * claim, the record its finish will write), and the subtransactions that
 * took it and ended it.
 */
typedef struct XactClaim
{
	RegistryRow row;
	bool		deferred;		/* written by its finish, not yet at all */
	int			nest_level;		/* the subtransaction that took it */
	int			ended_level;	/* the one that ended it; 0 while open */
	dlist_node	node;			/* in the transaction's claims */
} XactClaim;

extern XactClaim *XactClaimFind(Datum owner, Datum scope, Datum key);
extern XactClaim *XactClaimAdd(const RegistryRow *claim, bool deferred);
extern void XactClaimEnd(XactClaim *claim);

/* registry_api.c: the attempt a call on this transaction's claim names */
extern void RegistryOwnAttempt(XactClaim *claim, RegistryAttempt attempt);

#endif							/* IDEMPOTENCY_XACTCLAIMS_H */
