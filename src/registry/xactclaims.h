/*-------------------------------------------------------------------------
 *
 * xactclaims.h
 *	  The claims the current transaction took.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/xactclaims.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_XACTCLAIMS_H
#define IDEMPOTENCY_XACTCLAIMS_H

#include "lib/ilist.h"

#include "registry/registry.h"

/*
 * What a claim of this transaction is for, and so whether the transaction
 * may commit while it is open.
 */
typedef enum XactClaimKind
{
	XACT_CLAIM_EXTERNAL,		/* work outside the database: may commit open */
	XACT_CLAIM_TRANSACTIONAL,	/* ends before commit; written by its finish,
								 * or before if a call needs its record */
	XACT_CLAIM_DEFERRED			/* written by its finish, not yet at all */
} XactClaimKind;

/*
 * A claim of this transaction: the image of its record (for a deferred
 * claim, the record its finish will write), and the subtransactions that
 * took it and ended it.
 */
typedef struct XactClaim
{
	RegistryRow row;
	XactClaimKind kind;
	int			nest_level;		/* the subtransaction that took it */
	int			ended_level;	/* the one that ended it; 0 while open */
	int			written_level;	/* the one that wrote its record; 0 while the
								 * claim lives only here */
	dlist_node	node;			/* in the transaction's claims */
} XactClaim;

extern XactClaim *XactClaimFind(Datum owner, Datum scope, Datum key);
extern XactClaim *XactClaimAdd(const RegistryRow *claim, XactClaimKind kind, bool written);
extern void XactClaimWritten(XactClaim *claim);
extern void XactClaimLocked(void);
extern void XactClaimUnlocked(void);
extern int	XactClaimLocks(void);
extern void XactClaimEnd(XactClaim *claim);
extern Datum XactClaimsInDatabase(Datum owner);

/* finish.c: the attempt a call on this transaction's claim names */
extern void RegistryOwnAttempt(XactClaim *claim, RegistryAttempt attempt);

/* finish.c: write the record of this transaction's claim, if not yet */
extern void RegistryOwnWrite(SqlCall *call, XactClaim *claim, const char *doing);

#endif							/* IDEMPOTENCY_XACTCLAIMS_H */
