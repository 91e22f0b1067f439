/*-------------------------------------------------------------------------
 *
 * citus_cleanup.h
 *	  The cleanup of a table that Citus distributes.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/expiry/citus_cleanup.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_CITUS_CLEANUP_H
#define IDEMPOTENCY_CITUS_CLEANUP_H

#include "postgres.h"
#include "utils/timestamp.h"

#include "objects/citus_metadata.h"

extern bool IdempotencyCitusCleanup(CitusTable table, TimestampTz now, int32 limit,
									uint64 *deleted);

#endif							/* IDEMPOTENCY_CITUS_CLEANUP_H */
