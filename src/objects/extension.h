/*-------------------------------------------------------------------------
 *
 * extension.h
 *	  The extension's own objects, found through its catalog entries.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/objects/extension.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_EXTENSION_H
#define IDEMPOTENCY_EXTENSION_H

#include "fmgr.h"

/*
 * extension.c: the extension's schema, relations and key type, found through
 * pg_extension and pg_depend and checked to be members of the extension.
 */
typedef enum IdempotencyRelation
{
	IR_REGISTRY,
	IR_INBOX,
	IR_TOKENS,
	IR_STATE_MACHINES,
	IR_STATE_HISTORY,
	IR_OUTBOX,
	IR_NUM
} IdempotencyRelation;

/*
 * The versions of the SQL objects that this library serves (extension.c,
 * sql_versions[]), in order: code that uses an object a later version added
 * asks for that version.
 */
typedef enum IdempotencySqlVersion
{
	IDEMPOTENCY_SQL_1_0,
	IDEMPOTENCY_SQL_1_1,
	IDEMPOTENCY_SQL_1_2
} IdempotencySqlVersion;

typedef struct IdempotencyCatalog
{
	Oid			extoid;			/* pg_extension */
	Oid			nspoid;			/* the schema named idempotency, a member */
	Oid			relids[IR_NUM]; /* its tables, members */
	Oid			keytype;		/* idempotency.key, a member */
	Oid			begin_fn;		/* idempotent_begin, a member: its grantees
								 * are the applications (owner.c) */
	IdempotencySqlVersion sql_version;	/* pg_extension.extversion */
} IdempotencyCatalog;

extern void IdempotencyCatalogInvalidate(Oid relid, bool schema);
extern const IdempotencyCatalog *IdempotencyCatalogGet(void);
extern void IdempotencyCheckVersion(void);
extern void IdempotencyRequireSqlVersion(IdempotencySqlVersion version,
										 const char *feature);
extern void IdempotencyRequireViewPrivilege(const char *view);

/*
 * The SQL function must pass exactly the arguments its entry point reads: a
 * declaration left by another version may pass fewer.  Every entry point
 * that reads arguments checks this before reading any.
 */
#define IdempotencyCheckNargs(fcinfo, nargs) \
	do { \
		if (unlikely(PG_NARGS() != (nargs))) \
			IdempotencyWrongNargs((fcinfo), (nargs)); \
	} while (0)

extern void IdempotencyWrongNargs(FunctionCallInfo fcinfo, int nargs);

#endif							/* IDEMPOTENCY_EXTENSION_H */
