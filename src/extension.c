/*-------------------------------------------------------------------------
 *
 * extension.c
 *	  Finding the extension's own objects through its catalog entries.
 *
 * The SQL that the C functions run names our objects by schema
 * (idempotency.registry, OPERATOR(pg_catalog.=), ...), and that text is
 * only as trustworthy as the schema it names.  The install script creates
 * the schema, so it is a member of the extension and belongs to the
 * superuser who installed it; a role that is not superuser can neither plant
 * it beforehand (CREATE EXTENSION refuses an existing one) nor rename it.
 * But a name is only a name: if the schema were renamed and another created
 * under the old name, every statement would reach whatever the new one
 * holds.  So before any statement runs, the schema named "idempotency" must
 * be the schema that is a member of the extension "idempotency" (pg_depend,
 * deptype 'e'), and the tables and the key type that the C code caches must
 * be members of the extension too; otherwise every function refuses to run.
 *
 * The answer is cached per backend.  Any change to pg_namespace (a schema
 * created, renamed or dropped) and a relcache invalidation of one of our
 * tables, or of everything, mark it stale, and the next caller checks again.
 * Callers that keep OIDs or plans of their own compare them with the
 * current answer on every call (registry.c, statemachine.c).
 *
 * Note: the core plan cache re-parses a kept plan's text after any change to
 * pg_namespace.  A schema renamed between our check and that re-parse could
 * still redirect one statement; renaming the extension's schema takes its
 * owner, a superuser, so that window is not open to anyone else.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/extension.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "extension.h"
#include "idempotency.h"

#define EXTENSION_NAME		"idempotency"
#define EXTENSION_SCHEMA	"idempotency"
#define EXTENSION_KEY_TYPE	"key"

/* The tables the C code reaches, by IdempotencyRelation. */
static const char *const catalog_relnames[IR_NUM] = {
	[IR_REGISTRY] = "registry",
	[IR_INBOX] = "inbox",
	[IR_TOKENS] = "tokens",
	[IR_STATE_MACHINES] = "state_machines",
	[IR_STATE_HISTORY] = "state_history",
	[IR_OUTBOX] = "outbox",
};

static IdempotencyCatalog catalog;
static bool catalog_valid = false;
static bool catalog_callbacks_registered = false;

/*
 * catalog_relcache_callback
 *		Mark the answer stale when one of our tables, or everything, is
 *		invalidated (DROP EXTENSION among others).
 */
static void
catalog_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid)
		catalog_valid = false;
	for (int i = 0; i < IR_NUM && catalog_valid; i++)
		if (relid == catalog.relids[i])
			catalog_valid = false;
}

/*
 * catalog_namespace_callback
 *		Mark the answer stale when any schema is created, renamed or dropped.
 *		Note: schemas change rarely, so we don't bother to tell ours apart.
 */
static void
catalog_namespace_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	catalog_valid = false;
}

/*
 * catalog_member_schema
 *		The schema that is a member of the extension, or InvalidOid.
 */
static Oid
catalog_member_schema(Oid extoid)
{
	Relation	rel;
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			result = InvalidOid;

	rel = table_open(DependRelationId, AccessShareLock);
	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(ExtensionRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, DependReferenceIndexId, true, NULL, 2, key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tup);

		if (dep->classid == NamespaceRelationId &&
			dep->deptype == DEPENDENCY_EXTENSION)
		{
			result = dep->objid;
			break;
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * catalog_schema_owner
 *		The name of a schema's owner, for an error message.
 */
static char *
catalog_schema_owner(Oid nspoid)
{
	HeapTuple	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nspoid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for namespace %u", nspoid);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	return GetUserNameFromId(owner, true);
}

/*
 * catalog_require_member
 *		Refuse an object of ours (found by name in our schema) that is missing
 *		or is not a member of the extension.
 */
static void
catalog_require_member(Oid classid, Oid objid, const char *kind, const char *name)
{
	if (!OidIsValid(objid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s \"%s.%s\" of extension \"%s\" does not exist",
						kind, EXTENSION_SCHEMA, name, EXTENSION_NAME),
				 errhint("Drop the extension and create it again.")));
	if (getExtensionOfObject(classid, objid) != catalog.extoid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s \"%s.%s\" does not belong to extension \"%s\"",
						kind, EXTENSION_SCHEMA, name, EXTENSION_NAME),
				 errdetail("Its functions only use objects that are members of the extension."),
				 errhint("Drop the extension and create it again.")));
}

/*
 * catalog_lookup
 *		Find and check everything again.
 */
static void
catalog_lookup(void)
{
	Oid			member;
	Oid			named;

	catalog.extoid = get_extension_oid(EXTENSION_NAME, true);
	if (!OidIsValid(catalog.extoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"%s\" is not installed in this database",
						EXTENSION_NAME),
				 errhint("Run CREATE EXTENSION %s.", EXTENSION_NAME)));

	member = catalog_member_schema(catalog.extoid);
	named = get_namespace_oid(EXTENSION_SCHEMA, true);
	if (!OidIsValid(named) && OidIsValid(member))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_SCHEMA),
				 errmsg("schema \"%s\" does not exist", EXTENSION_SCHEMA),
				 errdetail("The schema of extension \"%s\" is now named \"%s\".",
						   EXTENSION_NAME, get_namespace_name(member)),
				 errhint("Rename it back to \"%s\".", EXTENSION_SCHEMA)));
	if (!OidIsValid(named) || named != member)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("schema \"%s\" does not belong to extension \"%s\"",
						EXTENSION_SCHEMA, EXTENSION_NAME),
				 OidIsValid(member) ?
				 errdetail("The schema of the extension is now named \"%s\"; the one named \"%s\" is owned by role \"%s\".",
						   get_namespace_name(member), EXTENSION_SCHEMA,
						   catalog_schema_owner(named)) :
				 errdetail("No schema is a member of the extension."),
				 errhint("Only the extension's own schema may be named \"%s\": rename or drop the other one.",
						 EXTENSION_SCHEMA)));
	catalog.nspoid = named;

	for (int i = 0; i < IR_NUM; i++)
	{
		catalog.relids[i] = get_relname_relid(catalog_relnames[i], named);
		catalog_require_member(RelationRelationId, catalog.relids[i], "relation",
							   catalog_relnames[i]);
	}

	catalog.keytype = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
									  CStringGetDatum(EXTENSION_KEY_TYPE),
									  ObjectIdGetDatum(named));
	catalog_require_member(TypeRelationId, catalog.keytype, "type",
						   EXTENSION_KEY_TYPE);
}

/*
 * IdempotencyCatalogGet
 *		The extension's schema, tables and key type, checked as described in
 *		the file header; an error if the extension is not installed or any
 *		of them is not its own.  Cheap when nothing has changed.
 */
const IdempotencyCatalog *
IdempotencyCatalogGet(void)
{
	if (!catalog_callbacks_registered)
	{
		CacheRegisterRelcacheCallback(catalog_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, catalog_namespace_callback, (Datum) 0);
		catalog_callbacks_registered = true;
	}
	if (!catalog_valid)
	{
		catalog_lookup();
		catalog_valid = true;
	}
	return &catalog;
}
