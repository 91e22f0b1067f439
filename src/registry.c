/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  Access to idempotency.registry: the prepared statements and the frame
 *	  that every registry function runs in.
 *
 * All table access is SQL through SPI with prepared plans that are kept for
 * the life of the backend (SCALE_OUT.md rule 2): under Citus only SQL reaches
 * the shards.  Every statement is single-table and addressed by the primary
 * key (owner, scope, key), every value is a parameter, every name is
 * schema-qualified and every operator is written OPERATOR(schema.op), so that
 * the plans mean the same whatever search_path the caller has set; that is
 * why the C functions need no SET search_path clause (and do not pay for
 * one on every call).
 *
 * Callers cannot touch the registry table.  The functions switch to the
 * table's owner for the duration of their SQL, the way referential integrity
 * triggers do, after noting the caller's role name: every statement filters
 * on that name, so a role only ever reaches its own records.  The switch is
 * undone by transaction or subtransaction abort if an error escapes.
 *
 * The plans, the table's OID and owner and the key type's OID are cached per
 * backend; a relcache invalidation of the table (DROP EXTENSION, VACUUM,
 * ALTER TABLE) marks the cache stale and the next call rebuilds it.  The
 * table and the type are found through the extension's catalog entries
 * (extension.c), checked again on every call, never by name alone: the
 * statements' text names the schema, so it must be the extension's own.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "idempotency.h"

/* Stands for the key type's OID in the argument lists below. */
#define KEYTYPE_PLACEHOLDER InvalidOid

#define REGISTRY_MAX_ARGS 12

typedef struct RegistryStmtDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[REGISTRY_MAX_ARGS];
	int			expected_rc;

	/*
	 * Plan for the actual values every time.  The cleanup's statements need
	 * it: a generic plan guesses LIMIT $2 and the share of expired rows, and
	 * on a large table may guess a hash join over all of it; a batch runs
	 * rarely enough that planning it each time costs nothing.
	 */
	bool		custom_plan;
} RegistryStmtDef;

/*
 * The identity of a record is always $1 owner, $2 scope, $3 key.
 *
 * RS_CLAIM relies on INSERT ... ON CONFLICT to wait for a concurrent claim
 * that is not yet committed: that wait is what lets a duplicate request
 * replay the first one's answer instead of failing.  RS_RECLAIM_EXPIRED and
 * RS_TAKEOVER re-check in their WHERE clause the condition the caller saw,
 * so that of two sessions racing for the same record exactly one updates it.
 */
static const RegistryStmtDef registry_stmts[RS_NUM_STMTS] = {
	[RS_CLAIM] = {
		"INSERT INTO idempotency.registry AS r"
		" (owner, scope, key, status, attempt, fingerprint, response,"
		"  created_at, updated_at, lease_until, expires_at)"
		" VALUES ($1, $2, $3, 'processing', $8, $4, NULL, $5, $5, $6, $7)"
		" ON CONFLICT (owner, scope, key) DO NOTHING",
		8, {TEXTOID, TEXTOID, KEYTYPE_PLACEHOLDER, BYTEAOID, TIMESTAMPTZOID,
		TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID}, SPI_OK_INSERT
	},

	/*
	 * A claim taken with defer_claim is written once, complete, by its
	 * finish.  Like RS_CLAIM it waits for a concurrent uncommitted record of
	 * the key; nothing inserted means another request got there first.
	 */
	[RS_INSERT_FINISHED] = {
		"INSERT INTO idempotency.registry AS r"
		" (owner, scope, key, status, attempt, fingerprint, response,"
		"  status_code, body, created_at, updated_at, lease_until, expires_at)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, $12)"
		" ON CONFLICT (owner, scope, key) DO NOTHING",
		12, {TEXTOID, TEXTOID, KEYTYPE_PLACEHOLDER, TEXTOID, INT4OID, BYTEAOID,
		JSONBOID, INT4OID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
		TIMESTAMPTZOID}, SPI_OK_INSERT
	},
	[RS_LOOKUP] = {
		"SELECT r.status, r.attempt, r.fingerprint, r.response,"
		" r.lease_until, r.expires_at, r.status_code, r.body"
		" FROM idempotency.registry AS r"
		" WHERE r.owner OPERATOR(pg_catalog.=) $1"
		" AND r.scope OPERATOR(pg_catalog.=) $2"
		" AND r.key OPERATOR(pg_catalog.=) $3",
		3, {TEXTOID, TEXTOID, KEYTYPE_PLACEHOLDER}, SPI_OK_SELECT
	},
	[RS_RECLAIM_EXPIRED] = {
		"UPDATE idempotency.registry AS r"
		" SET status = 'processing',"
		" attempt = GREATEST(r.attempt OPERATOR(pg_catalog.+) 1, $8),"
		" fingerprint = $4, response = NULL, created_at = $5, updated_at = $5,"
		" lease_until = $6, expires_at = $7"
		" WHERE r.owner OPERATOR(pg_catalog.=) $1"
		" AND r.scope OPERATOR(pg_catalog.=) $2"
		" AND r.key OPERATOR(pg_catalog.=) $3"
		" AND (r.expires_at OPERATOR(pg_catalog.<=) $5"
		"      OR r.status OPERATOR(pg_catalog.=) 'abandoned')"
		" RETURNING r.attempt",
		8, {TEXTOID, TEXTOID, KEYTYPE_PLACEHOLDER, BYTEAOID, TIMESTAMPTZOID,
		TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID}, SPI_OK_UPDATE_RETURNING
	},
	[RS_TAKEOVER] = {
		"UPDATE idempotency.registry AS r"
		" SET attempt = GREATEST(r.attempt OPERATOR(pg_catalog.+) 1, $6),"
		" updated_at = $4, lease_until = $5"
		" WHERE r.owner OPERATOR(pg_catalog.=) $1"
		" AND r.scope OPERATOR(pg_catalog.=) $2"
		" AND r.key OPERATOR(pg_catalog.=) $3"
		" AND r.status OPERATOR(pg_catalog.=) 'processing'"
		" AND r.lease_until OPERATOR(pg_catalog.<=) $4"
		" AND r.expires_at OPERATOR(pg_catalog.>) $4"
		" RETURNING r.attempt, r.expires_at",
		6, {TEXTOID, TEXTOID, KEYTYPE_PLACEHOLDER, TIMESTAMPTZOID,
		TIMESTAMPTZOID, INT4OID}, SPI_OK_UPDATE_RETURNING
	},
	[RS_FINISH] = {
		"UPDATE idempotency.registry AS r"
		" SET status = $4, response = $5, updated_at = $6, lease_until = NULL,"
		" status_code = $8, body = $9,"
		" expires_at = COALESCE($10, r.expires_at)"
		" WHERE r.owner OPERATOR(pg_catalog.=) $1"
		" AND r.scope OPERATOR(pg_catalog.=) $2"
		" AND r.key OPERATOR(pg_catalog.=) $3"
		" AND r.status OPERATOR(pg_catalog.=) 'processing'"
		" AND r.expires_at OPERATOR(pg_catalog.>) $6"
		" AND ($7 IS NULL OR r.attempt OPERATOR(pg_catalog.=) $7)"
		" RETURNING r.attempt",
		10, {TEXTOID, TEXTOID, KEYTYPE_PLACEHOLDER, TEXTOID, JSONBOID,
		TIMESTAMPTZOID, INT4OID, INT4OID, BYTEAOID, TIMESTAMPTZOID},
		SPI_OK_UPDATE_RETURNING
	},
	[RS_ABANDON] = {
		"UPDATE idempotency.registry AS r"
		" SET status = 'abandoned', response = NULL, updated_at = $4,"
		" lease_until = NULL, expires_at = $4"
		" WHERE r.owner OPERATOR(pg_catalog.=) $1"
		" AND r.scope OPERATOR(pg_catalog.=) $2"
		" AND r.key OPERATOR(pg_catalog.=) $3"
		" AND r.status OPERATOR(pg_catalog.=) 'processing'"
		" AND r.expires_at OPERATOR(pg_catalog.>) $4"
		" AND ($5 IS NULL OR r.attempt OPERATOR(pg_catalog.=) $5)",
		5, {TEXTOID, TEXTOID, KEYTYPE_PLACEHOLDER, TIMESTAMPTZOID, INT4OID},
		SPI_OK_UPDATE
	},

	/*
	 * $1 now, $2 batch size, $3 a fencing token one second older than the
	 * current one, $4 and $5 a block range of the heap, '(b,0)' to
	 * '(b + n,0)': a Tid Range Scan of those blocks, since the registry has
	 * no index on expires_at (sweep.c walks the heap range by range).  The
	 * expired records in heap order; SKIP LOCKED passes over any record a
	 * live transaction is changing (a claim being taken over, say), so the
	 * cleanup never waits for the application nor removes what it holds.  A
	 * record whose last attempt was issued within the last two seconds
	 * stays a little longer: once it is gone, the next claim of its key
	 * starts from the clock, and that must be above every attempt the
	 * record ever had (RegistryFence).  The one row returned holds how many
	 * went and the highest ctid deleted: when the batch size cut the range
	 * short, the sweep goes on from that block.
	 */
	[RS_CLEANUP] = {
		"WITH d AS (DELETE FROM idempotency.registry AS r"
		" WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
		"   SELECT e.ctid FROM idempotency.registry AS e"
		"    WHERE e.ctid OPERATOR(pg_catalog.>=) $4"
		"    AND e.ctid OPERATOR(pg_catalog.<) $5"
		"    AND e.expires_at OPERATOR(pg_catalog.<=) $1"
		"    AND e.attempt OPERATOR(pg_catalog.<) $3"
		"    LIMIT $2 FOR UPDATE SKIP LOCKED))"
		" RETURNING r.ctid)"
		" SELECT pg_catalog.count(*), pg_catalog.max(d.ctid) FROM d",
		5, {TIMESTAMPTZOID, INT4OID, INT4OID, TIDOID, TIDOID}, SPI_OK_SELECT, true
	},

	[RS_HISTORY_INSERT] = {
		"INSERT INTO idempotency.state_history"
		" (table_name, row_key, from_state, to_state, changed_at, xid, role, expires_at)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		8, {TEXTOID, JSONBOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, XID8OID, TEXTOID,
		TIMESTAMPTZOID}, SPI_OK_INSERT
	},

	/*
	 * History rows have no natural key, so this one goes by ctid: a plain
	 * server's fastest way, and history is optional and node-local anyway.
	 */
	[RS_HISTORY_CLEANUP] = {
		"DELETE FROM idempotency.state_history AS h"
		" WHERE h.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
		"   SELECT e.ctid FROM idempotency.state_history AS e"
		"    WHERE e.expires_at OPERATOR(pg_catalog.<=) $1"
		"    ORDER BY e.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))",
		2, {TIMESTAMPTZOID, INT4OID}, SPI_OK_DELETE, true
	},

	/*
	 * The inbox: $1 owner, $2 consumer, then the message id(s).  Like a
	 * claim, RS_INBOX_RECEIVE waits for a concurrent uncommitted receive of
	 * the same id and then conflicts (it committed) or inserts (it rolled
	 * back).
	 */
	[RS_INBOX_RECEIVE] = {
		"INSERT INTO idempotency.inbox AS i (owner, consumer, message_id, received_at, expires_at)"
		" VALUES ($1, $2, $3, $4, $5) ON CONFLICT (owner, consumer, message_id) DO NOTHING",
		5, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}, SPI_OK_INSERT
	},
	[RS_INBOX_RECLAIM] = {
		"UPDATE idempotency.inbox AS i SET received_at = $4, expires_at = $5"
		" WHERE i.message_id OPERATOR(pg_catalog.=) $3"
		" AND i.consumer OPERATOR(pg_catalog.=) $2"
		" AND i.owner OPERATOR(pg_catalog.=) $1"
		" AND i.expires_at OPERATOR(pg_catalog.<=) $4",
		5, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}, SPI_OK_UPDATE
	},

	/*
	 * $3 holds a batch's ids sorted and each once (inbox.c), and unnest
	 * inserts them in that order.
	 *
	 * RS_INBOX_INSERT_NEW is a plain INSERT, for a batch expected to be all
	 * new: it fails with unique_violation if any id was seen before, and the
	 * caller runs it in a subtransaction and falls back to
	 * RS_INBOX_RECEIVE_BATCH, whose RETURNING gives back the ids that were
	 * new.  A plain INSERT costs half as much per row as ON CONFLICT, whose
	 * speculative insertion takes a lock, probes the index and writes a
	 * second WAL record for every row.
	 */
	[RS_INBOX_INSERT_NEW] = {
		"INSERT INTO idempotency.inbox AS i (owner, consumer, message_id, received_at, expires_at)"
		" SELECT $1, $2, m.id, $4, $5 FROM pg_catalog.unnest($3) AS m(id)",
		5, {TEXTOID, TEXTOID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID}, SPI_OK_INSERT
	},
	[RS_INBOX_RECEIVE_BATCH] = {
		"INSERT INTO idempotency.inbox AS i (owner, consumer, message_id, received_at, expires_at)"
		" SELECT $1, $2, m.id, $4, $5 FROM pg_catalog.unnest($3) AS m(id)"
		" ON CONFLICT (owner, consumer, message_id) DO NOTHING RETURNING i.message_id",
		5, {TEXTOID, TEXTOID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID}, SPI_OK_INSERT_RETURNING
	},
	[RS_INBOX_RENEW_EXPIRED] = {
		"UPDATE idempotency.inbox AS i SET received_at = $4, expires_at = $5"
		" WHERE i.message_id OPERATOR(pg_catalog.=) ANY ($3)"
		" AND i.consumer OPERATOR(pg_catalog.=) $2"
		" AND i.owner OPERATOR(pg_catalog.=) $1"
		" AND i.expires_at OPERATOR(pg_catalog.<=) $4"
		" RETURNING i.message_id",
		5, {TEXTOID, TEXTOID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID}, SPI_OK_UPDATE_RETURNING
	},
	[RS_INBOX_CLEANUP] = {
		"DELETE FROM idempotency.inbox AS i"
		" USING (SELECT e.message_id, e.consumer, e.owner FROM idempotency.inbox AS e"
		"        WHERE e.expires_at OPERATOR(pg_catalog.<=) $1"
		"        ORDER BY e.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS x"
		" WHERE i.message_id OPERATOR(pg_catalog.=) x.message_id"
		" AND i.consumer OPERATOR(pg_catalog.=) x.consumer"
		" AND i.owner OPERATOR(pg_catalog.=) x.owner",
		2, {TIMESTAMPTZOID, INT4OID}, SPI_OK_DELETE, true
	},

	/* tokens: $1 owner, $2 scope, $3 token */
	[RS_TOKEN_ISSUE] = {
		"INSERT INTO idempotency.tokens (owner, scope, token, issued_at, expires_at)"
		" VALUES ($1, $2, $3, $4, $5)",
		5, {TEXTOID, TEXTOID, KEYTYPE_PLACEHOLDER, TIMESTAMPTZOID, TIMESTAMPTZOID}, SPI_OK_INSERT
	},
	[RS_TOKEN_CONSUME] = {
		"UPDATE idempotency.tokens AS t SET consumed_at = $4"
		" WHERE t.token OPERATOR(pg_catalog.=) $3"
		" AND t.scope OPERATOR(pg_catalog.=) $2"
		" AND t.owner OPERATOR(pg_catalog.=) $1"
		" AND t.consumed_at IS NULL AND t.expires_at OPERATOR(pg_catalog.>) $4",
		4, {TEXTOID, TEXTOID, KEYTYPE_PLACEHOLDER, TIMESTAMPTZOID}, SPI_OK_UPDATE
	},
	[RS_TOKEN_LOOKUP] = {
		"SELECT t.consumed_at IS NOT NULL FROM idempotency.tokens AS t"
		" WHERE t.token OPERATOR(pg_catalog.=) $3"
		" AND t.scope OPERATOR(pg_catalog.=) $2"
		" AND t.owner OPERATOR(pg_catalog.=) $1",
		3, {TEXTOID, TEXTOID, KEYTYPE_PLACEHOLDER}, SPI_OK_SELECT
	},
	[RS_TOKEN_CLEANUP] = {
		"DELETE FROM idempotency.tokens AS t"
		" USING (SELECT e.token, e.scope, e.owner FROM idempotency.tokens AS e"
		"        WHERE e.expires_at OPERATOR(pg_catalog.<=) $1"
		"        ORDER BY e.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS x"
		" WHERE t.token OPERATOR(pg_catalog.=) x.token"
		" AND t.scope OPERATOR(pg_catalog.=) x.scope"
		" AND t.owner OPERATOR(pg_catalog.=) x.owner",
		2, {TIMESTAMPTZOID, INT4OID}, SPI_OK_DELETE, true
	},
};

typedef struct RegistryCache
{
	bool		valid;
	Oid			relid;			/* idempotency.registry */
	Oid			relowner;		/* the role the SQL runs as */
	Oid			keytype;		/* idempotency.key */
	SPIPlanPtr	plans[RS_NUM_STMTS];	/* prepared lazily */
} RegistryCache;

static RegistryCache registry_cache;
static bool registry_callback_registered = false;

/*
 * The name of the role that called last, as a text datum.  Looking it up is
 * a syscache probe and two copies on every call; a role is renamed rarely,
 * and a syscache invalidation of pg_authid resets this.
 */
static Oid	owner_cache_roleid = InvalidOid;
static Datum owner_cache_name = (Datum) 0;

/*
 * registry_relcache_callback
 *		Mark the cache stale when the registry (or everything) is invalidated.
 *		Only flips a flag: rebuilding here could run catalog lookups in the
 *		middle of invalidation processing.
 */
static void
registry_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == registry_cache.relid)
		registry_cache.valid = false;
}

/*
 * registry_authid_callback
 *		Forget the cached role name when any role changes.
 */
static void
registry_authid_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	owner_cache_roleid = InvalidOid;
}

/*
 * RegistryOwnerName
 *		A role's name as a text datum, from the one-entry cache.
 */
Datum
RegistryOwnerName(Oid roleid)
{
	static bool authid_callback_registered = false;

	if (!authid_callback_registered)
	{
		CacheRegisterSyscacheCallback(AUTHOID, registry_authid_callback, (Datum) 0);
		authid_callback_registered = true;
	}
	if (roleid != owner_cache_roleid)
	{
		char	   *name = GetUserNameFromId(roleid, false);
		MemoryContext oldcontext = MemoryContextSwitchTo(TopMemoryContext);

		if (owner_cache_name != (Datum) 0)
			pfree(DatumGetPointer(owner_cache_name));
		owner_cache_name = CStringGetTextDatum(name);
		MemoryContextSwitchTo(oldcontext);
		owner_cache_roleid = roleid;
	}
	return owner_cache_name;
}

/*
 * registry_cache_refresh
 *		Take the table and the key type from the extension's checked catalog
 *		entries (extension.c), look the table's owner up and drop the old
 *		plans; they are prepared again on first use.
 */
static void
registry_cache_refresh(const IdempotencyCatalog *catalog)
{
	HeapTuple	tuple;

	if (!registry_callback_registered)
	{
		CacheRegisterRelcacheCallback(registry_relcache_callback, (Datum) 0);
		registry_callback_registered = true;
	}

	for (int i = 0; i < RS_NUM_STMTS; i++)
	{
		if (registry_cache.plans[i] != NULL)
			SPI_freeplan(registry_cache.plans[i]);
		registry_cache.plans[i] = NULL;
	}

	registry_cache.relid = catalog->relids[IR_REGISTRY];
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(registry_cache.relid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", registry_cache.relid);
	registry_cache.relowner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);

	registry_cache.keytype = catalog->keytype;
	registry_cache.valid = true;
}

/*
 * registry_cache_check
 *		Check the extension's objects (cheap unless something changed) and
 *		refresh the cache if they are not the ones it was built from.
 */
static void
registry_cache_check(void)
{
	const IdempotencyCatalog *catalog = IdempotencyCatalogGet();

	if (!registry_cache.valid ||
		registry_cache.relid != catalog->relids[IR_REGISTRY] ||
		registry_cache.keytype != catalog->keytype)
		registry_cache_refresh(catalog);
}

/*
 * registry_plan
 *		The kept plan for a statement, prepared on first use.
 */
static SPIPlanPtr
registry_plan(RegistryStmt stmt)
{
	const RegistryStmtDef *def = &registry_stmts[stmt];
	Oid			argtypes[REGISTRY_MAX_ARGS];
	SPIPlanPtr	plan;

	if (registry_cache.plans[stmt] != NULL)
		return registry_cache.plans[stmt];

	for (int i = 0; i < def->nargs; i++)
		argtypes[i] = def->argtypes[i] == KEYTYPE_PLACEHOLDER ?
			registry_cache.keytype : def->argtypes[i];

	plan = SPI_prepare_cursor(def->sql, def->nargs, argtypes,
							  def->custom_plan ? CURSOR_OPT_CUSTOM_PLAN : 0);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s",
			 def->sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	registry_cache.plans[stmt] = plan;
	return plan;
}

/*
 * IdempotencyRequireArg
 *		Reject a NULL argument that the function cannot do without.
 */
void
IdempotencyRequireArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

/*
 * IdempotencyTriggerColumn
 *		The column a trigger's argument argno names, shared by the three
 *		triggers' checks; an error if the table has no such column.  With a
 *		role ("state"), the detail says which trigger names it as what.
 */
AttrNumber
IdempotencyTriggerColumn(Relation rel, Trigger *trigger, int argno, const char *role)
{
	AttrNumber	attnum = SPI_fnumber(RelationGetDescr(rel), trigger->tgargs[argno]);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						trigger->tgargs[argno], RelationGetRelationName(rel)),
				 role != NULL ?
				 errdetail("Trigger \"%s\" names it as the %s column.", trigger->tgname, role) : 0));
	return attnum;
}

/*
 * IdempotencyKeyArg
 *		A key argument, checked: the functions take text (so that a text or
 *		varchar value needs no cast) and apply the key type's own rules.
 */
Datum
IdempotencyKeyArg(FunctionCallInfo fcinfo, int argno)
{
	text	   *t;

	IdempotencyRequireArg(fcinfo, argno, "idempotency key");
	t = PG_GETARG_TEXT_PP(argno);
	return PointerGetDatum(IdempotencyKeyFromBytes(VARDATA_ANY(t),
												   VARSIZE_ANY_EXHDR(t)));
}

/*
 * IdempotencyScopeArg
 *		A scope argument, checked.  The empty string is the default scope.
 */
Datum
IdempotencyScopeArg(FunctionCallInfo fcinfo, int argno)
{
	text	   *scope;

	IdempotencyRequireArg(fcinfo, argno, "scope");
	scope = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(scope) > IDEMPOTENCY_SCOPE_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scope must be at most %d bytes long",
						IDEMPOTENCY_SCOPE_MAXLEN)));
	return PointerGetDatum(scope);
}

/*
 * IdempotencyAddPositive
 *		now + interval, which must lie after now (ttl, lease); timestamptz's
 *		own error if it overflows.
 */
TimestampTz
IdempotencyAddPositive(TimestampTz now, Datum interval, const char *name)
{
	TimestampTz result = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
																 TimestampTzGetDatum(now),
																 interval));

	if (result <= now)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a positive interval", name)));
	return result;
}

/*
 * RegistryTry
 *		Run fn(arg) in a subtransaction.  An error with the given SQLSTATE
 *		rolls back what fn did and returns false; any other error also rolls
 *		the subtransaction back and is then thrown again, so that the caller's
 *		transaction (or its savepoint, or the PL/pgSQL block around it) is
 *		left exactly as if fn had thrown it outside a subtransaction.  The
 *		abort restores the identity and SPI connection that were in force
 *		when the subtransaction started: the ones RegistryCallBegin set up.
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
RegistryTry(void (*fn) (void *arg), void *arg, int sqlerrcode)
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
 * RegistryFence
 *		The fencing token a claim made now starts from: whole seconds since
 *		2000-01-01, read from the clock at the moment of the claim.
 *
 * An attempt number is a fencing token, and one must never be issued twice
 * for the same key.  While a record exists, every claim that changes its
 * holder sets attempt = GREATEST(attempt + 1, RegistryFence()), so the
 * number only grows.  An abandoned claim is not deleted but marked
 * "abandoned" (it counts as absent), so its number is remembered too.  Only
 * the cleanup deletes records, and only those whose attempt lies at least
 * two seconds behind the clock (RS_CLEANUP's $3); a claim of the key after
 * that starts from the clock, which is past every number the deleted record
 * held.  This holds as long as the server's clock does not step back by a
 * second or more between a deletion and the next claim of the key; an int4
 * of seconds lasts until 2068.
 */
int32
RegistryFence(void)
{
	return (int32) (GetCurrentTimestamp() / USECS_PER_SEC);
}

/*
 * RegistryCallBegin
 *		Enter the frame: note who calls and when, connect SPI and become the
 *		registry's owner.
 */
void
RegistryCallBegin(RegistryCall *call)
{
	registry_cache_check();

	call->owner = RegistryOwnerName(GetUserId());
	call->now = GetCurrentTimestamp();
	call->caller_cxt = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	GetUserIdAndSecContext(&call->save_userid, &call->save_sec_context);
	SetUserIdAndSecContext(registry_cache.relowner,
						   call->save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

/*
 * RegistryCallEnd
 *		Leave the frame: back to the caller's identity, disconnect SPI.
 */
void
RegistryCallEnd(RegistryCall *call)
{
	SetUserIdAndSecContext(call->save_userid, call->save_sec_context);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
}

/*
 * registry_execute
 *		RegistryExecute without the error handling.
 */
static uint64
registry_execute(RegistryStmt stmt, Datum *values, const char *nulls)
{
	int			rc;

	/* an invalidation may have arrived since RegistryCallBegin */
	registry_cache_check();

	rc = SPI_execute_plan(registry_plan(stmt), values, nulls, false, 0);
	if (rc != registry_stmts[stmt].expected_rc)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * RegistryExecute
 *		Run one of the registry's statements; returns the rows it processed
 *		(SPI_tuptable holds any it returned).
 *
 * An error raised while the statement runs (a lock or statement timeout, a
 * serialization failure, a constraint) reaches the caller with its SQLSTATE,
 * message, detail and hint, but without the statement: SPI would add the
 * internal SQL text to the error's CONTEXT (or as its internal query), which
 * means nothing to the caller and shows how the registry works inside.
 */
uint64
RegistryExecute(RegistryStmt stmt, Datum *values, const char *nulls)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	volatile uint64 processed = 0;

	PG_TRY();
	{
		processed = registry_execute(stmt, values, nulls);
	}
	PG_CATCH();
	{
		IdempotencyRethrowHidingQuery(oldcontext);
	}
	PG_END_TRY();
	return processed;
}

/*
 * IdempotencyRethrowHidingQuery
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
IdempotencyRethrowHidingQuery(MemoryContext cxt)
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
