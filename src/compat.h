/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Version-dependent includes and macros, kept in one place.
 *
 * The extension targets PostgreSQL 15, the version the project's machines
 * run.  Anything that differs between majors goes here, never as #if at a
 * call site.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_COMPAT_H
#define IDEMPOTENCY_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000
#error "idempotency requires PostgreSQL 15 or later"
#endif

/* MarkGUCPrefixReserved() appeared in 15; older majors had EmitWarnings... */
#define IdempotencyReserveGUCPrefix(prefix) MarkGUCPrefixReserved(prefix)

/*
 * Whether a role may connect to a database: PostgreSQL 16 folded the
 * per-kind ACL checks into object_aclcheck().
 */
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_database.h"
#include "utils/acl.h"
#define IdempotencyDatabaseAclCheck(dbid, roleid, mode) \
	object_aclcheck(DatabaseRelationId, (dbid), (roleid), (mode))
#else
#include "utils/acl.h"
#define IdempotencyDatabaseAclCheck(dbid, roleid, mode) \
	pg_database_aclcheck((dbid), (roleid), (mode))
#endif

#endif							/* IDEMPOTENCY_COMPAT_H */
