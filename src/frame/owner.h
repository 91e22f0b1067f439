/*-------------------------------------------------------------------------
 *
 * owner.h
 *	  Whose records a call works on.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/frame/owner.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_OWNER_H
#define IDEMPOTENCY_OWNER_H

#include "postgres.h"

#include "frame/sqlcall.h"

extern Datum OwnerName(void);

/*
 * Enter the SQL frame for a call that works on its caller's records: as
 * SqlCallBeginAsTablesOwner, with call->owner the name they are filed under.
 */
extern void SqlCallBegin(SqlCall *call);
extern void OwnerCacheInvalidate(void);
extern bool OwnerRolesRecorded(void);

#endif							/* IDEMPOTENCY_OWNER_H */
