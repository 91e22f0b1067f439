/*-------------------------------------------------------------------------
 *
 * sqlcall.c
 *	  The frame every SQL-callable function runs its SQL in: SPI connected,
 *	  running as the extension's tables' owner, the caller's role name and
 *	  the clock read once; and the kept plans of the statements.
 *
 * All table access is SQL through SPI with prepared plans that are kept for
 * the life of the backend (Citus rule 2): under Citus only SQL reaches
 * the shards.  It is the one way the extension runs SQL from C: every
 * statement is defined beside the code that uses it (registry.c, inbox.c,
 * tokens.c, history.c, statemachine.c, trigger_ddl.c, delegate.c, ...) as a
 * SqlStatement, or run once with SqlExecuteOnce when its text is built at
 * run time, with every value a parameter,
 * every name schema-qualified and every operator written OPERATOR(schema.op),
 * so that the plans mean the same whatever search_path the caller has set;
 * that is why the C functions need no SET search_path clause (and do not pay
 * for one on every call).
 *
 * Callers cannot touch the tables.  The functions switch to the tables'
 * owner for the duration of their SQL, the way referential integrity
 * triggers do, after noting the caller's role name: every statement filters
 * on that name, so a role only ever reaches its own records.  The switch is
 * undone by transaction or subtransaction abort if an error escapes.
 * SQL that files nothing under a role enters the frame with
 * SqlCallBeginAsCaller instead and runs as whoever is running: the state
 * machine cache's read (as the user whose write fired the trigger),
 * define_state_machine's write (SECURITY DEFINER: as its owner), queries on
 * PostgreSQL's and Citus's catalogs.  A statement says which snapshot it
 * reads with (SqlSnapshot): the cache's read takes the latest one, and so
 * does outbox_send's numbering, once a lock has ordered it after the key's
 * other senders.
 *
 * Under Citus, once the tables are distributed, a statement's parse tree is
 * kept but it is planned for each execution (a custom plan): Citus 13
 * attaches a copy of the shard's local plan to a kept generic plan every
 * time it runs the statement on a shard of the node it runs on, without
 * finding the copy it attached before, so a long-lived session (a pooled
 * connection, and the worker backend that serves it) would grow by the
 * size of a plan with every call.  A custom plan is freed after its
 * execution, and Citus plans it for the one shard it needs.
 *
 * The owner, the key type's OID and the plans are cached per backend; a
 * relcache invalidation of the registry (DROP EXTENSION, VACUUM, ALTER
 * TABLE) marks the cache stale and the next call rebuilds it, dropping every
 * kept plan: no module keeps a plan of its own.  The tables
 * and the type are found through the extension's catalog entries
 * (extension.c), checked again on every call, never by name alone: the
 * statements' text names the schema, so it must be the extension's own.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/frame/sqlcall.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "frame/sqlcall.h"
#include "objects/citus_metadata.h"
#include "objects/extension.h"

typedef struct SqlCallCache
{
	bool		valid;
	Oid			relid;			/* idempotency.registry, watched for changes */
	Oid			relowner;		/* the role the SQL runs as */
	Oid			keytype;		/* idempotency.key */
	bool		custom_plans;	/* the tables are Citus's: plan every time */
	SqlStatement *prepared;		/* statements with a kept plan */
} SqlCallCache;

static SqlCallCache sql_cache;

static void sql_call_enter(SqlCall *call);

/*
 * SqlCacheInvalidate
 *		Mark the cache stale when the registry (or everything) is invalidated;
 *		called by the extension's relcache callback.  Only flips a flag:
 *		rebuilding here could run catalog lookups in the middle of
 *		invalidation processing.
 */
void
SqlCacheInvalidate(Oid relid)
{
	if (relid == InvalidOid || relid == sql_cache.relid)
		sql_cache.valid = false;
}

/*
 * sql_cache_refresh
 *		Take the tables' owner and the key type from the extension's checked
 *		catalog entries (extension.c) and drop every kept plan; each is
 *		prepared again on first use.
 */
static void
sql_cache_refresh(const IdempotencyCatalog *catalog)
{
	HeapTuple	tuple;

	while (sql_cache.prepared != NULL)
	{
		SqlStatement *stmt = sql_cache.prepared;

		sql_cache.prepared = stmt->next_prepared;
		SPI_freeplan(stmt->plan);
		stmt->plan = NULL;
		stmt->next_prepared = NULL;
	}

	sql_cache.relid = catalog->relids[IR_REGISTRY];
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(sql_cache.relid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", sql_cache.relid);
	sql_cache.relowner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);

	sql_cache.keytype = catalog->keytype;
	sql_cache.custom_plans = IdempotencyCitusPartMethod(CITUS_REGISTRY) != '\0';
	sql_cache.valid = true;
}

/*
 * SqlCacheCheck
 *		Check the extension's objects (cheap unless something changed) and
 *		refresh the cache if they are not the ones it was built from.
 */
void
SqlCacheCheck(void)
{
	const IdempotencyCatalog *catalog = IdempotencyCatalogGet();

	if (!sql_cache.valid ||
		sql_cache.relid != catalog->relids[IR_REGISTRY] ||
		sql_cache.keytype != catalog->keytype)
		sql_cache_refresh(catalog);
}

/*
 * sql_plan
 *		The kept plan for a statement, prepared on first use.
 */
static SPIPlanPtr
sql_plan(SqlStatement *stmt)
{
	Oid			argtypes[SQL_MAX_ARGS];
	SPIPlanPtr	plan;

	if (stmt->plan != NULL)
		return stmt->plan;

	Assert(stmt->nargs <= SQL_MAX_ARGS);
	for (int i = 0; i < stmt->nargs; i++)
	{
		/* the key type is known only once the extension was checked */
		Assert(!(stmt->catalog_only && stmt->argtypes[i] == SQL_KEYTYPE));
		argtypes[i] = stmt->argtypes[i] == SQL_KEYTYPE ?
			sql_cache.keytype : stmt->argtypes[i];
	}

	plan = SPI_prepare_cursor(stmt->sql, stmt->nargs, argtypes,
							  stmt->custom_plan || sql_cache.custom_plans ?
							  CURSOR_OPT_CUSTOM_PLAN : 0);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s",
			 stmt->sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	stmt->plan = plan;
	stmt->next_prepared = sql_cache.prepared;
	sql_cache.prepared = stmt;
	return plan;
}

/*
 * SqlCallBeginAsTablesOwner
 *		Enter the frame as the tables' owner without looking up whose records
 *		the call works on: for the lookup itself (owner.c), which reads the
 *		application roles.  SqlCallEnd leaves it.
 */
void
SqlCallBeginAsTablesOwner(SqlCall *call)
{
	SqlCacheCheck();

	call->owner = (Datum) 0;
	sql_call_enter(call);
}

/*
 * sql_call_enter
 *		The rest of SqlCallBegin: read the clock, connect SPI and become the
 *		tables' owner.
 */
static void
sql_call_enter(SqlCall *call)
{
	call->now = GetCurrentTimestamp();
	call->caller_cxt = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	GetUserIdAndSecContext(&call->save_userid, &call->save_sec_context);
	SetUserIdAndSecContext(sql_cache.relowner,
						   call->save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

/*
 * SqlCallBeginAsCaller
 *		Enter the frame as whoever is running, without looking up whose
 *		records the call works on: for SQL that files nothing under an
 *		application role and must run in the current user's security
 *		context (a trigger's read of the state machines as the user whose
 *		write fired it, a SECURITY DEFINER function's writes as its owner, a
 *		query on PostgreSQL's or Citus's catalogs).  SqlCallEnd leaves it.
 */
void
SqlCallBeginAsCaller(SqlCall *call)
{
	call->owner = (Datum) 0;
	call->now = GetCurrentTimestamp();
	call->caller_cxt = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* nothing changes: SqlCallEnd restores what is in force */
	GetUserIdAndSecContext(&call->save_userid, &call->save_sec_context);
}

/*
 * SqlCallEnd
 *		Leave the frame: back to the caller's identity, disconnect SPI.
 */
void
SqlCallEnd(SqlCall *call)
{
	SetUserIdAndSecContext(call->save_userid, call->save_sec_context);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
}

/*
 * sql_execute
 *		SqlExecute without the error handling.
 */
static uint64
sql_execute(SqlStatement *stmt, Datum *values, const char *nulls)
{
	int			rc;

	/* an invalidation may have arrived since SqlCallBegin */
	if (!stmt->catalog_only)
		SqlCacheCheck();

	switch (stmt->snapshot)
	{
		case SQL_SNAPSHOT_NEW:
			rc = SPI_execute_plan(sql_plan(stmt), values, nulls, false, 0);
			break;
		case SQL_SNAPSHOT_CALLER:
			rc = SPI_execute_plan(sql_plan(stmt), values, nulls, true, 0);
			break;
		case SQL_SNAPSHOT_LATEST:
			rc = SPI_execute_snapshot(sql_plan(stmt), values, nulls, GetLatestSnapshot(),
									  InvalidSnapshot, true, false, 0);
			break;
		case SQL_SNAPSHOT_NEW_LATEST:
			/* copied by SPI, its command counter advanced */
			rc = SPI_execute_snapshot(sql_plan(stmt), values, nulls, GetLatestSnapshot(),
									  InvalidSnapshot, false, true, 0);
			break;
		default:
			elog(ERROR, "unrecognized snapshot %d", (int) stmt->snapshot);
	}
	if (rc != stmt->expected_rc)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	if (stmt->natts > 0 && SPI_tuptable->tupdesc->natts != stmt->natts)
		elog(ERROR, "statement returned %d columns, expected %d",
			 SPI_tuptable->tupdesc->natts, stmt->natts);
	return SPI_processed;
}

/*
 * SqlExecute
 *		Run a statement in the frame; returns the rows it processed
 *		(SqlResult reads any it returned, as declared by stmt->natts).
 *
 * An error raised while the statement runs (a lock or statement timeout, a
 * serialization failure, a constraint) reaches the caller with its SQLSTATE,
 * message, detail and hint, but without the statement: SPI would add the
 * internal SQL text to the error's CONTEXT (or as its internal query), which
 * means nothing to the caller and shows how the tables work inside.
 */
uint64
SqlExecute(SqlStatement *stmt, Datum *values, const char *nulls)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	volatile uint64 processed = 0;

	PG_TRY();
	{
		processed = sql_execute(stmt, values, nulls);
	}
	PG_CATCH();
	{
		SqlRethrowHidingQuery(oldcontext);
	}
	PG_END_TRY();
	return processed;
}

/*
 * SqlExecuteOnce
 *		Run a statement planned for this call only (administrative SQL built
 *		at run time, or run too rarely to keep a plan), with SqlExecute's
 *		error handling: an error reaches the caller without the statement.
 *		SPI must be connected; returns the rows processed.
 */
uint64
SqlExecuteOnce(const char *sql, int nargs, Oid *argtypes, Datum *values,
			   int expected_rc)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	volatile int rc = 0;

	PG_TRY();
	{
		rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, false, 0);
	}
	PG_CATCH();
	{
		SqlRethrowHidingQuery(oldcontext);
	}
	PG_END_TRY();
	if (rc != expected_rc)
		elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * SqlResult
 *		Column col (1-based) of row row of what the last statement returned.
 */
Datum
SqlResult(uint64 row, int col, bool *isnull)
{
	Assert(row < SPI_processed);
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

/*
 * SqlKeep
 *		A varlena value the last statement returned, detoasted and copied
 *		into the caller's memory: SPI's memory goes at the end of the call,
 *		and a toast pointer could outlive the value it points to once the row
 *		is cleaned.  0 (NULL) stays 0.
 */
Datum
SqlKeep(SqlCall *call, Datum value)
{
	MemoryContext oldcontext;
	Datum		result;

	if (value == (Datum) 0)
		return (Datum) 0;
	oldcontext = MemoryContextSwitchTo(call->caller_cxt);
	result = PointerGetDatum(pg_detoast_datum_copy((struct varlena *) DatumGetPointer(value)));
	MemoryContextSwitchTo(oldcontext);
	return result;
}

/*
 * SqlTry
 *		Run fn(arg) in a subtransaction.  An error with the given SQLSTATE
 *		rolls back what fn did and returns false; any other error also rolls
 *		the subtransaction back and is then thrown again, so that the caller's
 *		transaction (or its savepoint, or the PL/pgSQL block around it) is
 *		left exactly as if fn had thrown it outside a subtransaction.  The
 *		abort restores the identity and SPI connection that were in force
 *		when the subtransaction started: the ones SqlCallBegin set up.
 *
 * This is the sequence PL/pgSQL's exception blocks use: copy the error out
 * of ErrorContext, flush it, roll back and release the subtransaction, then
 * restore the memory context and resource owner.  Throwing again before the
 * rollback would leave the subtransaction open under the caller: in
 * autocommit the session would be stuck in a transaction block nobody
 * opened, and an enclosing exception block would roll back this
 * subtransaction instead of its own.
 */
bool
SqlTry(void (*fn) (void *arg), void *arg, int sqlerrcode)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool done = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);

	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		done = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();

		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;

		if (edata->sqlerrcode != sqlerrcode)
			ReThrowError(edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return done;
}

/*
 * SqlRethrowHidingQuery
 *		In a PG_CATCH block around SQL the extension runs internally: throw
 *		the error again without what it carries about that SQL (its context
 *		lines, internal query and positions).  ThrowErrorData collects the
 *		context of the code around the PG_TRY instead, so a caller's own
 *		context lines still show.  cxt is the memory context to copy the
 *		error into (not ErrorContext).  Nothing may run between the catch and
 *		this call: the (sub)transaction abort that follows cleans up as it
 *		would have.
 */
void
SqlRethrowHidingQuery(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	edata->context = NULL;
	edata->internalquery = NULL;
	edata->internalpos = 0;
	edata->cursorpos = 0;
	ThrowErrorData(edata);

	/* ThrowErrorData returns only for levels below ERROR */
	elog(ERROR, "could not throw an error again");
}
