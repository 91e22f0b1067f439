/*-------------------------------------------------------------------------
 *
 * registry.h
 *	  The statements on idempotency.registry, one typed function each.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_REGISTRY_H
#define IDEMPOTENCY_REGISTRY_H

#include "deferred.h"
#include "sqlcall.h"

/* What a begin claims: the record's identity besides its owner, and terms. */
typedef struct RegistryClaim
{
	Datum		scope;
	Datum		key;
	Datum		fingerprint;	/* bytea, or 0 when there is no request */
	TimestampTz lease_until;
	TimestampTz expires_at;
	int32		fence;			/* RegistryFence() read just before */
} RegistryClaim;

/*
 * A record as RegistryLookup reads it.  Varlena fields point into SPI's
 * memory until RegistryRecordKeep copies response and body out; 0 stands
 * for NULL in every field.
 */
typedef struct RegistryRecord
{
	const char *status;			/* one of the constant status strings */
	int32		attempt;
	Datum		fingerprint;
	Datum		response;
	TimestampTz lease_until;
	TimestampTz expires_at;
	int32		status_code;
	Datum		body;
} RegistryRecord;

/* What a finish stores; 0 stands for NULL. */
typedef struct RegistryAnswer
{
	bool		failed;
	Datum		response;		/* jsonb */
	int32		status_code;
	Datum		body;			/* bytea */
	TimestampTz expires_at;		/* a new expiry; 0 keeps the claim's */
} RegistryAnswer;

/* An attempt a finish or abandon names, if it names one. */
typedef struct RegistryAttempt
{
	bool		given;
	int32		value;
} RegistryAttempt;

extern int32 RegistryFence(void);

extern bool RegistryInsertClaim(SqlCall *call, const RegistryClaim *claim);
extern bool RegistryLookup(SqlCall *call, Datum scope, Datum key, RegistryRecord *rec);
extern void RegistryRecordKeep(SqlCall *call, RegistryRecord *rec);
extern bool RegistryRecordLive(SqlCall *call, const RegistryRecord *rec);
extern bool RegistryReclaim(SqlCall *call, const RegistryClaim *claim, int32 *attempt);
extern bool RegistryTakeover(SqlCall *call, const RegistryClaim *claim, int32 *attempt,
							 TimestampTz *expires_at);
extern bool RegistryFinish(SqlCall *call, Datum scope, Datum key,
						   const RegistryAnswer *answer, RegistryAttempt attempt);
extern bool RegistryAbandon(SqlCall *call, Datum scope, Datum key, RegistryAttempt attempt);
extern void RegistryInsertFinished(SqlCall *call, const DeferredClaim *claim,
								   const RegistryAnswer *answer);

#endif							/* IDEMPOTENCY_REGISTRY_H */
