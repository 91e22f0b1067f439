/*-------------------------------------------------------------------------
 *
 * cache_invalidate.c
 *	  The extension's one entry point for invalidations: each per-backend
 *	  cache hears of a change from here.
 *
 * PostgreSQL has room for only a few relcache callbacks in a backend, for
 * every library loaded (Citus takes some), so the extension registers one,
 * whatever it caches, and the syscache callbacks for schemas, roles, role
 * memberships and functions.  The callbacks sit above every cache they
 * call, so that no cache needs to know of another: a new cache adds its
 * call here.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/cache_invalidate.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/inval.h"
#include "utils/syscache.h"

#include "cache_invalidate.h"
#include "distributed/delegate.h"
#include "distributed/planner_guard.h"
#include "distributed/shards.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "machines/statemachine.h"
#include "objects/citus_metadata.h"
#include "objects/extension.h"

/*
 * relcache_callback
 *		One of our tables, another relation or everything (InvalidOid) was
 *		invalidated.  The delegates' state compares with the registry's OID
 *		that the Citus metadata keeps, which it keeps when invalidated.
 */
static void
relcache_callback(Datum arg, Oid relid)
{
	IdempotencyCatalogInvalidate(relid, false);
	SqlCacheInvalidate(relid);
	StateMachineCacheInvalidate(relid);
	IdempotencyCitusMetadataInvalidate(relid);
	IdempotencyCitusShardInvalidate(relid);
	IdempotencyCitusDelegateInvalidate(relid);
	IdempotencyCitusNullArgInvalidate(relid);
}

/*
 * authid_callback
 *		Any role, role membership or function (its grants among others)
 *		changed: forget which name the caller's records are stored under.
 */
static void
authid_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	OwnerCacheInvalidate();
}

/*
 * namespace_callback
 *		Any schema was created, renamed or dropped: the catalog's answer is
 *		stale, and the null-argument check's, which keeps the schema's OID.
 */
static void
namespace_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	IdempotencyCatalogInvalidate(InvalidOid, true);
	IdempotencyCitusNullArgInvalidate(InvalidOid);
}

/*
 * IdempotencyCacheInvalidateInit
 *		Register the callbacks, once, when the library is loaded.
 */
void
IdempotencyCacheInvalidateInit(void)
{
	CacheRegisterRelcacheCallback(relcache_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, namespace_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, authid_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMMEMROLE, authid_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(PROCOID, authid_callback, (Datum) 0);
}
