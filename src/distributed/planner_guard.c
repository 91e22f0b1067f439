/*-------------------------------------------------------------------------
 *
 * planner_guard.c
 *	  A call that Citus would route by a NULL argument, refused before
 *	  Citus plans it.
 *
 * Citus 13.2 runs a call of a distributed function (SELECT f(...), or
 * SELECT ... FROM f(...)) on the node that holds its distribution
 * argument's shard, and hashes that argument without looking at its null
 * flag: given a NULL, the backend crashes.  Any role that may call one of
 * the extension's distributed functions could take the coordinator down.
 * The key type's hash functions refuse a NULL themselves (keycmp.c), but a
 * text argument is hashed by PostgreSQL's own function: the inbox's message
 * id, and, with citus_setup(distribute_by => 'scope'), every scope.
 *
 * So a planner hook, which runs before Citus's (Citus must be loaded
 * first), refuses such a call of one of the extension's functions with the
 * error the function gives for that argument itself.  It looks at a query
 * only if it has the shape Citus routes and a NULL argument, and reads
 * Citus's catalog (as delegate.c does for the delegates) once per function and
 * backend.  A value is NULL
 * for Citus if it is a NULL constant, or a parameter whose NULL value the
 * planner may fold in (a custom plan's).
 *
 * Every backend runs the hook, for every query of every application, so a
 * query that calls another function costs one syscache probe (the
 * function's schema) and nothing else: no catalog read, no cache entry.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/distributed/planner_guard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "commands/extension.h"
#include "funcapi.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "distributed/delegate.h"
#include "distributed/planner_guard.h"
#include "frame/sqlcall.h"

static planner_hook_type prev_planner_hook = NULL;

/*
 * Per backend: the functions of the extension's schema looked at so far and
 * the argument Citus routes each by (-1: none, or not one of the
 * extension's), and the schema's OID.  The delegates' calls, which pass NULL
 * for every argument left out, look here on every call.  Only the schema's
 * functions are entered, so the table never holds more than the extension
 * has; a function of any other schema is not the extension's, and is told
 * apart by its pg_proc entry alone.  Marked stale by an invalidation of
 * pg_dist_object (Citus sends one when it distributes a function), of
 * every relation, and of any schema (the extension's schema is created and
 * dropped with it); rebuilt on next use.
 */
typedef struct NullArgCacheEntry
{
	Oid			funcid;			/* the hash key */
	int			distarg;
} NullArgCacheEntry;

static HTAB *nullarg_cache = NULL;
static bool nullarg_cache_valid = false;
static Oid	nullarg_nspoid = InvalidOid;
static Oid	nullarg_dist_object_relid = InvalidOid;

/*
 * nullarg_routed_call
 *		The function call of a query of the shape Citus may route to a
 *		node, or NULL: a SELECT without WHERE of one function call, in its
 *		target list over no FROM, or as its only FROM item.
 */
static FuncExpr *
nullarg_routed_call(Query *parse)
{
	FromExpr   *jointree = parse->jointree;
	Node	   *from = NULL;
	Node	   *target = NULL;

	if (parse->commandType != CMD_SELECT || jointree == NULL || jointree->quals != NULL ||
		list_length(jointree->fromlist) > 1)
		return NULL;

	if (jointree->fromlist != NIL)
	{
		RangeTblRef *ref = linitial(jointree->fromlist);
		RangeTblEntry *rte;

		if (!IsA(ref, RangeTblRef))
			return NULL;
		rte = rt_fetch(ref->rtindex, parse->rtable);
		if (rte->rtekind != RTE_FUNCTION || list_length(rte->functions) != 1)
			return NULL;
		from = ((RangeTblFunction *) linitial(rte->functions))->funcexpr;
	}
	if (list_length(parse->targetList) == 1)
		target = (Node *) ((TargetEntry *) linitial(parse->targetList))->expr;

	/* Citus routes neither SELECT f() FROM g() nor SELECT f() FROM rel */
	if (target != NULL && IsA(target, FuncExpr))
		return from == NULL && jointree->fromlist == NIL ? (FuncExpr *) target : NULL;
	return from != NULL && IsA(from, FuncExpr) ? (FuncExpr *) from : NULL;
}

/*
 * nullarg_is_null
 *		Whether an argument is NULL as Citus will see it.
 */
static bool
nullarg_is_null(Node *arg, ParamListInfo params)
{
	Param	   *param;
	ParamExternData buf;
	ParamExternData *value;

	arg = strip_implicit_coercions(arg);
	if (IsA(arg, Const))
		return ((Const *) arg)->constisnull;
	if (!IsA(arg, Param) || params == NULL)
		return false;
	param = (Param *) arg;
	if (param->paramkind != PARAM_EXTERN || param->paramid <= 0 ||
		param->paramid > params->numParams)
		return false;
	value = params->paramFetch != NULL ?
		params->paramFetch(params, param->paramid, false, &buf) :
		&params->params[param->paramid - 1];
	return value != NULL && value->isnull && (value->pflags & PARAM_FLAG_CONST) != 0;
}

/*
 * nullarg_lookup
 *		The argument (from 0) Citus routes calls of a function of this
 *		extension by, or -1, read from Citus's catalog.
 */
static int
nullarg_lookup(Oid funcid)
{
	Oid			extoid = get_extension_oid("idempotency", true);
	SqlCall		call;
	bool		forced;
	int			distarg;

	nullarg_dist_object_relid = get_relname_relid("pg_dist_object", PG_CATALOG_NAMESPACE);
	if (!OidIsValid(extoid) || !OidIsValid(nullarg_dist_object_relid))
		return -1;

	SqlCallBeginAsCaller(&call);
	distarg = IdempotencyCitusDistributionArgument(funcid, extoid, &forced);
	SqlCallEnd(&call);
	return distarg;
}

/*
 * nullarg_cache_rebuild
 *		An empty table and the extension's schema looked up again (by name,
 *		in the syscache: the extension is not relocatable, and a schema of
 *		that name that is not its own holds none of its functions, which
 *		nullarg_lookup finds by membership).
 */
static void
nullarg_cache_rebuild(void)
{
	HASHCTL		ctl;

	if (nullarg_cache != NULL)
		hash_destroy(nullarg_cache);
	nullarg_cache = NULL;

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(NullArgCacheEntry);
	ctl.hcxt = CacheMemoryContext;
	nullarg_cache = hash_create("idempotency null-argument cache", 64, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	nullarg_nspoid = get_namespace_oid("idempotency", true);
	nullarg_cache_valid = true;
}

/*
 * nullarg_distribution_argument
 *		nullarg_lookup, remembered, for a function of the extension's schema;
 *		-1 at once for any other.
 */
static int
nullarg_distribution_argument(Oid funcid)
{
	NullArgCacheEntry *entry;
	bool		found;
	int			distarg;

	if (!nullarg_cache_valid)
		nullarg_cache_rebuild();
	if (!OidIsValid(nullarg_nspoid) || get_func_namespace(funcid) != nullarg_nspoid)
		return -1;

	entry = hash_search(nullarg_cache, &funcid, HASH_FIND, NULL);
	if (entry != NULL)
		return entry->distarg;

	/* looked up before entering: the lookup's SQL may invalidate the table */
	distarg = nullarg_lookup(funcid);
	if (!nullarg_cache_valid)
		return distarg;
	entry = hash_search(nullarg_cache, &funcid, HASH_ENTER, &found);
	entry->distarg = distarg;
	return distarg;
}

/*
 * nullarg_refuse
 *		The error the function gives for that argument: "idempotency key
 *		must not be null" for its key, "<name> must not be null" otherwise
 *		(args.c).
 */
static void
nullarg_refuse(Oid funcid, int argno)
{
	HeapTuple	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	Oid		   *types;
	char	  **names;
	char	   *modes;
	const char *name = NULL;

	if (HeapTupleIsValid(tuple))
	{
		if (argno < get_func_arg_info(tuple, &types, &names, &modes) && names != NULL)
			name = names[argno];
		ReleaseSysCache(tuple);
	}
	if (name == NULL || name[0] == '\0')
		name = psprintf("argument %d", argno + 1);
	else if (strcmp(name, "key") == 0)
		name = "idempotency key";
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("%s must not be null", name)));
}

/*
 * nullarg_planner
 *		The planner hook: refuse the call, then plan as before.
 */
static PlannedStmt *
nullarg_planner(Query *parse, const char *query_string, int cursorOptions,
				ParamListInfo boundParams)
{
	FuncExpr   *call = nullarg_routed_call(parse);

	if (call != NULL)
	{
		ListCell   *lc;
		int			argno = 0;
		int			distarg = -2;	/* not looked up yet */

		foreach(lc, call->args)
		{
			Node	   *arg = lfirst(lc);
			int			position = argno++;

			/* named notation: the position is the argument's own */
			if (IsA(arg, NamedArgExpr))
			{
				position = ((NamedArgExpr *) arg)->argnumber;
				arg = (Node *) ((NamedArgExpr *) arg)->arg;
			}
			if (!nullarg_is_null(arg, boundParams))
				continue;
			if (distarg == -2)
				distarg = nullarg_distribution_argument(call->funcid);
			if (distarg == position)
				nullarg_refuse(call->funcid, position);
		}
	}

	if (prev_planner_hook != NULL)
		return prev_planner_hook(parse, query_string, cursorOptions, boundParams);
	return standard_planner(parse, query_string, cursorOptions, boundParams);
}

/*
 * IdempotencyCitusNullArgInvalidate
 *		Forget the functions looked at and the schema when pg_dist_object
 *		(or everything) is invalidated; called by the extension's relcache
 *		callback, and with InvalidOid by its schema callback.  Only flips a
 *		flag: the table is rebuilt on next use.
 */
void
IdempotencyCitusNullArgInvalidate(Oid relid)
{
	if (relid == InvalidOid || relid == nullarg_dist_object_relid)
		nullarg_cache_valid = false;
}

/*
 * IdempotencyCitusNullArgInit
 *		Install the planner hook; called from _PG_init, after Citus's own
 *		_PG_init when both are preloaded.
 */
void
IdempotencyCitusNullArgInit(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = nullarg_planner;
}
