/*-------------------------------------------------------------------------
 *
 * version_guard.c
 *	  idempotency.version_guard(column): a BEFORE UPDATE ... FOR EACH ROW
 *	  trigger for optimistic locking with a version column.
 *
 * Every update moves the row's version up by exactly one.  An UPDATE that
 * does not mention the column (it forgot to bump it) gets old + 1 written
 * for it; one that sets old + 1 passes; one that sets anything else is a
 * stale write, made from a copy of the row that is no longer current, and is
 * refused with IV001.  Whether the statement set the column is read from
 * tg_updatedcols, so "SET version = 5" on a row at version 5 is stale, not
 * forgotten.  When two writers race, PostgreSQL runs the trigger again on
 * the newest row version for the one that waited, so the loser's stale
 * version is caught.  Works with smallint, integer and bigint columns.
 *
 * MERGE: tg_updatedcols holds the columns of all its UPDATE actions
 * together, so a row that goes through an action that leaves the version
 * out would look like a stale write whenever another action sets it.  An
 * ExecutorStart hook therefore puts a wrapper around each matched action's
 * WHEN condition of a MERGE whose target has BEFORE UPDATE row triggers; the
 * wrapper notes which action the executor chose for the row (the first whose
 * condition holds), and the trigger, which fires right after, reads the
 * columns that action sets.  A statement run in between (by a function in
 * the action's SET list, or by an earlier trigger) starts with no note and,
 * when it ends, gives the MERGE's note back; the notes of the statements
 * running in a backend are kept as a stack, which an abort unwinds.  A MERGE
 * started before the library was loaded, or a note given up (a statement
 * ended out of order, as a cursor does), falls back to tg_updatedcols: the
 * old rule, which may refuse a fresh write but never lets a stale one
 * through.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/machines/version_guard.c
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
#include "executor/executor.h"
#include "executor/spi.h"
#include "nodes/bitmapset.h"
#include "nodes/execnodes.h"
#include "utils/rel.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "base/stats.h"
#include "machines/triggers.h"

/*
 * version_value
 *		A version datum as int64.
 */
static int64
version_value(Oid typid, Datum d)
{
	switch (typid)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

/*
 * version_datum
 *		An int64 as a version datum; an error past the type's range.
 */
static Datum
version_datum(Oid typid, int64 v, const char *colname)
{
	if ((typid == INT2OID && v > PG_INT16_MAX) || (typid == INT4OID && v > PG_INT32_MAX))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("version column \"%s\" is out of range", colname)));
	switch (typid)
	{
		case INT2OID:
			return Int16GetDatum((int16) v);
		case INT4OID:
			return Int32GetDatum((int32) v);
		default:
			return Int64GetDatum(v);
	}
}

/*
 * A matched MERGE action, as watched: the executor evaluates state as the
 * action's WHEN condition.
 */
typedef struct VersionGuardMergeAction
{
	ExprState	state;			/* must be first */
	ExprState  *when;			/* the action's own condition, or NULL */
	Oid			relid;			/* the result relation */
	bool		is_update;		/* an UPDATE action (else DELETE or nothing) */
	List	   *update_colnos;	/* the columns it sets */
	QueryDesc  *owner;			/* the MERGE */
} VersionGuardMergeAction;

/*
 * The action the executor chose for the MERGE row now being written, or
 * NULL.  Points into the MERGE's executor memory: never kept past its
 * ExecutorEnd or its abort.
 */
static VersionGuardMergeAction *merge_action = NULL;

/*
 * The statements running in this backend, innermost last, each with the
 * note it started under, to give back when it ends.
 */
#define MERGE_STACK_SIZE 64

typedef struct VersionGuardRunning
{
	QueryDesc  *query;
	VersionGuardMergeAction *outer; /* merge_action when it started */
	QueryDesc  *outer_owner;	/* and that action's MERGE */
	int			nestlevel;		/* subtransaction it started in */
} VersionGuardRunning;

static VersionGuardRunning merge_stack[MERGE_STACK_SIZE];
static int	merge_depth = 0;

static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

typedef struct VersionGuardCache
{
	TriggerCache base;			/* the trigger and its version column */
	Oid			typid;			/* smallint, integer or bigint */
} VersionGuardCache;

static AttrNumber version_guard_check(Relation rel, Trigger *trigger);
static void version_guard_build(TriggerCache *base, Relation rel, Trigger *trigger,
								MemoryContext cxt);

/*
 * version_guard triggers: BEFORE UPDATE FOR EACH ROW (and no other event),
 * with one argument, a smallint, integer or bigint column of the table.
 */
const TriggerProtocol VersionGuardTriggerProtocol = {
	.funcname = "version_guard",
	.before = true,
	.update_only = true,
	.timing_message = "must be fired BEFORE UPDATE FOR EACH ROW",
	.nargs = 1,
	.args_message = "one argument, the version column",
	.column_arg = 0,
	.check = version_guard_check,
	.cache_size = sizeof(VersionGuardCache),
	.build = version_guard_build,
};

/*
 * version_guard_check
 *		The protocol's check, and the column's type.
 */
static AttrNumber
version_guard_check(Relation rel, Trigger *trigger)
{
	AttrNumber	attnum = IdempotencyTriggerCheck(&VersionGuardTriggerProtocol, rel, trigger);
	Oid			typid = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;

	if (typid != INT2OID && typid != INT4OID && typid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("version column \"%s\" must be of type smallint, integer or bigint",
						trigger->tgargs[0])));
	return attnum;
}

/*
 * version_guard_build
 *		The version column's type.
 */
static void
version_guard_build(TriggerCache *base, Relation rel, Trigger *trigger, MemoryContext cxt)
{
	((VersionGuardCache *) base)->typid =
		TupleDescAttr(RelationGetDescr(rel), base->attnum - 1)->atttypid;
}

/*
 * version_guard_merge_when
 *		The wrapper around a MERGE action's WHEN condition: the condition's
 *		value, noting the action when the executor will choose it.
 */
static Datum
version_guard_merge_when(ExprState *expression, ExprContext *econtext, bool *isNull)
{
	VersionGuardMergeAction *action = (VersionGuardMergeAction *) expression;
	bool		chosen = action->when == NULL || ExecQual(action->when, econtext);

	if (chosen)
		merge_action = action->is_update ? action : NULL;
	*isNull = false;
	return BoolGetDatum(chosen);
}

/*
 * version_guard_watch_merge
 *		Wrap the WHEN condition of each matched action of a MERGE's result
 *		relations that have BEFORE UPDATE row triggers.
 */
static void
version_guard_watch_merge(QueryDesc *queryDesc)
{
	ModifyTableState *mtstate = (ModifyTableState *) queryDesc->planstate;
	MemoryContext oldcxt = MemoryContextSwitchTo(queryDesc->estate->es_query_cxt);

	for (int i = 0; i < mtstate->mt_nrels; i++)
	{
		ResultRelInfo *rri = &mtstate->resultRelInfo[i];
		List	   *lists[2];
		int			nlists;

		if (rri->ri_TrigDesc == NULL || !rri->ri_TrigDesc->trig_update_before_row)
			continue;
		nlists = IdempotencyMergeUpdateLists(rri, lists);
		for (int l = 0; l < nlists; l++)
		{
			ListCell   *lc;

			foreach(lc, lists[l])
			{
				MergeActionState *mas = (MergeActionState *) lfirst(lc);
				VersionGuardMergeAction *action = palloc0(sizeof(VersionGuardMergeAction));

				NodeSetTag(&action->state, T_ExprState);
				action->state.flags = EEO_FLAG_IS_QUAL;
				action->state.evalfunc = version_guard_merge_when;
				action->when = mas->mas_whenqual;
				action->relid = RelationGetRelid(rri->ri_RelationDesc);
				action->is_update = mas->mas_action->commandType == CMD_UPDATE;
				action->update_colnos = mas->mas_action->updateColnos;
				action->owner = queryDesc;
				mas->mas_whenqual = &action->state;
			}
		}
	}
	MemoryContextSwitchTo(oldcxt);
}

/*
 * version_guard_ExecutorStart
 *		A statement starts with no note (the one it interrupts is kept for
 *		its end); a MERGE's actions are watched.
 */
static void
version_guard_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (merge_depth < MERGE_STACK_SIZE)
	{
		VersionGuardRunning *running = &merge_stack[merge_depth++];

		running->query = queryDesc;
		running->outer = merge_action;
		running->outer_owner = merge_action != NULL ? merge_action->owner : NULL;
		running->nestlevel = GetCurrentTransactionNestLevel();
	}
	merge_action = NULL;

	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);

	if (queryDesc->operation == CMD_MERGE &&
		(eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0 &&
		queryDesc->planstate != NULL && IsA(queryDesc->planstate, ModifyTableState))
		version_guard_watch_merge(queryDesc);
}

/*
 * version_guard_ExecutorEnd
 *		A statement ends: the note it started under comes back if the MERGE
 *		that made it is the statement right below (still running, so its
 *		memory is there); otherwise there is none.
 */
static void
version_guard_ExecutorEnd(QueryDesc *queryDesc)
{
	merge_action = NULL;
	for (int i = merge_depth - 1; i >= 0; i--)
	{
		if (merge_stack[i].query != queryDesc)
			continue;
		if (i == merge_depth - 1 && i > 0 && merge_stack[i].outer != NULL &&
			merge_stack[i - 1].query == merge_stack[i].outer_owner)
			merge_action = merge_stack[i].outer;
		memmove(&merge_stack[i], &merge_stack[i + 1],
				sizeof(VersionGuardRunning) * (merge_depth - i - 1));
		merge_depth--;
		break;
	}

	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

/*
 * version_guard_xact_callback
 *		At the end of a transaction no statement runs any more.
 */
static void
version_guard_xact_callback(XactEvent event, void *arg)
{
	merge_action = NULL;
	merge_depth = 0;
}

/*
 * version_guard_subxact_callback
 *		A subtransaction's abort ends the statements it started, without
 *		their ExecutorEnd, and frees their memory: forget them, and give the
 *		statement below the note it had when the first of them started.
 */
static void
version_guard_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							   SubTransactionId parentSubid, void *arg)
{
	VersionGuardRunning *first = NULL;

	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	merge_action = NULL;
	while (merge_depth > 0 &&
		   merge_stack[merge_depth - 1].nestlevel >= GetCurrentTransactionNestLevel())
		first = &merge_stack[--merge_depth];

	/* as if the first of them had ended: the MERGE below gets its note back */
	if (first != NULL && first->outer != NULL && merge_depth > 0 &&
		merge_stack[merge_depth - 1].query == first->outer_owner)
		merge_action = first->outer;
}

/*
 * VersionGuardInit
 *		Install the executor hooks and transaction callbacks, from _PG_init.
 */
void
VersionGuardInit(void)
{
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = version_guard_ExecutorStart;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = version_guard_ExecutorEnd;
	RegisterXactCallback(version_guard_xact_callback, NULL);
	RegisterSubXactCallback(version_guard_subxact_callback, NULL);
}

PG_FUNCTION_INFO_V1(idempotency_version_guard);

/*
 * idempotency_version_guard
 *		version_guard(column)
 */
Datum
idempotency_version_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	VersionGuardCache *cache;
	Relation	rel;
	TupleDesc	tupdesc;
	const char *colname;
	int			attnum;
	Oid			typid;
	bool		oldnull;
	bool		newnull;
	int64		oldv;
	int64		newv;
	bool		set_by_statement;

	cache = (VersionGuardCache *) IdempotencyTriggerCache(fcinfo, &VersionGuardTriggerProtocol);
	rel = trigdata->tg_relation;
	tupdesc = RelationGetDescr(rel);
	attnum = cache->base.attnum;
	colname = trigdata->tg_trigger->tgargs[0];
	typid = cache->typid;

	oldv = version_value(typid, heap_getattr(trigdata->tg_trigtuple, attnum, tupdesc, &oldnull));
	newv = version_value(typid, heap_getattr(trigdata->tg_newtuple, attnum, tupdesc, &newnull));
	if (oldnull || newnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in version column \"%s\" of relation \"%s\"",
						colname, RelationGetRelationName(rel)),
				 errtablecol(rel, attnum)));

	/* under MERGE, the columns of the action this row goes through */
	if (merge_action != NULL && merge_action->relid == RelationGetRelid(rel))
		set_by_statement = list_member_int(merge_action->update_colnos, attnum);
	else
		set_by_statement = bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber,
										 trigdata->tg_updatedcols);
	if (!set_by_statement)
	{
		int			cols[1] = {attnum};
		Datum		vals[1] = {version_datum(typid, oldv + 1, colname)};
		bool		nulls[1] = {false};

		return PointerGetDatum(heap_modify_tuple_by_cols(trigdata->tg_newtuple, tupdesc,
														 1, cols, vals, nulls));
	}
	if (newv != oldv + 1)
	{
		IdempotencyCount(STAT_STALE_WRITE, 1);
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_STALE_WRITE),
				 errmsg("stale write to relation \"%s\"", RelationGetRelationName(rel)),
				 errdetail("The update sets \"%s\" to %lld, but the row is at version %lld: an update must set it to %lld, or leave it out.",
						   colname, (long long) newv, (long long) oldv, (long long) (oldv + 1)),
				 errhint("Read the row again and retry."),
				 errtablecol(rel, attnum)));
	}
	return PointerGetDatum(trigdata->tg_newtuple);
}
