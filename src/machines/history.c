/*-------------------------------------------------------------------------
 *
 * history.c
 *	  idempotency.record_transition(column): an optional AFTER INSERT OR
 *	  UPDATE ... FOR EACH ROW trigger that records every state change in
 *	  idempotency.state_history.
 *
 * Kept apart from the checker so that the checker stays pure (it writes
 * nowhere) and the history is a choice per table.  A row is identified by its
 * primary key, as a jsonb object; the table by its schema-qualified name and
 * its OID (on a Citus shard, the distributed table's; the history itself
 * stays on the shard's node).  The insert runs as the history table's owner
 * (through the SQL frame, sqlcall.c), so the application needs no privilege
 * on it.  Who may read a history row is decided by row-level security
 * (state_history_visible, below): a role that may read every row of the table
 * it describes, while that table is still the same one.  A role under the
 * table's own row-level security sees none of its history: the history row
 * does not say whether the role could see the row it describes.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/machines/history.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "distributed/shards.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "machines/history.h"
#include "machines/triggers.h"
#include "objects/extension.h"

/* How a primary key column goes into the row's jsonb key. */
typedef enum HistoryKeyKind
{
	HISTORY_KEY_BOOL,			/* a jsonb boolean */
	HISTORY_KEY_NUMBER,			/* a jsonb number, from its text */
	HISTORY_KEY_STRING			/* its text */
} HistoryKeyKind;

typedef struct HistoryKeyColumn
{
	AttrNumber	attnum;
	HistoryKeyKind kind;
	FmgrInfo	outfunc;
} HistoryKeyColumn;

typedef struct HistoryTriggerCache
{
	TriggerCache base;			/* the trigger and its state column */
	char	   *table_name;		/* as the history names the table */
	Oid			table_oid;		/* and its OID */
	FmgrInfo	state_out;		/* the state column's output function */
	int			nkeys;
	HistoryKeyColumn *keys;		/* the primary key's columns */
} HistoryTriggerCache;

/*
 * $1 table, $2 row key, $3 from, $4 to, $5 when, $6 xid, $7 role, $8 expiry,
 * $9 table OID
 */
static SqlStatement history_insert = {
	.sql = "INSERT INTO idempotency.state_history"
	" (table_name, row_key, from_state, to_state, changed_at, xid, role, expires_at, table_oid)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
	.nargs = 9,
	.argtypes = {TEXTOID, JSONBOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, XID8OID, TEXTOID,
	TIMESTAMPTZOID, OIDOID},
	.expected_rc = SPI_OK_INSERT,
};

/*
 * $1 now, $2 batch size.  History rows have no natural key, so this one goes
 * by ctid: a plain server's fastest way, and history is optional and
 * node-local anyway.
 */
static SqlStatement history_delete_expired = {
	.sql = "DELETE FROM idempotency.state_history AS h"
	" WHERE h.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
	"   SELECT e.ctid FROM idempotency.state_history AS e"
	"    WHERE e.expires_at OPERATOR(pg_catalog.<=) $1"
	"    ORDER BY e.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))",
	.nargs = 2,
	.argtypes = {TIMESTAMPTZOID, INT4OID},
	.expected_rc = SPI_OK_DELETE,
	.custom_plan = true,
};

static AttrNumber history_check(Relation rel, Trigger *trigger);

/*
 * history_execute
 *		Run a statement on state_history as the table's owner, not as the
 *		registry's (the frame's).  state_history belongs to
 *		pg_database_owner, so that the database's owner can read all of it,
 *		row-level security notwithstanding, and so pg_dump it: anything that
 *		owner attaches to the table (a trigger, an index expression, a
 *		column default) then runs with the owner's privileges only, in a
 *		security-restricted operation, as in core's maintenance commands.
 *		An error restores the user with the (sub)transaction's abort.
 */
static uint64
history_execute(SqlStatement *stmt, Datum *values, const char *nulls)
{
	Oid			relid = IdempotencyCatalogGet()->relids[IR_STATE_HISTORY];
	HeapTuple	tup;
	Oid			relowner;
	Oid			save_userid;
	int			save_sec_context;
	uint64		processed;

	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	relowner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(relowner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	processed = SqlExecute(stmt, values, nulls);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return processed;
}
static void history_build(TriggerCache *base, Relation rel, Trigger *trigger,
						  MemoryContext cxt);

/*
 * record_transition triggers: AFTER INSERT and/or UPDATE, FOR EACH ROW, with
 * one argument, a column of the table, on a table with a primary key.
 */
const TriggerProtocol HistoryTriggerProtocol = {
	.funcname = "record_transition",
	.before = false,
	.nargs = 1,
	.args_message = "one argument, the state column",
	.column_arg = 0,
	.check = history_check,
	.cache_size = sizeof(HistoryTriggerCache),
	.build = history_build,
};

/*
 * history_require_pkey
 *		The table's primary key columns; an error if it has none.
 */
static Bitmapset *
history_require_pkey(Relation rel)
{
	Bitmapset  *pkattrs = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_PRIMARY_KEY);

	if (pkattrs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("relation \"%s\" has no primary key", RelationGetRelationName(rel)),
				 errdetail("record_transition identifies the rows it records by their primary key.")));
	return pkattrs;
}

/*
 * history_check
 *		The protocol's check, and a primary key.
 */
static AttrNumber
history_check(Relation rel, Trigger *trigger)
{
	AttrNumber	attnum = IdempotencyTriggerCheck(&HistoryTriggerProtocol, rel, trigger);

	(void) history_require_pkey(rel);
	return attnum;
}

/*
 * history_build
 *		The table's name and how each primary key column is written.
 */
static void
history_build(TriggerCache *base, Relation rel, Trigger *trigger, MemoryContext cxt)
{
	HistoryTriggerCache *cache = (HistoryTriggerCache *) base;
	TupleDesc	tupdesc = RelationGetDescr(rel);
	Bitmapset  *pkattrs = history_require_pkey(rel);
	int			x = -1;
	Oid			outfunc;
	bool		isvarlena;

	/* on a Citus shard, the distributed table's name and OID */
	cache->table_name = MemoryContextStrdup(cxt, IdempotencyCitusTableName(rel));
	cache->table_oid = IdempotencyCitusShardOf(rel);
	if (!OidIsValid(cache->table_oid))
		cache->table_oid = RelationGetRelid(rel);
	getTypeOutputInfo(TupleDescAttr(tupdesc, base->attnum - 1)->atttypid, &outfunc, &isvarlena);
	fmgr_info_cxt(outfunc, &cache->state_out, cxt);
	cache->keys = MemoryContextAllocZero(cxt, sizeof(HistoryKeyColumn) * bms_num_members(pkattrs));
	while ((x = bms_next_member(pkattrs, x)) >= 0)
	{
		HistoryKeyColumn *col = &cache->keys[cache->nkeys++];
		Oid			typid;
		Oid			base;
		char		category;
		bool		preferred;

		col->attnum = x + FirstLowInvalidHeapAttributeNumber;
		typid = TupleDescAttr(tupdesc, col->attnum - 1)->atttypid;
		base = getBaseType(typid);
		get_type_category_preferred(base, &category, &preferred);
		if (base == BOOLOID)
			col->kind = HISTORY_KEY_BOOL;
		else if (category == TYPCATEGORY_NUMERIC && base != FLOAT4OID &&
				 base != FLOAT8OID && base != CASHOID)
			col->kind = HISTORY_KEY_NUMBER;
		else
			col->kind = HISTORY_KEY_STRING;
		getTypeOutputInfo(typid, &outfunc, &isvarlena);
		fmgr_info_cxt(outfunc, &col->outfunc, cxt);
	}
}

/*
 * history_row_key
 *		The row's primary key as a jsonb object: numbers and booleans as
 *		such, everything else (and NaN and infinities) as its text.
 */
static Jsonb *
history_row_key(HistoryTriggerCache *cache, Relation rel, HeapTuple tuple)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	JsonbParseState *state = NULL;
	JsonbValue *result;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < cache->nkeys; i++)
	{
		HistoryKeyColumn *col = &cache->keys[i];
		Form_pg_attribute att = TupleDescAttr(tupdesc, col->attnum - 1);
		JsonbValue	key;
		JsonbValue	val;
		bool		isnull;
		Datum		d = heap_getattr(tuple, col->attnum, tupdesc, &isnull);

		key.type = jbvString;
		key.val.string.val = NameStr(att->attname);
		key.val.string.len = strlen(NameStr(att->attname));
		pushJsonbValue(&state, WJB_KEY, &key);

		if (isnull)
			val.type = jbvNull;
		else if (col->kind == HISTORY_KEY_BOOL)
		{
			val.type = jbvBool;
			val.val.boolean = DatumGetBool(d);
		}
		else
		{
			char	   *str = OutputFunctionCall(&col->outfunc, d);

			Numeric		num = NULL;

			if (col->kind == HISTORY_KEY_NUMBER)
				num = DatumGetNumeric(DirectFunctionCall3(numeric_in,
														  CStringGetDatum(str),
														  ObjectIdGetDatum(InvalidOid),
														  Int32GetDatum(-1)));

			/*
			 * JSON has no NaN nor Infinity: jsonb would print them, but as
			 * text that no JSON parser (nor a restore of the history) reads
			 * back.  Such a key is written as its text, like a non-number.
			 */
			if (num != NULL && !numeric_is_nan(num) && !numeric_is_inf(num))
			{
				val.type = jbvNumeric;
				val.val.numeric = num;
			}
			else
			{
				val.type = jbvString;
				val.val.string.val = str;
				val.val.string.len = strlen(str);
			}
		}
		pushJsonbValue(&state, WJB_VALUE, &val);
	}
	result = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(result);
}

/*
 * history_state
 *		A state column's value as text, or NULL.
 */
static char *
history_state(HistoryTriggerCache *cache, HeapTuple tuple, TupleDesc tupdesc)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, cache->base.attnum, tupdesc, &isnull);

	return isnull ? NULL : OutputFunctionCall(&cache->state_out, d);
}

PG_FUNCTION_INFO_V1(idempotency_record_transition);

/*
 * idempotency_record_transition
 *		record_transition(column)
 */
Datum
idempotency_record_transition(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HistoryTriggerCache *cache;
	TupleDesc	tupdesc;
	HeapTuple	newtuple;
	char	   *to_state;
	char	   *from_state = NULL;
	SqlCall		call;
	Datum		values[9];
	char		nulls[9];
	Interval	ttl = {0};

	cache = (HistoryTriggerCache *) IdempotencyTriggerCache(fcinfo, &HistoryTriggerProtocol);
	tupdesc = RelationGetDescr(trigdata->tg_relation);

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		newtuple = trigdata->tg_trigtuple;
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		newtuple = trigdata->tg_newtuple;
		from_state = history_state(cache, trigdata->tg_trigtuple, tupdesc);
	}
	else
		elog(ERROR, "record_transition: unrecognized operation");

	to_state = history_state(cache, newtuple, tupdesc);
	if (to_state == NULL ||
		(from_state != NULL && strcmp(from_state, to_state) == 0))
		return PointerGetDatum(NULL);	/* no change of state to record */

	memset(nulls, ' ', sizeof(nulls));
	ttl.time = (int64) idempotency_history_ttl * USECS_PER_SEC;

	values[0] = CStringGetTextDatum(cache->table_name);
	values[1] = JsonbPGetDatum(history_row_key(cache, trigdata->tg_relation, newtuple));
	values[2] = from_state ? CStringGetTextDatum(from_state) : (Datum) 0;
	nulls[2] = from_state ? ' ' : 'n';
	values[3] = CStringGetTextDatum(to_state);
	values[5] = FullTransactionIdGetDatum(GetTopFullTransactionId());
	values[8] = ObjectIdGetDatum(cache->table_oid);

	SqlCallBegin(&call);
	values[4] = TimestampTzGetDatum(call.now);
	values[6] = call.owner;
	values[7] = DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(call.now),
									IntervalPGetDatum(&ttl));
	(void) history_execute(&history_insert, values, nulls);
	SqlCallEnd(&call);

	return PointerGetDatum(NULL);
}

PG_FUNCTION_INFO_V1(idempotency_state_history_visible);

/*
 * idempotency_state_history_visible
 *		state_history_visible(table_oid, table_name), the history's row-level
 *		security: whether the current role may read history rows about the
 *		table.  The table must still be the one that was written (its OID
 *		still has the name the history records: not dropped, renamed, nor
 *		replaced by a table created under the old name, whose owner must not
 *		read the old one's history), the role must be able to SELECT it,
 *		and no row-level security of the table may apply to the role.
 *		Note: no schema lookup by name, so a role without USAGE on the
 *		table's schema gets false rather than an error.
 */
Datum
idempotency_state_history_visible(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	text	   *name = PG_GETARG_TEXT_PP(1);
	HeapTuple	tuple;
	Form_pg_class form;
	const char *current;
	char	   *nspname;

	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		PG_RETURN_BOOL(false);
	form = (Form_pg_class) GETSTRUCT(tuple);
	nspname = get_namespace_name(form->relnamespace);
	current = nspname == NULL ? NULL :
		quote_qualified_identifier(nspname, NameStr(form->relname));
	ReleaseSysCache(tuple);

	if (current == NULL || strlen(current) != VARSIZE_ANY_EXHDR(name) ||
		memcmp(current, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name)) != 0)
		PG_RETURN_BOOL(false);
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(check_enable_rls(relid, InvalidOid, true) != RLS_ENABLED);
}

/*
 * HistoryDeleteExpired
 *		Delete up to limit expired history rows, in the caller's frame.
 */
uint64
HistoryDeleteExpired(SqlCall *call, int32 limit)
{
	Datum		values[2] = {TimestampTzGetDatum(call->now), Int32GetDatum(limit)};

	return history_execute(&history_delete_expired, values, NULL);
}
