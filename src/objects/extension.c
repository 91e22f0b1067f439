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
 * The installed SQL objects must also be ones this library can serve.
 * Between a package upgrade and ALTER EXTENSION ... UPDATE a new library
 * runs with the old objects: pg_extension.extversion, read from the
 * extension's row by OID, must be one of the versions in sql_versions[] (the
 * library's own and the releases before it, whose objects it keeps working
 * with; what a later version added is refused until the update, see
 * IdempotencyRequireSqlVersion), and a layout that only an unreleased build
 * made (a schema that is the extension's namespace but not its member) is
 * recognised as such; both are refused with the hint to update the
 * extension, before anything else is looked at.  Each entry point that takes
 * arguments checks, first thing, that the catalog passes as many as it reads
 * (IdempotencyCheckNargs): a function declared by another script may pass
 * fewer, and reading past them reads garbage.
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
 *	  src/objects/extension.c
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
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "base/compat.h"
#include "objects/extension.h"

#define EXTENSION_NAME		"idempotency"
#define EXTENSION_SCHEMA	"idempotency"
#define EXTENSION_KEY_TYPE	"key"
#define EXTENSION_BEGIN_FUNCTION "idempotent_begin"

/* The relations the C code reaches, by IdempotencyRelation. */
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

/*
 * IdempotencyCatalogInvalidate
 *		Mark the answer stale when one of our tables, or everything
 *		(InvalidOid; DROP EXTENSION among others), is invalidated, or any
 *		schema changed (schema = true): schemas change rarely, so we don't
 *		bother to tell ours apart.  Called by cache_invalidate.c.
 */
void
IdempotencyCatalogInvalidate(Oid relid, bool schema)
{
	if (schema || relid == InvalidOid)
		catalog_valid = false;
	for (int i = 0; i < IR_NUM && catalog_valid; i++)
		if (relid == catalog.relids[i])
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
 * catalog_function
 *		The one function of that name in the schema, or InvalidOid.
 */
static Oid
catalog_function(const char *name, Oid nspoid)
{
	CatCList   *list = SearchSysCacheList1(PROCNAMEARGSNSP, CStringGetDatum(name));
	Oid			found = InvalidOid;

	for (int i = 0; i < list->n_members; i++)
	{
		Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(&list->members[i]->tuple);

		if (proc->pronamespace != nspoid)
			continue;
		if (OidIsValid(found))
		{
			found = InvalidOid; /* two: neither is known to be ours */
			break;
		}
		found = proc->oid;
	}
	ReleaseSysCacheList(list);
	return found;
}

/*
 * The versions of the SQL objects this library serves, oldest first; the
 * last is the library's own.  An entry's index is its IdempotencySqlVersion.
 */
static const char *const sql_versions[] = {"1.0", "1.1", IDEMPOTENCY_LIBRARY_VERSION};

StaticAssertDecl(lengthof(sql_versions) == IDEMPOTENCY_SQL_1_2 + 1,
				 "sql_versions[] must list every IdempotencySqlVersion");

/*
 * catalog_check_version
 *		Refuse SQL objects installed by a version of the extension that this
 *		library does not serve: the version in the extension's row (found by
 *		OID), and the layout of an earlier build, whose schema was created by
 *		CREATE EXTENSION (the extension's namespace) and so is no member.
 *		Returns the version served.
 */
static IdempotencySqlVersion
catalog_check_version(Oid extoid, Oid named_schema)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Datum		d;
	bool		isnull;
	char	   *version;
	Oid			extnamespace;
	int			served = -1;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "could not find tuple for extension %u", extoid);
	d = heap_getattr(tup, Anum_pg_extension_extversion, RelationGetDescr(rel), &isnull);
	version = isnull ? pstrdup("") : TextDatumGetCString(d);
	extnamespace = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	for (int i = 0; i < (int) lengthof(sql_versions); i++)
		if (strcmp(version, sql_versions[i]) == 0)
			served = i;
	if (served < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"%s\" is installed at version \"%s\", but its library is version \"%s\"",
						EXTENSION_NAME, version, IDEMPOTENCY_LIBRARY_VERSION),
				 errdetail("Version \"%s\" of the library works with the SQL objects of versions \"%s\" to \"%s\".",
						   IDEMPOTENCY_LIBRARY_VERSION, sql_versions[0],
						   IDEMPOTENCY_LIBRARY_VERSION),
				 errhint("Run ALTER EXTENSION %s UPDATE, then reconnect.",
						 EXTENSION_NAME)));

	if (OidIsValid(named_schema) && extnamespace == named_schema &&
		!OidIsValid(catalog_member_schema(extoid)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the SQL objects of extension \"%s\" were installed by an earlier build",
						EXTENSION_NAME),
				 errdetail("Schema \"%s\" is the extension's schema but not a member of it; this build's install script makes it a member.",
						   EXTENSION_SCHEMA),
				 errhint("Run ALTER EXTENSION %s UPDATE, then reconnect.",
						 EXTENSION_NAME)));
	return (IdempotencySqlVersion) served;
}

/*
 * IdempotencyCheckVersion
 *		Only the version check of IdempotencyCatalogGet, for the cleanup
 *		worker, which skips a database whose SQL objects are another
 *		version's but counts any other refusal as a failure.  The extension
 *		must be installed.
 */
void
IdempotencyCheckVersion(void)
{
	catalog_check_version(get_extension_oid(EXTENSION_NAME, false),
						  get_namespace_oid(EXTENSION_SCHEMA, true));
}

/*
 * IdempotencyWrongNargs
 *		IdempotencyCheckNargs found that the SQL function passes another
 *		number of arguments than its entry point reads: its declaration is
 *		another version's.
 */
void
IdempotencyWrongNargs(FunctionCallInfo fcinfo, int nargs)
{
	Oid			fn_oid = fcinfo->flinfo ? fcinfo->flinfo->fn_oid : InvalidOid;

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("function %s does not match the library of extension \"%s\"",
					OidIsValid(fn_oid) ? format_procedure(fn_oid) : "(unknown)",
					EXTENSION_NAME),
			 errdetail("The function passes %d arguments; version \"%s\" of the library takes %d.",
					   PG_NARGS(), IDEMPOTENCY_LIBRARY_VERSION, nargs),
			 errhint("Run ALTER EXTENSION %s UPDATE, then reconnect.",
					 EXTENSION_NAME)));
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

	named = get_namespace_oid(EXTENSION_SCHEMA, true);
	catalog.sql_version = catalog_check_version(catalog.extoid, named);
	member = catalog_member_schema(catalog.extoid);
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

	catalog.begin_fn = catalog_function(EXTENSION_BEGIN_FUNCTION, named);
	catalog_require_member(ProcedureRelationId, catalog.begin_fn, "function",
						   EXTENSION_BEGIN_FUNCTION);
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
	if (!catalog_valid)
	{
		catalog_lookup();
		catalog_valid = true;
	}
	return &catalog;
}

/*
 * IdempotencyRequireSqlVersion
 *		Refuse a feature whose SQL objects came with a later version than
 *		the installed one.  The cached answer is read again first: ALTER
 *		EXTENSION ... UPDATE in another session sends no invalidation that
 *		this cache hears, and a pooled session should not have to reconnect
 *		to use what the update added.
 */
void
IdempotencyRequireSqlVersion(IdempotencySqlVersion version, const char *feature)
{
	if (IdempotencyCatalogGet()->sql_version >= version)
		return;
	catalog_valid = false;
	if (IdempotencyCatalogGet()->sql_version >= version)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%s needs version \"%s\" of extension \"%s\"",
					feature, sql_versions[version], EXTENSION_NAME),
			 errdetail("The extension's SQL objects are version \"%s\".",
					   sql_versions[IdempotencyCatalogGet()->sql_version]),
			 errhint("Run ALTER EXTENSION %s UPDATE.", EXTENSION_NAME)));
}

/*
 * IdempotencyRequireViewPrivilege
 *		Refuse a caller who may not read the extension's view of that name:
 *		for a function open to everyone that returns the caller's rows of
 *		that view (the Citus forms of my_records, my_tokens and my_outbox),
 *		so that a revocation on the view holds for the function too.
 *		Called through the view, the caller has passed that check already.
 */
void
IdempotencyRequireViewPrivilege(const char *view)
{
	Oid			viewoid = get_relname_relid(view, IdempotencyCatalogGet()->nspoid);

	if (!OidIsValid(viewoid))
		elog(ERROR, "view %s.%s does not exist", EXTENSION_SCHEMA, view);
	if (pg_class_aclcheck(viewoid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_VIEW, view);
}
