/*-------------------------------------------------------------------------
 *
 * owner.h
 *	  Whose records a call works on.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/owner.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_OWNER_H
#define IDEMPOTENCY_OWNER_H

#include "postgres.h"

extern Datum OwnerName(void);
extern void OwnerCacheInvalidate(void);
extern bool OwnerRolesRecorded(void);

#endif							/* IDEMPOTENCY_OWNER_H */
