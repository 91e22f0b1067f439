/*-------------------------------------------------------------------------
 *
 * history.c
 *	  idempotency.record_transition(column): an optional AFTER INSERT OR
 *	  UPDATE ... FOR EACH ROW trigger that records every state change in
 *	  idempotency.state_history.
 *
 * Kept apart from the checker so that the checker stays pure (it writes
 * nowhere) and the history is a choice per table.  A row is identified by
 * its primary key, as a jsonb object; the table by its schema-qualified name,
 * which survives pg_dump and restore (on a Citus shard, the distributed
 * table's name; the history itself stays on the shard's node).  The insert runs as the history
 * table's owner (through the registry's frame), so the application needs no
 * privilege on it; who may read a history row is decided by row-level
 * security: whoever may read the table it describes.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/history.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "nodes/bitmapset.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "idempotency.h"

/*
 * history_row_key
 *		The row's primary key as a jsonb object: numbers and booleans as
 *		such, everything else as its text.
 */
static Jsonb *
history_row_key(Relation rel, HeapTuple tuple)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	Bitmapset  *pkattrs = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_PRIMARY_KEY);
	JsonbParseState *state = NULL;
	JsonbValue *result;
	int			x = -1;

	if (pkattrs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("relation \"%s\" has no primary key", RelationGetRelationName(rel)),
				 errdetail("record_transition identifies the rows it records by their primary key.")));

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	while ((x = bms_next_member(pkattrs, x)) >= 0)
	{
		AttrNumber	attnum = x + FirstLowInvalidHeapAttributeNumber;
		Form_pg_attribute att = TupleDescAttr(tupdesc, attnum - 1);
		JsonbValue	key;
		JsonbValue	val;
		bool		isnull;
		Datum		d = heap_getattr(tuple, attnum, tupdesc, &isnull);
		char		category;
		bool		preferred;

		key.type = jbvString;
		key.val.string.val = NameStr(att->attname);
		key.val.string.len = strlen(NameStr(att->attname));
		pushJsonbValue(&state, WJB_KEY, &key);

		get_type_category_preferred(att->atttypid, &category, &preferred);
		if (isnull)
			val.type = jbvNull;
		else if (att->atttypid == BOOLOID)
		{
			val.type = jbvBool;
			val.val.boolean = DatumGetBool(d);
		}
		else
		{
			Oid			outfunc;
			bool		isvarlena;
			char	   *str;

			getTypeOutputInfo(att->atttypid, &outfunc, &isvarlena);
			str = OidOutputFunctionCall(outfunc, d);
			if (category == TYPCATEGORY_NUMERIC && att->atttypid != FLOAT4OID &&
				att->atttypid != FLOAT8OID)
			{
				val.type = jbvNumeric;
				val.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
																	  CStringGetDatum(str),
																	  ObjectIdGetDatum(InvalidOid),
																	  Int32GetDatum(-1)));
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
 * HistoryCheckTrigger
 *		Check how a record_transition trigger is defined: AFTER INSERT and/or
 *		UPDATE, FOR EACH ROW, with one argument, a column of the table, on a
 *		table with a primary key.  Returns the column's number.  Runs when the
 *		trigger is created (trigger_ddl.c) and for every row.
 */
AttrNumber
HistoryCheckTrigger(Relation rel, Trigger *trigger)
{
	AttrNumber	attnum;

	if (!TRIGGER_FOR_ROW(trigger->tgtype))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("record_transition: must be fired for each row")));
	if (!TRIGGER_FOR_AFTER(trigger->tgtype))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("record_transition: must be fired after the event")));
	if (TRIGGER_FOR_DELETE(trigger->tgtype) || TRIGGER_FOR_TRUNCATE(trigger->tgtype))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("record_transition: must be fired for INSERT or UPDATE")));
	if (trigger->tgnargs != 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("record_transition: trigger \"%s\" must have one argument, the state column",
						trigger->tgname)));

	attnum = IdempotencyTriggerColumn(rel, trigger, 0, NULL);

	if (RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_PRIMARY_KEY) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("relation \"%s\" has no primary key", RelationGetRelationName(rel)),
				 errdetail("record_transition identifies the rows it records by their primary key.")));
	return attnum;
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
	Relation	rel;
	TupleDesc	tupdesc;
	HeapTuple	newtuple;
	int			attnum;
	char	   *to_state;
	char	   *from_state = NULL;
	RegistryCall call;
	Datum		values[8];
	char		nulls[8];
	Interval	ttl = {0};

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("record_transition: must be called as trigger")));

	rel = trigdata->tg_relation;
	tupdesc = RelationGetDescr(rel);
	attnum = HistoryCheckTrigger(rel, trigdata->tg_trigger);

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		newtuple = trigdata->tg_trigtuple;
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		newtuple = trigdata->tg_newtuple;
		from_state = SPI_getvalue(trigdata->tg_trigtuple, tupdesc, attnum);
	}
	else
		elog(ERROR, "record_transition: unrecognized operation");

	to_state = SPI_getvalue(newtuple, tupdesc, attnum);
	if (to_state == NULL ||
		(from_state != NULL && strcmp(from_state, to_state) == 0))
		return PointerGetDatum(NULL);	/* no change of state to record */

	memset(nulls, ' ', sizeof(nulls));
	ttl.time = (int64) idempotency_history_ttl * USECS_PER_SEC;

	/* on a Citus shard, the distributed table's name */
	values[0] = CStringGetTextDatum(IdempotencyCitusTableName(rel));
	values[1] = JsonbPGetDatum(history_row_key(rel, newtuple));
	values[2] = from_state ? CStringGetTextDatum(from_state) : (Datum) 0;
	nulls[2] = from_state ? ' ' : 'n';
	values[3] = CStringGetTextDatum(to_state);
	values[5] = FullTransactionIdGetDatum(GetTopFullTransactionId());

	RegistryCallBegin(&call);
	values[4] = TimestampTzGetDatum(call.now);
	values[6] = call.owner;
	values[7] = DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(call.now),
									IntervalPGetDatum(&ttl));
	RegistryExecute(RS_HISTORY_INSERT, values, nulls);
	RegistryCallEnd(&call);

	return PointerGetDatum(NULL);
}
