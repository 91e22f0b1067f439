/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Version-dependent includes and macros, kept in one place.
 *
 * The extension supports PostgreSQL 15 and later; it is tested on 15, 17 and
 * 18 (test/matrix.sh).  Anything that differs between majors goes here,
 * never as #if at a call site.  Where a later major offers something better
 * (custom wait events on 17, module metadata on 18, interruptible workers
 * after 18) the macro gives it there and the plain equivalent on 15.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/base/compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_COMPAT_H
#define IDEMPOTENCY_COMPAT_H

#include "postgres.h"

#include "postmaster/bgworker.h"
#include "utils/wait_event.h"

#if PG_VERSION_NUM < 150000
#error "idempotency requires PostgreSQL 15 or later: build it with the pg_config of a PostgreSQL 15, 16, 17 or 18 installation"
#endif

/* 16 moved the varlena macros (VARDATA_ANY, ...) out of postgres.h. */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/* MarkGUCPrefixReserved() appeared in 15; older majors had EmitWarnings... */
#define IdempotencyReserveGUCPrefix(prefix) MarkGUCPrefixReserved(prefix)

/*
 * Whether a role may connect to a database, or run a function: PostgreSQL
 * 16 folded the per-kind ACL checks into object_aclcheck().
 */
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_database.h"
#include "catalog/pg_proc.h"
#include "utils/acl.h"
#define IdempotencyDatabaseAclCheck(dbid, roleid, mode) \
	object_aclcheck(DatabaseRelationId, (dbid), (roleid), (mode))
#define IdempotencyFunctionAclCheck(fnoid, roleid, mode) \
	object_aclcheck(ProcedureRelationId, (fnoid), (roleid), (mode))
#else
#include "utils/acl.h"
#define IdempotencyDatabaseAclCheck(dbid, roleid, mode) \
	pg_database_aclcheck((dbid), (roleid), (mode))
#define IdempotencyFunctionAclCheck(fnoid, roleid, mode) \
	pg_proc_aclcheck((fnoid), (roleid), (mode))
#endif

/*
 * The lists of MergeActionState that a result relation's matched rows go
 * through: 17 added WHEN NOT MATCHED BY SOURCE, whose actions may UPDATE too,
 * and keeps the lists in one array.  Sets lists[] and returns their number.
 */
#if PG_VERSION_NUM >= 170000
#define IdempotencyMergeUpdateLists(rri, lists) \
	((lists)[0] = (rri)->ri_MergeActions[MERGE_WHEN_MATCHED], \
	 (lists)[1] = (rri)->ri_MergeActions[MERGE_WHEN_NOT_MATCHED_BY_SOURCE], 2)
#else
#define IdempotencyMergeUpdateLists(rri, lists) \
	((lists)[0] = (rri)->ri_matchedMergeAction, 1)
#endif

/*
 * Module magic.  18 records the library's name and version, which
 * pg_get_loaded_modules() shows; earlier majors only check the ABI.
 */
#ifndef IDEMPOTENCY_LIBRARY_VERSION
#error "IDEMPOTENCY_LIBRARY_VERSION is set by the Makefile, from the control file's default_version"
#endif
/* fmgr.h defines the magic: the entry may include it after this file */
#include "fmgr.h"
#ifdef PG_MODULE_MAGIC_EXT
#define IDEMPOTENCY_MODULE_MAGIC \
	PG_MODULE_MAGIC_EXT(.name = "idempotency", .version = IDEMPOTENCY_LIBRARY_VERSION)
#else
#define IDEMPOTENCY_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/*
 * Wait events.  17 lets an extension name its waits, so that
 * pg_stat_activity.wait_event shows "IdempotencyLauncherMain" rather than
 * "Extension"; the name is registered in shared memory on first use, by the
 * process that waits.  On 15 every extension wait is PG_WAIT_EXTENSION.
 */
#if PG_VERSION_NUM >= 170000
#define IdempotencyWaitEventNew(name) WaitEventExtensionNew(name)
#else
#define IdempotencyWaitEventNew(name) ((void) (name), (uint32) PG_WAIT_EXTENSION)
#endif

/*
 * Background worker flags.  A worker started with BGWORKER_INTERRUPTIBLE is
 * terminated by DROP DATABASE (and ALTER DATABASE RENAME, CREATE DATABASE
 * ... TEMPLATE) instead of making it wait and fail.  The flag is not in 18
 * (18.6 has no such flag) but in the major after it; there the cleanup
 * worker gets it, and before it the flag is 0 and the worker's short passes
 * keep out of the way.
 */
#ifdef BGWORKER_INTERRUPTIBLE
#define IDEMPOTENCY_BGWORKER_INTERRUPTIBLE BGWORKER_INTERRUPTIBLE
#else
#define IDEMPOTENCY_BGWORKER_INTERRUPTIBLE 0
#endif


/*
 * A function that does not return: 18 replaced the pg_attribute_noreturn()
 * suffix with a pg_noreturn prefix.  Declarations carry both; each major
 * defines the one it has.
 */
#ifndef pg_noreturn
#define pg_noreturn
#endif
#ifndef pg_attribute_noreturn
#define pg_attribute_noreturn()
#endif

#endif							/* IDEMPOTENCY_COMPAT_H */
