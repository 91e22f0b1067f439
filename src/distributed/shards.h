/*-------------------------------------------------------------------------
 *
 * shards.h
 *	  The distributed table a trigger's shard belongs to.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/distributed/shards.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_SHARDS_H
#define IDEMPOTENCY_SHARDS_H

#include "postgres.h"
#include "utils/relcache.h"

extern Oid	IdempotencyCitusShardOf(Relation rel);
extern char *IdempotencyCitusTableName(Relation rel);
extern void IdempotencyCitusShardInvalidate(Oid relid);

#endif							/* IDEMPOTENCY_SHARDS_H */
