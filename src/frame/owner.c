/*-------------------------------------------------------------------------
 *
 * owner.c
 *	  Whose records a call works on: the application's role, not whichever
 *	  login carries it.
 *
 * Records, inbox entries, tokens and outbox messages are stored under a
 * role's name.  Which role: the one grant_usage() was given to.  Many
 * systems log in with short-lived roles that a secrets manager creates
 * every hour as members of one application role ("v-app-<lease>" IN ROLE
 * app); a retry that arrives on the next lease's connection must find the
 * records the previous lease stored, or it executes again.  So:
 *
 *	 - an application role stores under its own name;
 *	 - so does a superuser;
 *	 - any other role stores under the one application role whose
 *	   privileges it has (it is a member of it, with INHERIT), and is
 *	   refused (IK007) if it has the privileges of more than one: which
 *	   application a call belongs to must never be a guess;
 *	 - a role that has none but holds part of the API (a privilege on an
 *	   object of application_api granted to it, or to a role whose
 *	   privileges it has, not to PUBLIC) is refused (IK008): it was meant
 *	   to act for an application, and under its own name it would find
 *	   none of the application's records and process everything again;
 *	 - any other role (one writing a table a state machine guards, or
 *	   calling cleanup()) stores under its own name.
 *
 * The application roles are the rows of idempotency.application_roles,
 * which only grant_usage() writes and which dump and restore and updates
 * keep.  Up to 1.1 they were the grantees of EXECUTE on idempotent_begin
 * (a grant a restore of an older dump or a trimmed set of privileges
 * loses); the library keeps that rule for the SQL objects of 1.0 and 1.1,
 * until ALTER EXTENSION ... UPDATE.
 *
 * The answer is cached for the calling role; any change to roles, role
 * memberships or functions (their grants, which grant_usage() changes with
 * the table) clears it (extension.c's callbacks).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/frame/owner.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "base/idempotency.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "objects/extension.h"

/* the application roles' names */
static SqlStatement application_roles_stmt = {
	.sql = "SELECT r.role_name FROM idempotency.application_roles AS r",
	.nargs = 0,
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
	.snapshot = SQL_SNAPSHOT_LATEST,
};

/*
 * whether role $1 holds a privilege on an object of the application API,
 * granted to it or to a role whose privileges it has (not to PUBLIC: the
 * Citus delegates are open to all, and check the function they stand for)
 */
static SqlStatement holds_api_stmt = {
	.sql = "SELECT FROM idempotency.application_api AS a,"
	" LATERAL (SELECT p.proacl AS acl FROM pg_catalog.pg_proc AS p"
	"   WHERE a.object_type OPERATOR(pg_catalog.=) 'function'"
	"     AND p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regproc('idempotency.'"
	"       OPERATOR(pg_catalog.||) pg_catalog.quote_ident(a.object_name))"
	"  UNION ALL"
	"  SELECT c.relacl FROM pg_catalog.pg_class AS c"
	"   WHERE a.object_type OPERATOR(pg_catalog.<>) 'function'"
	"     AND c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass('idempotency.'"
	"       OPERATOR(pg_catalog.||) pg_catalog.quote_ident(a.object_name))) AS o,"
	" pg_catalog.aclexplode(o.acl) AS x"
	" WHERE x.grantee OPERATOR(pg_catalog.<>) 0"
	"   AND x.privilege_type OPERATOR(pg_catalog.=) a.privilege"
	"   AND pg_catalog.pg_has_role($1, x.grantee, 'USAGE')"
	" LIMIT 1",
	.nargs = 1,
	.argtypes = {OIDOID},
	.expected_rc = SPI_OK_SELECT,
	.snapshot = SQL_SNAPSHOT_LATEST,
};

/* The last calling role, and the name its records are stored under. */
static Oid	owner_cache_roleid = InvalidOid;
static Datum owner_cache_name = (Datum) 0;

/*
 * OwnerCacheInvalidate
 *		Forget the cached answer; called by the extension's callbacks.
 */
void
OwnerCacheInvalidate(void)
{
	owner_cache_roleid = InvalidOid;
}

/*
 * owner_grantees
 *		The roles granted EXECUTE on idempotent_begin by name (not PUBLIC,
 *		not its owner): the applications grant_usage() was given to, as the
 *		SQL objects of 1.0 and 1.1 tell them.
 */
static List *
owner_grantees(Oid fnoid)
{
	HeapTuple	tuple;
	Datum		aclDatum;
	bool		isnull;
	Oid			fnowner;
	List	   *grantees = NIL;

	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for function %u", fnoid);
	fnowner = ((Form_pg_proc) GETSTRUCT(tuple))->proowner;
	aclDatum = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_proacl, &isnull);
	if (!isnull)
	{
		Acl		   *acl = DatumGetAclPCopy(aclDatum);

		/*
		 * ACL_DAT() without its test for a null bitmap, which an ACL never
		 * has (and which -Wsign-compare objects to in array.h)
		 */
		AclItem    *items = (AclItem *) ((char *) acl + ARR_OVERHEAD_NONULLS(1));

		Assert(ARR_NDIM(acl) == 1 && !ARR_HASNULL(acl));
		for (int i = 0; i < ACL_NUM(acl); i++)
		{
			Oid			grantee = items[i].ai_grantee;

			if (grantee != ACL_ID_PUBLIC && grantee != fnowner &&
				(ACLITEM_GET_PRIVS(items[i]) & ACL_EXECUTE) != 0)
				grantees = list_append_unique_oid(grantees, grantee);
		}
	}
	ReleaseSysCache(tuple);
	return grantees;
}

/*
 * owner_application_roles
 *		The application roles that exist, as grant_usage() recorded them.
 */
static List *
owner_application_roles(void)
{
	SqlCall		call;
	List	   *roles = NIL;
	uint64		n;

	SqlCallBeginAsTablesOwner(&call);
	n = SqlExecute(&application_roles_stmt, NULL, NULL);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		Oid			roleid;

		roleid = get_role_oid(TextDatumGetCString(SqlResult(i, 1, &isnull)), true);
		if (OidIsValid(roleid))
			roles = lappend_oid(roles, roleid);
	}
	SqlCallEnd(&call);
	return roles;
}

/*
 * owner_holds_api
 *		Whether roleid holds a privilege on an object of the application API.
 */
static bool
owner_holds_api(Oid roleid)
{
	SqlCall		call;
	Datum		values[1] = {ObjectIdGetDatum(roleid)};
	bool		holds;

	SqlCallBeginAsTablesOwner(&call);
	holds = SqlExecute(&holds_api_stmt, values, NULL) > 0;
	SqlCallEnd(&call);
	return holds;
}

/*
 * OwnerRolesRecorded
 *		Whether the SQL objects record the application roles (1.2 on).
 *		Asked of the schema, not only of the version the catalog cache read:
 *		the update to 1.2 changes none of the tables that cache watches, so
 *		a session connected before it would go on with 1.1's rule.  (The
 *		owner cache itself is cleared by the update's grants.)
 */
bool
OwnerRolesRecorded(void)
{
	const IdempotencyCatalog *catalog = IdempotencyCatalogGet();

	return catalog->sql_version >= IDEMPOTENCY_SQL_1_2 ||
		OidIsValid(get_relname_relid("application_roles", catalog->nspoid));
}

/*
 * owner_resolve
 *		The role whose name a call by roleid stores its records under.
 */
static Oid
owner_resolve(Oid roleid)
{
	const IdempotencyCatalog *catalog = IdempotencyCatalogGet();
	List	   *applications;
	bool		recorded;
	Oid			found = InvalidOid;
	ListCell   *lc;

	if (superuser_arg(roleid))
		return roleid;

	recorded = OwnerRolesRecorded();
	if (recorded)
		applications = owner_application_roles();
	else
		applications = owner_grantees(catalog->begin_fn);
	if (list_member_oid(applications, roleid))
		return roleid;
	foreach(lc, applications)
	{
		Oid			application = lfirst_oid(lc);

		if (!has_privs_of_role(roleid, application))
			continue;
		if (OidIsValid(found))
			ereport(ERROR,
					(errcode(ERRCODE_IDEMPOTENCY_AMBIGUOUS_OWNER),
					 errmsg("role \"%s\" belongs to more than one application role of extension \"idempotency\"",
							GetUserNameFromId(roleid, false)),
					 errdetail("It has the privileges of \"%s\" and of \"%s\", which were both granted the API, so its records could be stored under either.",
							   GetUserNameFromId(found, false),
							   GetUserNameFromId(application, false)),
					 errhint("Grant the API to this role itself, make it a member of one application role only, or SET ROLE to the application role first.")));
		found = application;
	}
	if (OidIsValid(found))
		return found;
	if (recorded && owner_holds_api(roleid))
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_NOT_APPLICATION_ROLE),
				 errmsg("role \"%s\" is not an application role of extension \"idempotency\"",
						GetUserNameFromId(roleid, false)),
				 errdetail("It holds privileges on the API, but grant_usage() was not given to it or to a role it has the privileges of, so it has no records of its own to work on."),
				 errhint("As a superuser, run SELECT idempotency.grant_usage('%s'), or make it a member of its application role.",
						 GetUserNameFromId(roleid, false))));
	return roleid;
}

/*
 * OwnerName
 *		The name the current role's records are stored under, as a text
 *		datum (in TopMemoryContext, valid until the next invalidation).
 */
Datum
OwnerName(void)
{
	Oid			roleid = GetUserId();

	if (roleid != owner_cache_roleid)
	{
		char	   *name = GetUserNameFromId(owner_resolve(roleid), false);
		MemoryContext oldcontext = MemoryContextSwitchTo(TopMemoryContext);

		if (owner_cache_name != (Datum) 0)
			pfree(DatumGetPointer(owner_cache_name));
		owner_cache_name = CStringGetTextDatum(name);
		MemoryContextSwitchTo(oldcontext);
		owner_cache_roleid = roleid;
	}
	return owner_cache_name;
}

PG_FUNCTION_INFO_V1(idempotency_owner_name);

/*
 * idempotency_owner_name
 *		owner_name(): the name the caller's records are stored under, for the
 *		my_* views.
 */
Datum
idempotency_owner_name(PG_FUNCTION_ARGS)
{
	IdempotencyCheckNargs(fcinfo, 0);
	PG_RETURN_DATUM(datumCopy(OwnerName(), false, -1));
}

/*
 * SqlCallBegin
 *		Enter the frame: note who calls and when, connect SPI and become the
 *		tables' owner.  The extension's objects are checked first, before
 *		whose records the call works on is looked up.
 */
void
SqlCallBegin(SqlCall *call)
{
	Datum		owner;

	SqlCacheCheck();
	owner = OwnerName();
	SqlCallBeginAsTablesOwner(call);
	call->owner = owner;
}
