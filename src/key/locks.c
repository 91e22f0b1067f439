/*-------------------------------------------------------------------------
 *
 * locks.c
 *	  idempotency.lock() and idempotency.try_lock(): transaction-scoped
 *	  advisory locks on a key, to serialise work on a hot key before the
 *	  registry is touched (pessimistic locking, beside the version column's
 *	  optimistic one).
 *
 * The lock is a transaction-scoped lock in the advisory lock method whose
 * tag holds the owner's role OID and a 32-bit hash of (scope, key): two
 * roles never contend on each other's keys, however their keys hash (a hash
 * alone can be steered: lookup3 with a fixed seed can be run backwards, and
 * another application could make a key of its own collide with one of
 * yours).  Two keys of one owner that collide only wait for each other.
 * pg_locks shows the tag to every role, so the hash tells a role that can
 * guess another application's keys which one it is working on now (see
 * doc/key-locks.md).  Its tag has a fourth field (LOCK_FIELD4) that core's
 * pg_advisory_* functions never use (they use 1 for a bigint and 2 for a
 * pair of integers): no SQL can take, wait for or release these locks except
 * through lock() and try_lock(), so a role that was never granted them
 * cannot block an application's keys, nor be blocked by them.  They show in
 * pg_locks as advisory locks with objsubid LOCK_FIELD4, wait like any heavy-
 * weight lock (lock_timeout, deadlock detection) and are released at the
 * end of the transaction; pg_advisory_unlock_all() does not touch them.
 * Advisory locks are node-local: under Citus each node has its own, and
 * claims are serialised by the registry's unique index, never by these locks
 * (Citus rule 5).
 *
 * outbox_send takes a lock of the same kind on (owner, ordering key), under
 * a fourth field of its own (LOCK_FIELD4_OUTBOX), to serialise the senders
 * of one key (outbox.c): it never meets a key lock of the same name, and no
 * SQL can take or wait for it either.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/key/locks.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "base/compat.h"
#include "base/shmem.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "key/args.h"
#include "key/locks.h"
#include "objects/extension.h"

/* A fixed seed, so that the same key maps to the same lock in every backend. */
#define LOCK_HASH_SEED UINT64CONST(0x69646d70)

/*
 * The advisory lock tag's fourth field for a key lock ("ID"): never 1 or 2,
 * which are core's, so that no pg_advisory_* call names one of our locks.
 */
#define LOCK_FIELD4 0x4944

/* The fourth field for an outbox ordering key's lock ("OB"). */
#define LOCK_FIELD4_OUTBOX 0x4F42

/* The fourth field for a claim's lock on its key in the registry ("RK"). */
#define LOCK_FIELD4_CLAIM 0x524B

/*
 * lock_hash
 *		A 64-bit hash of n text values, NUL-separated: no two different lists
 *		give the same bytes.
 */
static uint64
lock_hash(text **parts, int n, uint64 seed)
{
	StringInfoData buf;
	uint64		h;

	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(&buf, '\0');
		appendBinaryStringInfo(&buf, VARDATA_ANY(parts[i]), VARSIZE_ANY_EXHDR(parts[i]));
	}
	h = DatumGetUInt64(hash_any_extended((unsigned char *) buf.data, buf.len, seed));
	pfree(buf.data);
	return h;
}

/*
 * lock_owner_oid
 *		The role OID of the name the caller's records are stored under (a
 *		role that exists: the caller, or the application role it belongs to).
 */
static Oid
lock_owner_oid(Datum owner)
{
	return get_role_oid(TextDatumGetCString(owner), false);
}

/*
 * lock_tag
 *		The lock tag of (current role, scope, key) in this database.
 */
static void
lock_tag(FunctionCallInfo fcinfo, LOCKTAG *tag)
{
	text	   *parts[2];
	Datum		owner = OwnerName();
	uint64		h;

	/* a bad key is reported before a bad scope */
	parts[1] = DatumGetTextPP(IdempotencyKeyArg(fcinfo, 0));
	parts[0] = DatumGetTextPP(IdempotencyScopeArg(fcinfo, 1));
	h = lock_hash(parts, 2, LOCK_HASH_SEED);
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, lock_owner_oid(owner), (uint32) h, LOCK_FIELD4);
}

PG_FUNCTION_INFO_V1(idempotency_lock);

/*
 * idempotency_lock
 *		lock(key, scope): wait for the key's lock, held to the end of the
 *		transaction.
 */
Datum
idempotency_lock(PG_FUNCTION_ARGS)
{
	LOCKTAG		tag;

	IdempotencyCheckNargs(fcinfo, 2);
	lock_tag(fcinfo, &tag);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(idempotency_try_lock);

/*
 * idempotency_try_lock
 *		try_lock(key, scope): take the key's lock if it is free.
 */
Datum
idempotency_try_lock(PG_FUNCTION_ARGS)
{
	LOCKTAG		tag;

	IdempotencyCheckNargs(fcinfo, 2);
	lock_tag(fcinfo, &tag);
	PG_RETURN_BOOL(LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL);
}

/*
 * LockOutboxOrderingKey
 *		Wait for the lock of (owner, ordering key), held to the end of the
 *		transaction (or of the subtransaction that took it, if that rolls
 *		back).  Two keys of one owner whose hashes collide share a lock:
 *		their senders wait for each other, which costs time and nothing
 *		else; keys of two owners never do.  A prepared
 *		transaction keeps it until COMMIT PREPARED or ROLLBACK PREPARED, as
 *		it keeps pg_advisory_xact_lock()'s.
 */
void
LockOutboxOrderingKey(Datum owner, Datum ordering_key)
{
	LOCKTAG		tag;
	text	   *parts[1];
	uint64		h;

	parts[0] = DatumGetTextPP(ordering_key);
	h = lock_hash(parts, 1, LOCK_HASH_SEED);
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, lock_owner_oid(owner), (uint32) h, LOCK_FIELD4_OUTBOX);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * registry_key_tag
 *		The tag of the lock of owner's (scope, key) in the registry.
 */
static void
registry_key_tag(LOCKTAG *tag, Datum owner, Datum scope, Datum key)
{
	text	   *parts[2];
	uint64		h;

	parts[0] = DatumGetTextPP(scope);
	parts[1] = DatumGetTextPP(key);
	h = lock_hash(parts, 2, IdempotencyShared != NULL ?
				  IdempotencyShared->claim_lock_seed : LOCK_HASH_SEED);
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, lock_owner_oid(owner), (uint32) h,
						 LOCK_FIELD4_CLAIM);
}

/*
 * LockRegistryKey
 *		Take the lock of owner's (scope, key) in the registry, held to the end
 *		of the transaction (or of the subtransaction that took it, if that
 *		rolls back), as a prepared transaction keeps it; if dontWait, only if
 *		nobody holds it, returning whether it was taken.
 *
 * A claim that is not written until its finish holds its key by this lock
 * alone (begin.c), so that a duplicate waits for it and then reads what it
 * committed.  Nothing else depends on it: the registry's unique index still
 * decides between two records of a key, whatever the locks did.  That is
 * why its hash is seeded with a secret chosen when the server starts (when
 * the library is preloaded): pg_locks shows every role its tag, and a hash
 * with a known seed would tell a role that can guess another application's
 * keys which one is being processed now.  After a restart the prepared
 * transactions' locks carry the old secret: a duplicate of a prepared claim
 * then meets the claim's record at its own finish (a serialization failure)
 * instead of waiting at its begin, and that is all.  A key lock
 * (lock()) and an outbox ordering key's lock keep a fixed seed: they are
 * what serialises their callers, and must mean the same after a restart.
 */
bool
LockRegistryKey(Datum owner, Datum scope, Datum key, bool dontWait)
{
	LOCKTAG		tag;

	registry_key_tag(&tag, owner, scope, key);
	return LockAcquire(&tag, ExclusiveLock, false, dontWait) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * UnlockRegistryKey
 *		Give back a lock LockRegistryKey took, before the transaction ends.
 */
void
UnlockRegistryKey(Datum owner, Datum scope, Datum key)
{
	LOCKTAG		tag;

	registry_key_tag(&tag, owner, scope, key);
	(void) LockRelease(&tag, ExclusiveLock, false);
}
