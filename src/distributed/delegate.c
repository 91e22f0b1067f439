/*-------------------------------------------------------------------------
 *
 * delegate.c
 *	  One request, one worker, one connection: on the Citus coordinator, the
 *	  API's calls handed to the worker that holds their key.
 *
 * Nothing here links against Citus; what it knows is read from its catalog
 * with SQL, after checking that the catalog exists.  On the coordinator,
 * idempotent_begin, idempotent_finish, idempotent_abandon, lookup,
 * idempotent_checkpoint and idempotent_renew hand their call to the worker
 * holding the key, through Citus's forced function delegation, as the
 * caller (doc/scaling-out-single-shard.md).  The caller's business writes
 * in the same transaction travel over the same connection, so Citus commits
 * them with the record in one phase.  Also here: which version of the
 * registry's columns the shards have (between an update and citus_setup()),
 * this node's group, and reading a caller's own rows as the tables' owner
 * for the views citus_setup() points at functions (Citus rule 14: Citus
 * checks shard privileges as the caller).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/distributed/delegate.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "base/compat.h"
#include "distributed/delegate.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "objects/citus_metadata.h"
#include "objects/extension.h"

/*
 * The API functions that hand their calls to a worker, and the functions
 * they hand them to: the same C entry points declared with the key as an
 * idempotency.key (Citus pins a forced delegation to the value of the
 * distribution argument, and compares it with the registry's distribution
 * column by type as well as by value).  They are distributed by the key or,
 * with citus_setup(distribute_by => 'scope'), by the scope: pg_dist_object
 * says which argument.  A begin with require_token also reads the tokens
 * table, co-located with the registry and distributed by the same value
 * (the token is the key; or the scope), so it too stays within the pin.
 */
typedef struct CitusDelegateDef
{
	const char *name;			/* the delegate, in the extension's schema */
	const char *main;			/* the function it stands for, likewise */
	SqlStatement call;			/* the call, made as the caller */
} CitusDelegateDef;

/*
 * The delegate's arguments are the main function's, with the key (always
 * the first) an idempotency.key where the main function takes text.
 */
#define CITUS_DELEGATE_CALL(text, n, ...) \
	{.sql = (text), .nargs = (n), .argtypes = {SQL_KEYTYPE, __VA_ARGS__}, \
	 .expected_rc = SPI_OK_SELECT}

static CitusDelegateDef citus_delegate_defs[CITUS_NUM_DELEGATES] = {
	[CITUS_DELEGATE_BEGIN] = {
		"citus_idempotent_begin", "idempotent_begin",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_idempotent_begin($1, $2, $3, $4, $5,"
							" $6, $7, $8, $9, $10)", 10,
							TEXTOID, JSONBOID, INTERVALOID, INTERVALOID, BOOLOID, BOOLOID,
							INTERVALOID, BOOLOID, BOOLOID)
	},
	[CITUS_DELEGATE_FINISH] = {
		"citus_idempotent_finish", "idempotent_finish",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_idempotent_finish($1, $2, $3, $4, $5,"
							" $6, $7, $8, $9)", 9,
							JSONBOID, TEXTOID, INT4OID, BOOLOID, INT4OID, BYTEAOID, INTERVALOID,
							JSONBOID)
	},
	[CITUS_DELEGATE_ABANDON] = {
		"citus_idempotent_abandon", "idempotent_abandon",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_idempotent_abandon($1, $2, $3)", 3,
							TEXTOID, INT4OID)
	},
	[CITUS_DELEGATE_LOOKUP] = {
		"citus_lookup", "lookup",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_lookup($1, $2, $3)", 3,
							TEXTOID, JSONBOID)
	},
	[CITUS_DELEGATE_CHECKPOINT] = {
		"citus_idempotent_checkpoint", "idempotent_checkpoint",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_idempotent_checkpoint($1, $2, $3,"
							" $4, $5)", 5,
							TEXTOID, JSONBOID, TEXTOID, INT4OID)
	},
	[CITUS_DELEGATE_RENEW] = {
		"citus_idempotent_renew", "idempotent_renew",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_idempotent_renew($1, $2, $3, $4)", 4,
							INTERVALOID, TEXTOID, INT4OID)
	},
};

/*
 * How Citus routes calls of a function that is a member of this extension:
 * the argument (from 0) and whether with force_delegation; no row if it
 * routes none.  Read with the latest snapshot, as the registry's
 * distribution is (objects/citus_metadata.c): the answers are kept per
 * backend, and a transaction whose snapshot predates citus_setup() would
 * otherwise see the registry distributed but not its delegates, and keep
 * that mix after it ends.
 */
static SqlStatement function_distarg_stmt = {
	.sql = "SELECT o.distribution_argument_index, o.force_delegation IS TRUE"
	" FROM pg_catalog.pg_dist_object AS o"
	" JOIN pg_catalog.pg_depend AS d"
	"   ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass"
	"  AND d.objid OPERATOR(pg_catalog.=) o.objid"
	"  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass"
	"  AND d.refobjid OPERATOR(pg_catalog.=) $2"
	"  AND d.deptype OPERATOR(pg_catalog.=) 'e'"
	" WHERE o.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass"
	"   AND o.objid OPERATOR(pg_catalog.=) $1"
	"   AND o.distribution_argument_index IS NOT NULL",
	.nargs = 2,
	.argtypes = {OIDOID, OIDOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 2,
	.snapshot = SQL_SNAPSHOT_LATEST,
	.catalog_only = true,
};

/*
 * Per backend: whether this node hands calls over (the coordinator, with the
 * registry distributed and the delegates distributed with force_delegation),
 * and the functions the delegates stand for; and whether the registry's shards are a
 * version behind its SQL objects.  Reset by an invalidation of the registry
 * or of pg_dist_object (Citus sends one when it distributes a function).
 */
typedef struct CitusDelegateState
{
	bool		valid;
	bool		shards_behind;	/* updated, citus_setup() not yet run again */
	Oid			dist_object_relid;	/* pg_dist_object, watched */
	bool		active[CITUS_NUM_DELEGATES];
	int			distarg[CITUS_NUM_DELEGATES];	/* the key's or the scope's
												 * argument */
	Oid			main_fns[CITUS_NUM_DELEGATES];	/* looked up on first use */
} CitusDelegateState;

static CitusDelegateState citus_delegate;

/* Set while a call is being handed over: its delegate then runs here. */
static bool citus_delegating = false;

/*
 * Set when the tokens were written here as their owner in the current
 * transaction (issue_token, consume_token): their shards are co-located
 * with the registry's, and a call handed over on the caller's connection
 * could touch placements the owner's connection modified, which Citus
 * refuses.  The rest of the transaction runs its calls here, as before.
 * Reset at the end of the transaction.
 */
static bool citus_owner_in_xact = false;
static bool citus_xact_callback_registered = false;

/* this node's Citus group: 0 on the coordinator */
static SqlStatement local_group_stmt = {
	.sql = "SELECT g.groupid FROM pg_catalog.pg_dist_local_group AS g",
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
	.snapshot = SQL_SNAPSHOT_CALLER,
	.catalog_only = true,
};

/*
 * IdempotencyCitusDelegateInvalidate
 *		Decide again whether calls are handed over when the registry or
 *		pg_dist_object (or everything, InvalidOid) is invalidated.
 */
void
IdempotencyCitusDelegateInvalidate(Oid relid)
{
	if (relid == InvalidOid || relid == citus_delegate.dist_object_relid ||
		relid == IdempotencyCitusTableRelid(CITUS_REGISTRY))
		citus_delegate.valid = false;
}

/*
 * IdempotencyCitusLocalGroup
 *		This node's Citus group id: 0 on the coordinator, whether or not any
 *		node is registered yet (citus_is_coordinator() says false then).  In
 *		the frame, with Citus's catalog present.
 */
int32
IdempotencyCitusLocalGroup(void)
{
	bool		isnull;

	if (SqlExecute(&local_group_stmt, NULL, NULL) != 1)
		elog(ERROR, "pg_dist_local_group has no row");
	return DatumGetInt32(SqlResult(0, 1, &isnull));
}

/*
 * IdempotencyCitusOwnRows
 *		Read the caller's own rows as the tables' owner (select runs the
 *		statement) and hand each row the frame returned to emit, which adds
 *		it to the result set; only for a caller who may read the view the
 *		rows are for.
 */
void
IdempotencyCitusOwnRows(FunctionCallInfo fcinfo, const char *view, uint64 (*select) (SqlCall *call),
						void (*emit) (ReturnSetInfo *rsinfo, HeapTuple tuple, TupleDesc desc))
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SqlCall		call;
	uint64		n;

	IdempotencyRequireViewPrivilege(view);
	InitMaterializedSRF(fcinfo, 0);
	SqlCallBegin(&call);
	n = select(&call);
	for (uint64 i = 0; i < n; i++)
		emit(rsinfo, SPI_tuptable->vals[i], SPI_tuptable->tupdesc);
	SqlCallEnd(&call);
}

/*
 * citus_delegate_function
 *		The OID of a delegate (main = false) or of the function it stands
 *		for, InvalidOid if there is none: the argument types are the
 *		delegate's statement's, the key an idempotency.key in the delegate
 *		and text in the main function.
 */
static Oid
citus_delegate_function(CitusDelegate which, bool main)
{
	const CitusDelegateDef *def = &citus_delegate_defs[which];
	Oid			argtypes[SQL_MAX_ARGS];

	for (int i = 0; i < def->call.nargs; i++)
		argtypes[i] = def->call.argtypes[i] != SQL_KEYTYPE ? def->call.argtypes[i] :
			main ? TEXTOID : IdempotencyCatalogGet()->keytype;
	return LookupFuncName(list_make2(makeString("idempotency"),
									 makeString(pstrdup(main ? def->main : def->name))),
						  def->call.nargs, argtypes, true);
}

/*
 * IdempotencyCitusDistributionArgument
 *		The argument (from 0) Citus routes calls of a function of this
 *		extension (extoid) by, and whether with force_delegation; -1 if it
 *		routes none.  Inside a SQL frame, where pg_dist_object exists.
 */
int
IdempotencyCitusDistributionArgument(Oid funcid, Oid extoid, bool *forced)
{
	Datum		values[2] = {ObjectIdGetDatum(funcid), ObjectIdGetDatum(extoid)};
	bool		isnull;

	*forced = false;
	if (SqlExecute(&function_distarg_stmt, values, NULL) != 1)
		return -1;
	*forced = DatumGetBool(SqlResult(0, 2, &isnull));
	return DatumGetInt32(SqlResult(0, 1, &isnull));
}

/*
 * citus_delegate_refresh
 *		Decide again whether this backend hands calls over, and drop the kept
 *		plans.  It does on the Citus coordinator (group 0), with the 1.1 SQL
 *		objects, the registry hash-distributed and each delegate a member of
 *		the extension distributed with force_delegation (citus_setup() of
 *		1.1 does that).  On every node, the registry's shards are behind
 *		while the 1.1 objects are installed and citus_setup() has not run
 *		since.
 */
static void
citus_delegate_refresh(void)
{
	const IdempotencyCatalog *catalog = IdempotencyCatalogGet();

	for (int i = 0; i < CITUS_NUM_DELEGATES; i++)
	{
		citus_delegate.active[i] = false;
		citus_delegate.main_fns[i] = InvalidOid;
	}
	citus_delegate.shards_behind = false;
	citus_delegate.dist_object_relid = get_relname_relid("pg_dist_object", PG_CATALOG_NAMESPACE);

	if (catalog->sql_version >= IDEMPOTENCY_SQL_1_1 &&
		OidIsValid(citus_delegate.dist_object_relid) &&
		IdempotencyCitusPartMethod(CITUS_REGISTRY) == 'h')
	{
		SqlCall		call;
		bool		coordinator;

		SqlCallBeginAsCaller(&call);
		coordinator = IdempotencyCitusLocalGroup() == 0;
		for (int i = 0; i < CITUS_NUM_DELEGATES; i++)
		{
			Oid			fn = citus_delegate_function(i, false);
			bool		forced;

			if (!OidIsValid(fn))
				continue;
			citus_delegate.distarg[i] = IdempotencyCitusDistributionArgument(fn, catalog->extoid,
																			 &forced);
			citus_delegate.active[i] = forced && citus_delegate.distarg[i] >= 0 &&
				citus_delegate.distarg[i] < citus_delegate_defs[i].call.nargs;
		}
		SqlCallEnd(&call);

		/*
		 * citus_setup() of 1.1 gives the registry's shards the columns the
		 * update added, then distributes the delegates: until it has, the
		 * shards have 1.0's columns (the update's ALTER TABLE reached only
		 * the distributed table itself).
		 */
		citus_delegate.shards_behind = !citus_delegate.active[CITUS_DELEGATE_BEGIN];
		if (!coordinator)
			memset(citus_delegate.active, 0, sizeof(citus_delegate.active));
	}
	citus_delegate.valid = true;
}

/*
 * citus_delegate_called
 *		Whether the function called is a delegate: citus_idempotent_begin
 *		and the others run the same C entry points as the functions they
 *		stand for, and are told apart by the catalog, not by name: a
 *		delegate takes the key as an idempotency.key, the function it stands
 *		for as text.  Remembered for the last function asked about.
 */
static bool
citus_delegate_called(FunctionCallInfo fcinfo)
{
	static Oid	last_fn = InvalidOid;
	static bool last_answer = false;
	Oid			fn = fcinfo->flinfo ? fcinfo->flinfo->fn_oid : InvalidOid;

	if (fn != last_fn)
	{
		Oid		   *argtypes;
		int			nargs;

		last_answer = false;
		if (OidIsValid(fn) && OidIsValid(get_func_signature(fn, &argtypes, &nargs)))
			last_answer = nargs > 0 && argtypes[0] == IdempotencyCatalogGet()->keytype;
		last_fn = fn;
	}
	return last_answer;
}

/*
 * citus_delegate_check_access
 *		A delegate runs only for a caller who may run the function it stands
 *		for: grant_usage() grants both, and a grant an administrator took
 *		back from the one must not stay open through the other.
 */
static void
citus_delegate_check_access(CitusDelegate which)
{
	const CitusDelegateDef *def = &citus_delegate_defs[which];
	Oid			main_fn;

	if (!citus_delegate.valid)
		citus_delegate_refresh();
	main_fn = citus_delegate.main_fns[which];
	/* an update may have replaced the function since */
	if (!OidIsValid(main_fn) || !SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(main_fn)))
	{
		main_fn = citus_delegate_function(which, true);
		if (!OidIsValid(main_fn))
			elog(ERROR, "function idempotency.%s does not exist", def->main);
		citus_delegate.main_fns[which] = main_fn;
	}
	if (IdempotencyFunctionAclCheck(main_fn, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FUNCTION, get_func_name(main_fn));
}

/*
 * IdempotencyCitusDelegate
 *		On the Citus coordinator, run this call on the worker that holds its
 *		key (or its scope), and return true with its result in *result; false where it is to
 *		run here (a plain server, a worker, the 1.0 SQL objects, a call that
 *		reads another shard, or the delegate itself when Citus kept it here).
 *
 * The call is made again, as the caller, to the function's delegate, which
 * citus_setup() distributed with force_delegation: Citus sends it to the
 * key's worker over the caller's own connection, inside the caller's
 * transaction, where it runs as on one server (as the tables' owner, on the
 * local shard).  Writes the caller then makes to tables co-located with the
 * registry, for the same key (or scope), go over the same connection: one worker, one
 * connection, a one-phase commit.  Run as the tables' owner on the
 * coordinator, as before, the record would travel over a connection of the
 * owner's and the business rows over the caller's, which Citus commits in
 * two phases, and refuses outright for co-located shards.
 *
 * The call's claims are then known to the worker's backend (xactclaims.c),
 * which every later call for the key in the transaction reaches again.
 * Errors come back with the worker's SQLSTATE, message, detail and hint.
 */
bool
IdempotencyCitusDelegate(FunctionCallInfo fcinfo, CitusDelegate which, Datum *result)
{
	CitusDelegateDef *def = &citus_delegate_defs[which];
	MemoryContext caller_cxt = CurrentMemoryContext;
	Datum		values[SQL_MAX_ARGS];
	char		nulls[SQL_MAX_ARGS];
	SqlCall		call;
	volatile uint64 processed = 0;

	if (citus_delegate_called(fcinfo))
	{
		citus_delegate_check_access(which);
		return false;
	}
	if (citus_delegating || citus_owner_in_xact)
		return false;
	if (!citus_delegate.valid)
		citus_delegate_refresh();
	if (!citus_delegate.active[which] || PG_NARGS() != def->call.nargs ||
		PG_ARGISNULL(citus_delegate.distarg[which]))
		return false;

	for (int i = 0; i < def->call.nargs; i++)
	{
		values[i] = PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}

	SqlCallBeginAsCaller(&call);
	citus_delegating = true;
	PG_TRY();
	{
		processed = SqlExecute(&def->call, values, nulls);
	}
	PG_FINALLY();
	{
		citus_delegating = false;
	}
	PG_END_TRY();
	if (processed != 1)
		elog(ERROR, "delegated call returned " UINT64_FORMAT " rows", processed);

	/* the answer, copied out of the frame's memory */
	MemoryContextSwitchTo(caller_cxt);
	{
		TupleDesc	spidesc = SPI_tuptable->tupdesc;
		TupleDesc	desc;

		if (get_call_result_type(fcinfo, NULL, &desc) == TYPEFUNC_COMPOSITE)
		{
			Datum	   *outvalues = palloc(sizeof(Datum) * desc->natts);
			bool	   *outnulls = palloc(sizeof(bool) * desc->natts);

			if (spidesc->natts != desc->natts)
				elog(ERROR, "delegated call returned %d columns, expected %d",
					 spidesc->natts, desc->natts);
			for (int i = 0; i < desc->natts; i++)
				outvalues[i] = SqlResult(0, i + 1, &outnulls[i]);
			desc = BlessTupleDesc(desc);
			*result = HeapTupleGetDatum(heap_form_tuple(desc, outvalues, outnulls));
		}
		else
		{
			Form_pg_attribute att = TupleDescAttr(spidesc, 0);
			bool		isnull;
			Datum		value = SqlResult(0, 1, &isnull);

			fcinfo->isnull = isnull;
			*result = isnull ? (Datum) 0 : datumCopy(value, att->attbyval, att->attlen);
		}
	}
	SqlCallEnd(&call);
	return true;
}

/*
 * citus_xact_callback
 *		Forget, at the end of each transaction, that the tokens were written
 *		in it as their owner.
 */
static void
citus_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			citus_owner_in_xact = false;
			break;
		default:
			break;
	}
}

/*
 * IdempotencyCitusNoteOwnerAccess
 *		The tokens are about to be written here as their owner: later calls
 *		in this transaction are not handed over (see citus_owner_in_xact).
 *		Costs a store.
 */
void
IdempotencyCitusNoteOwnerAccess(void)
{
	if (!citus_xact_callback_registered)
	{
		RegisterXactCallback(citus_xact_callback, NULL);
		citus_xact_callback_registered = true;
	}
	citus_owner_in_xact = true;
}

/*
 * IdempotencyCitusRegistryVersion
 *		The SQL version whose registry columns the statements may name: the
 *		installed one, but 1.0's while a distributed registry's shards still
 *		lack what the update added (between ALTER EXTENSION ... UPDATE and
 *		citus_setup()), so that the API keeps working in between.
 */
IdempotencySqlVersion
IdempotencyCitusRegistryVersion(void)
{
	const IdempotencyCatalog *catalog = IdempotencyCatalogGet();

	if (catalog->sql_version < IDEMPOTENCY_SQL_1_1)
		return catalog->sql_version;
	if (!citus_delegate.valid)
		citus_delegate_refresh();
	return citus_delegate.shards_behind ? IDEMPOTENCY_SQL_1_0 : catalog->sql_version;
}

/*
 * IdempotencyCitusRequireSetup
 *		Refuse a feature that needs the registry columns of a version that
 *		the shards of a distributed registry do not have yet.
 */
void
IdempotencyCitusRequireSetup(IdempotencySqlVersion version, const char *feature)
{
	if (IdempotencyCitusRegistryVersion() >= version)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%s needs citus_setup() to run again after the update of extension \"idempotency\"",
					feature),
			 errdetail("The shards of the distributed registry do not have the columns the update added."),
			 errhint("Run SELECT idempotency.citus_setup() on the coordinator.")));
}
