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
 *	 - a role that was granted the API itself (a grantee of EXECUTE on
 *	   idempotent_begin, which grant_usage grants, and which Citus copies
 *	   to every node with the function) stores under its own name;
 *	 - so does a superuser, or a role with no granted role above it;
 *	 - any other role stores under the one granted role whose privileges it
 *	   has (it is a member of it, with INHERIT), and is refused (IK007) if it
 *	   has the privileges of more than one: which application a call belongs
 *	   to must never be a guess.
 *
 * The answer is cached for the calling role; any change to roles, role
 * memberships or functions (their grants) clears it (extension.c's
 * callbacks).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/owner.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "extension.h"
#include "idempotency.h"
#include "owner.h"

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
 *		not its owner): the applications grant_usage() was given to.
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
 * owner_resolve
 *		The role whose name a call by roleid stores its records under.
 */
static Oid
owner_resolve(Oid roleid)
{
	List	   *grantees;
	Oid			found = InvalidOid;
	ListCell   *lc;

	if (superuser_arg(roleid))
		return roleid;
	grantees = owner_grantees(IdempotencyCatalogGet()->begin_fn);
	if (list_member_oid(grantees, roleid))
		return roleid;
	foreach(lc, grantees)
	{
		Oid			grantee = lfirst_oid(lc);

		if (!has_privs_of_role(roleid, grantee))
			continue;
		if (OidIsValid(found))
			ereport(ERROR,
					(errcode(ERRCODE_IDEMPOTENCY_AMBIGUOUS_OWNER),
					 errmsg("role \"%s\" belongs to more than one application role of extension \"idempotency\"",
							GetUserNameFromId(roleid, false)),
					 errdetail("It has the privileges of \"%s\" and of \"%s\", which were both granted the API, so its records could be stored under either.",
							   GetUserNameFromId(found, false),
							   GetUserNameFromId(grantee, false)),
					 errhint("Grant the API to this role itself, make it a member of one application role only, or SET ROLE to the application role first.")));
		found = grantee;
	}
	return OidIsValid(found) ? found : roleid;
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
