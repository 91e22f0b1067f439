/*-------------------------------------------------------------------------
 *
 * delegate.h
 *	  What changes once idempotency.citus_setup() has distributed the
 *	  registry: calls handed to the key's worker.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/distributed/delegate.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_DELEGATE_H
#define IDEMPOTENCY_DELEGATE_H

#include "fmgr.h"
#include "access/htup.h"
#include "access/tupdesc.h"

#include "frame/sqlcall.h"
#include "objects/extension.h"

/*
 * The API functions that hand their calls to the key's worker: without
 * Citus, or before the setup, nothing changes.
 */
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

extern void IdempotencyCitusDelegateInvalidate(Oid relid);
extern int	IdempotencyCitusDistributionArgument(Oid funcid, Oid extoid, bool *forced);
extern bool IdempotencyCitusDelegate(FunctionCallInfo fcinfo, CitusDelegate which,
									 Datum *result);
extern void IdempotencyCitusNoteOwnerAccess(void);
extern IdempotencySqlVersion IdempotencyCitusRegistryVersion(void);
extern void IdempotencyCitusRequireSetup(IdempotencySqlVersion version,
										 const char *feature);
extern int32 IdempotencyCitusLocalGroup(void);
extern void IdempotencyCitusOwnRows(FunctionCallInfo fcinfo, const char *view,
									uint64 (*select) (SqlCall *call),
									void (*emit) (ReturnSetInfo *rsinfo, HeapTuple tuple,
												  TupleDesc desc));

#endif							/* IDEMPOTENCY_DELEGATE_H */
