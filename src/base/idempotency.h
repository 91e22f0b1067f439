/*-------------------------------------------------------------------------
 *
 * idempotency.h
 *	  What every part of the extension shares: limits, SQLSTATEs and the
 *	  settings.  Each module has a header of its own (see doc/contributing.md,
 *	  "Code layout").
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/base/idempotency.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_H
#define IDEMPOTENCY_H

#include "fmgr.h"

#include "base/compat.h"

/* The longest key, in bytes, that idempotency.key accepts. */
#define IDEMPOTENCY_KEY_MAXLEN	255

/* Scopes follow the same length limit as keys. */
#define IDEMPOTENCY_SCOPE_MAXLEN 255

/*
 * Custom SQLSTATEs, class "IK" (idempotency key).  An HTTP layer maps them as
 * doc/errors.md says: IK001 -> 422, IK002/IK003/IK004 -> 409, IK005 ->
 * 403, IK006 -> 500 (the handler's own bug), IK007 and IK008 -> 500 (a
 * deployment error).
 */
#define ERRCODE_IDEMPOTENCY_REQUEST_MISMATCH	MAKE_SQLSTATE('I','K','0','0','1')
#define ERRCODE_IDEMPOTENCY_NO_CLAIM			MAKE_SQLSTATE('I','K','0','0','2')
#define ERRCODE_IDEMPOTENCY_ALREADY_FINISHED	MAKE_SQLSTATE('I','K','0','0','3')
#define ERRCODE_IDEMPOTENCY_STALE_ATTEMPT		MAKE_SQLSTATE('I','K','0','0','4')
#define ERRCODE_IDEMPOTENCY_TOKEN_REFUSED		MAKE_SQLSTATE('I','K','0','0','5')
#define ERRCODE_IDEMPOTENCY_ATTEMPT_REQUIRED	MAKE_SQLSTATE('I','K','0','0','6')
#define ERRCODE_IDEMPOTENCY_AMBIGUOUS_OWNER	MAKE_SQLSTATE('I','K','0','0','7')
#define ERRCODE_IDEMPOTENCY_NOT_APPLICATION_ROLE	MAKE_SQLSTATE('I','K','0','0','8')

/*
 * Custom SQLSTATEs, class "IS" (idempotency state machine): IS001 -> 409.
 */
#define ERRCODE_IDEMPOTENCY_TRANSITION_NOT_ALLOWED	MAKE_SQLSTATE('I','S','0','0','1')
#define ERRCODE_IDEMPOTENCY_UNKNOWN_STATE		MAKE_SQLSTATE('I','S','0','0','2')

/* Class "IV" (idempotency version): IV001 -> 409. */
#define ERRCODE_IDEMPOTENCY_STALE_WRITE		MAKE_SQLSTATE('I','V','0','0','1')

/* GUCs (base/settings.c) */
extern int	idempotency_max_response_size;
extern int	idempotency_cleanup_interval;
extern int	idempotency_cleanup_batch_size;
extern int	idempotency_cleanup_max_rows_per_second;
extern char *idempotency_cleanup_role;
extern int	idempotency_history_ttl;
extern bool idempotency_permission_hints;
extern int	idempotency_outbox_delivery;
extern int	idempotency_max_wait;
extern int	idempotency_commit_rule;

/*
 * idempotency.commit_rule: whether a claim taken without external => true
 * must be finished in the transaction that took it (1.1's rule), or may
 * commit unfinished, bounded by its lease, as every claim could in 1.0.
 */
typedef enum IdempotencyCommitRule
{
	COMMIT_RULE_EXTERNAL_REQUIRED,
	COMMIT_RULE_LEASE_IS_EXTERNAL
} IdempotencyCommitRule;

/* idempotency.outbox_delivery: how sent messages reach their consumers */
typedef enum OutboxDelivery
{
	OUTBOX_DELIVERY_RELAY,		/* relays fetch and acknowledge them */
	OUTBOX_DELIVERY_LOGICAL		/* logical decoding messages, for CDC */
} OutboxDelivery;

/* base/settings.c */
extern void IdempotencySettingsInit(void);

#endif							/* IDEMPOTENCY_H */
