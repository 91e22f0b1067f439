/*-------------------------------------------------------------------------
 *
 * citus.h
 *	  What changes once idempotency.citus_setup() has distributed the tables.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/citus.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_CITUS_H
#define IDEMPOTENCY_CITUS_H

#include "fmgr.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"

#include "extension.h"

/*
 * citus.c: without Citus, or before the setup, nothing changes.
 */
typedef enum CitusTable
{
	CITUS_REGISTRY,
	CITUS_INBOX,
	CITUS_TOKENS,
	CITUS_HISTORY,
	CITUS_OUTBOX,
	CITUS_NUM_TABLES
} CitusTable;

/* The API functions that hand their calls to the key's worker. */
typedef enum CitusDelegate
{
	CITUS_DELEGATE_BEGIN,
	CITUS_DELEGATE_FINISH,
	CITUS_DELEGATE_ABANDON,
	CITUS_DELEGATE_LOOKUP,
	CITUS_DELEGATE_CHECKPOINT,
	CITUS_DELEGATE_RENEW,
	CITUS_NUM_DELEGATES
} CitusDelegate;

extern void IdempotencyCitusInvalidate(Oid relid);
extern int	IdempotencyCitusDistributionArgument(Oid funcid, Oid extoid, bool *forced);
extern void IdempotencyCitusNullArgInit(void);
extern void IdempotencyCitusNullArgInvalidate(Oid relid);
extern bool IdempotencyCitusDelegate(FunctionCallInfo fcinfo, CitusDelegate which,
									 Datum *result);
extern void IdempotencyCitusNoteOwnerAccess(void);
extern IdempotencySqlVersion IdempotencyCitusRegistryVersion(void);
extern void IdempotencyCitusRequireSetup(IdempotencySqlVersion version,
										 const char *feature);
extern char IdempotencyCitusPartMethod(CitusTable table);
extern bool IdempotencyCitusCleanup(CitusTable table, TimestampTz now, int32 limit,
									uint64 *deleted);
extern Oid	IdempotencyCitusShardOf(Relation rel);
extern char *IdempotencyCitusTableName(Relation rel);

#endif							/* IDEMPOTENCY_CITUS_H */
