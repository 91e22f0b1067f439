/*-------------------------------------------------------------------------
 *
 * planner_guard.h
 *	  Keeps Citus from routing a call of the API by a NULL argument.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/distributed/planner_guard.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_PLANNER_GUARD_H
#define IDEMPOTENCY_PLANNER_GUARD_H

#include "postgres.h"

extern void IdempotencyCitusNullArgInit(void);
extern void IdempotencyCitusNullArgInvalidate(Oid relid);

#endif							/* IDEMPOTENCY_PLANNER_GUARD_H */
