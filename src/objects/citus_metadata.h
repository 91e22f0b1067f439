/*-------------------------------------------------------------------------
 *
 * citus_metadata.h
 *	  What Citus's catalog says about the extension's tables.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/objects/citus_metadata.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_CITUS_METADATA_H
#define IDEMPOTENCY_CITUS_METADATA_H

#include "postgres.h"

/* The extension's tables whose distribution is kept track of. */
typedef enum CitusTable
{
	CITUS_REGISTRY,
	CITUS_INBOX,
	CITUS_TOKENS,
	CITUS_HISTORY,
	CITUS_OUTBOX,
	CITUS_NUM_TABLES
} CitusTable;

extern bool IdempotencyCitusCatalogExists(void);
extern char IdempotencyCitusPartMethod(CitusTable table);
extern Oid	IdempotencyCitusTableRelid(CitusTable table);
extern void IdempotencyCitusMetadataInvalidate(Oid relid);

#endif							/* IDEMPOTENCY_CITUS_METADATA_H */
