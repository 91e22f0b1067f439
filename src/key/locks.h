/*-------------------------------------------------------------------------
 *
 * locks.h
 *	  The extension's own advisory locks: key locks (lock(), try_lock())
 *	  and the locks that serialise the senders of an outbox ordering key.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/key/locks.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_LOCKS_H
#define IDEMPOTENCY_LOCKS_H

#include "postgres.h"

extern void LockOutboxOrderingKey(Datum owner, Datum ordering_key);
extern bool LockRegistryKey(Datum owner, Datum scope, Datum key, bool dontWait);
extern void UnlockRegistryKey(Datum owner, Datum scope, Datum key);

#endif							/* IDEMPOTENCY_LOCKS_H */
