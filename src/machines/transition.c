/*-------------------------------------------------------------------------
 *
 * transition.c
 *	  The transition checker, idempotency.check_transition(machine, column):
 *	  a BEFORE INSERT OR UPDATE ... FOR EACH ROW trigger.
 *
 * Per row the checker does no SQL and no catalog lookup: the machine comes
 * from the per-backend cache (statemachine.c), and what it needs about the
 * trigger and the column is kept in fn_extra for the statement (trigger.c).
 * An update that leaves the state unchanged (the idempotent repeat) is
 * recognised before the machine is even looked at.  The trigger depends only
 * on OLD, NEW, its arguments and the cached definitions, and writes nothing,
 * so it can run on every shard of a distributed table (Citus rule 8).
 *
 * A row that an UPDATE moves to another partition is deleted from its
 * partition and inserted into the other: the source partition's trigger
 * fires BEFORE UPDATE (and checks the transition), then the destination's
 * fires BEFORE INSERT, and would take the moved row for a new one that must
 * start in an initial state.  So the UPDATE notes, per backend, the row
 * version it let leave with a state (TransitionMove), and an INSERT into the
 * same partition tree, with the same machine, column and state, is that
 * move if the noted row version has since been deleted by this transaction
 * as moved to another partition (core marks it so, and only a cross-
 * partition UPDATE does): it is not checked again.  A row version is
 * deleted once, so a note matches at most one INSERT; one left by a row
 * that did not move never matches.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/machines/transition.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/partition.h"
#include "catalog/pg_am.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "base/stats.h"
#include "machines/statemachine.h"
#include "machines/triggers.h"

/* How the state column's values are read. */
typedef enum StateColumnKind
{
	STATE_TEXT,					/* text or varchar: the bytes themselves */
	STATE_ENUM,					/* an enum: the label of the value's OID */
	STATE_OTHER					/* anything else: its output function */
} StateColumnKind;

/* Enum labels seen so far, so that each is looked up once per statement. */
#define ENUM_CACHE_SIZE 32

typedef struct TransitionTriggerCache
{
	TriggerCache base;			/* the trigger and its state column */
	StateColumnKind kind;
	FmgrInfo	outfunc;		/* STATE_OTHER */
	int			nenum;
	Oid			enum_oids[ENUM_CACHE_SIZE];
	char	   *enum_labels[ENUM_CACHE_SIZE];
	uint64		generation;		/* of the machine cache when machine was set */
	StateMachine *machine;
	Oid			root;			/* top of the partition tree, or InvalidOid */
} TransitionTriggerCache;

/*
 * A row version an UPDATE let leave with a state, in a partition tree: if
 * the row moves to another partition, the destination's BEFORE INSERT is
 * that move.
 */
#define TRANSITION_MOVES 8

typedef struct TransitionMove
{
	bool		valid;
	TimestampTz xact_start;		/* the transaction of the UPDATE */
	Oid			root;			/* the partition tree */
	Oid			relid;			/* the partition the row was in */
	ItemPointerData tid;		/* and its version there */
	char		machine[NAMEDATALEN];
	char		column[NAMEDATALEN];
	int			len;
	char		state[IDEMPOTENCY_SM_MAX_STATE_LEN + 1];
} TransitionMove;

static TransitionMove transition_moves[TRANSITION_MOVES];
static int	transition_moves_next = 0;

static AttrNumber transition_check(Relation rel, Trigger *trigger);
static void transition_build(TriggerCache *base, Relation rel, Trigger *trigger,
							 MemoryContext cxt);

/*
 * check_transition triggers: BEFORE INSERT and/or UPDATE, FOR EACH ROW, with
 * two arguments, a state machine and a column of the table.
 */
const TriggerProtocol TransitionTriggerProtocol = {
	.funcname = "check_transition",
	.before = true,
	.nargs = 2,
	.args_message = "two arguments, the state machine and the state column",
	.column_arg = 1,
	.column_role = "state",
	.check = transition_check,
	.cache_size = sizeof(TransitionTriggerCache),
	.build = transition_build,
};

/*
 * transition_check
 *		The protocol's check.  That the machine exists is checked only when
 *		the trigger is created (TransitionCheckMachine): a machine may be
 *		dropped and defined again while the trigger stays.
 */
static AttrNumber
transition_check(Relation rel, Trigger *trigger)
{
	return IdempotencyTriggerCheck(&TransitionTriggerProtocol, rel, trigger);
}

/*
 * TransitionCheckMachine
 *		At CREATE TRIGGER: the machine the trigger names must exist.
 */
void
TransitionCheckMachine(Trigger *trigger)
{
	(void) StateMachineLookup(trigger->tgargs[0]);
}

/*
 * transition_build
 *		How the state column's values are read.
 */
static void
transition_build(TriggerCache *base, Relation rel, Trigger *trigger, MemoryContext cxt)
{
	TransitionTriggerCache *cache = (TransitionTriggerCache *) base;
	Oid			typid = TupleDescAttr(RelationGetDescr(rel), base->attnum - 1)->atttypid;

	/* a partition: rows may move in from its siblings */
	if (rel->rd_rel->relispartition)
		cache->root = llast_oid(get_partition_ancestors(RelationGetRelid(rel)));

	if (typid == TEXTOID || typid == VARCHAROID)
		cache->kind = STATE_TEXT;
	else if (get_typtype(typid) == TYPTYPE_ENUM)
		cache->kind = STATE_ENUM;
	else
	{
		Oid			outfunc;
		bool		isvarlena;

		cache->kind = STATE_OTHER;
		getTypeOutputInfo(typid, &outfunc, &isvarlena);
		fmgr_info_cxt(outfunc, &cache->outfunc, cxt);
	}
}

/*
 * transition_machine
 *		The trigger's machine, looked up again only after an invalidation.
 */
static StateMachine *
transition_machine(TransitionTriggerCache *cache, TriggerData *trigdata)
{
	if (cache->machine == NULL || cache->generation != StateMachineCacheGeneration)
	{
		cache->machine = StateMachineLookup(trigdata->tg_trigger->tgargs[0]);
		cache->generation = StateMachineCacheGeneration;
	}
	return cache->machine;
}

/*
 * transition_enum_label
 *		The label of an enum value, remembered for the statement.
 */
static const char *
transition_enum_label(TransitionTriggerCache *cache, Oid value, MemoryContext cxt)
{
	HeapTuple	tup;
	char	   *label;

	for (int i = 0; i < cache->nenum; i++)
		if (cache->enum_oids[i] == value)
			return cache->enum_labels[i];

	tup = SearchSysCache1(ENUMOID, ObjectIdGetDatum(value));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for enum %u", value);
	label = MemoryContextStrdup(cxt, NameStr(((Form_pg_enum) GETSTRUCT(tup))->enumlabel));
	ReleaseSysCache(tup);

	if (cache->nenum < ENUM_CACHE_SIZE)
	{
		cache->enum_oids[cache->nenum] = value;
		cache->enum_labels[cache->nenum] = label;
		cache->nenum++;
	}
	return label;
}

/*
 * transition_state
 *		A state value as bytes (*str, *len).
 */
static void
transition_state(TransitionTriggerCache *cache, Datum value, MemoryContext cxt,
				 const char **str, int *len)
{
	switch (cache->kind)
	{
		case STATE_TEXT:
			{
				text	   *t = DatumGetTextPP(value);

				*str = VARDATA_ANY(t);
				*len = VARSIZE_ANY_EXHDR(t);
				break;
			}
		case STATE_ENUM:
			*str = transition_enum_label(cache, DatumGetObjectId(value), cxt);
			*len = strlen(*str);
			break;
		case STATE_OTHER:
			*str = OutputFunctionCall(&cache->outfunc, value);
			*len = strlen(*str);
			break;
	}
}

/*
 * transition_find
 *		The index of a state in the machine; an error if it is not one.
 */
static int
transition_find(StateMachine *machine, TriggerData *trigdata, AttrNumber attnum,
				const char *str, int len)
{
	int			idx = StateMachineFindState(machine, str, len);

	if (idx < 0)
	{
		IdempotencyCount(STAT_TRANSITION_REJECTED, 1);
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_UNKNOWN_STATE),
				 errmsg("\"%s\" is not a state of state machine \"%s\"",
						pnstrdup(str, len), machine->name),
				 errtablecol(trigdata->tg_relation, attnum)));
	}
	return idx;
}

/*
 * transition_require_initial
 *		A new row (or a row whose state was NULL) must start in an initial
 *		state.
 */
static void
transition_require_initial(StateMachine *machine, TriggerData *trigdata,
						   AttrNumber attnum, int to)
{
	if (machine->initial[to])
		return;

	IdempotencyCount(STAT_TRANSITION_REJECTED, 1);
	ereport(ERROR,
			(errcode(ERRCODE_IDEMPOTENCY_TRANSITION_NOT_ALLOWED),
			 errmsg("\"%s\" is not an initial state of state machine \"%s\"",
					machine->states[to], machine->name),
			 errdetail("Initial states: %s.", StateMachineInitialList(machine)),
			 errtablecol(trigdata->tg_relation, attnum)));
}

/*
 * transition_move_of
 *		Whether a note is of this partition tree and trigger (and, with str,
 *		state).
 */
static bool
transition_move_of(TransitionMove *move, TransitionTriggerCache *cache,
				   Trigger *trigger, const char *str, int len)
{
	return move->valid &&
		move->xact_start == GetCurrentTransactionStartTimestamp() &&
		move->root == cache->root &&
		strncmp(move->machine, trigger->tgargs[0], NAMEDATALEN) == 0 &&
		strncmp(move->column, trigger->tgargs[1], NAMEDATALEN) == 0 &&
		(str == NULL || (move->len == len && memcmp(move->state, str, len) == 0));
}

/*
 * transition_note_move
 *		An UPDATE in a partition let a row version leave with this state:
 *		note it, replacing the same trigger's note of an earlier row.
 */
static void
transition_note_move(TransitionTriggerCache *cache, TriggerData *trigdata,
					 const char *str, int len)
{
	TransitionMove *slot = NULL;

	if (len > IDEMPOTENCY_SM_MAX_STATE_LEN ||
		!ItemPointerIsValid(&trigdata->tg_trigtuple->t_self))
		return;
	for (int i = 0; i < TRANSITION_MOVES && slot == NULL; i++)
		if (transition_move_of(&transition_moves[i], cache, trigdata->tg_trigger, NULL, 0) ||
			!transition_moves[i].valid ||
			transition_moves[i].xact_start != GetCurrentTransactionStartTimestamp())
			slot = &transition_moves[i];
	if (slot == NULL)
	{
		slot = &transition_moves[transition_moves_next];
		transition_moves_next = (transition_moves_next + 1) % TRANSITION_MOVES;
	}

	slot->valid = true;
	slot->xact_start = GetCurrentTransactionStartTimestamp();
	slot->root = cache->root;
	slot->relid = RelationGetRelid(trigdata->tg_relation);
	slot->tid = trigdata->tg_trigtuple->t_self;
	strlcpy(slot->machine, trigdata->tg_trigger->tgargs[0], NAMEDATALEN);
	strlcpy(slot->column, trigdata->tg_trigger->tgargs[1], NAMEDATALEN);
	slot->len = len;
	memcpy(slot->state, str, len);
}

/*
 * transition_moved_away
 *		Whether a row version was deleted by this transaction as moved to
 *		another partition.
 */
static bool
transition_moved_away(Oid relid, ItemPointer tid)
{
	Relation	rel;
	HeapTupleData tuple;
	Buffer		buffer = InvalidBuffer;
	bool		moved = false;

	rel = try_table_open(relid, AccessShareLock);
	if (rel == NULL)
		return false;
	tuple.t_self = *tid;
	if (rel->rd_rel->relam == HEAP_TABLE_AM_OID &&
		ItemPointerGetBlockNumber(tid) < RelationGetNumberOfBlocks(rel) &&
		heap_fetch(rel, SnapshotAny, &tuple, &buffer, true))
	{
		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		moved = HeapTupleHeaderIndicatesMovedPartitions(tuple.t_data) &&
			TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetUpdateXid(tuple.t_data));
		LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
	}
	if (BufferIsValid(buffer))
		ReleaseBuffer(buffer);
	table_close(rel, AccessShareLock);
	return moved;
}

/*
 * transition_take_move
 *		Whether an INSERT into a partition is a row that an UPDATE, which
 *		checked it, moved here; the note is then used up.
 */
static bool
transition_take_move(TransitionTriggerCache *cache, Trigger *trigger,
					 const char *str, int len)
{
	for (int i = 0; i < TRANSITION_MOVES; i++)
	{
		TransitionMove *move = &transition_moves[i];

		if (transition_move_of(move, cache, trigger, str, len) &&
			transition_moved_away(move->relid, &move->tid))
		{
			move->valid = false;
			return true;
		}
	}
	return false;
}

PG_FUNCTION_INFO_V1(idempotency_check_transition);

/*
 * idempotency_check_transition
 *		check_transition(machine, column)
 */
Datum
idempotency_check_transition(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TransitionTriggerCache *cache;
	TupleDesc	tupdesc;
	HeapTuple	newtuple;
	Datum		newval;
	bool		newnull;
	StateMachine *machine;
	const char *newstr;
	int			newlen;
	int			to;
	AttrNumber	attnum;

	/* first how the trigger is defined, then which event fired it */
	cache = (TransitionTriggerCache *) IdempotencyTriggerCache(fcinfo, &TransitionTriggerProtocol);
	attnum = cache->base.attnum;
	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		newtuple = trigdata->tg_trigtuple;
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		newtuple = trigdata->tg_newtuple;
	else
		elog(ERROR, "check_transition: unrecognized operation");

	IdempotencyCount(STAT_TRANSITION_CHECKED, 1);
	tupdesc = RelationGetDescr(trigdata->tg_relation);
	newval = heap_getattr(newtuple, attnum, tupdesc, &newnull);

	if (newnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in state column \"%s\" of relation \"%s\"",
						trigdata->tg_trigger->tgargs[1],
						RelationGetRelationName(trigdata->tg_relation)),
				 errdetail("State machine \"%s\" has no null state.", trigdata->tg_trigger->tgargs[0]),
				 errtablecol(trigdata->tg_relation, attnum)));

	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		bool		oldnull;
		Datum		oldval = heap_getattr(trigdata->tg_trigtuple, attnum, tupdesc, &oldnull);

		if (!oldnull)
		{
			const char *oldstr;
			int			oldlen;
			int			from;

			/* the repeat: the state stays as it is, nothing to check */
			if (cache->kind == STATE_ENUM && oldval == newval && !OidIsValid(cache->root))
				return PointerGetDatum(newtuple);
			transition_state(cache, newval, fcinfo->flinfo->fn_mcxt, &newstr, &newlen);
			transition_state(cache, oldval, fcinfo->flinfo->fn_mcxt, &oldstr, &oldlen);
			if (oldlen == newlen && memcmp(oldstr, newstr, newlen) == 0)
			{
				if (OidIsValid(cache->root))
					transition_note_move(cache, trigdata, newstr, newlen);
				return PointerGetDatum(newtuple);
			}

			machine = transition_machine(cache, trigdata);
			from = transition_find(machine, trigdata, attnum, oldstr, oldlen);
			to = transition_find(machine, trigdata, attnum, newstr, newlen);
			if (!StateMachineAllows(machine, from, to))
			{
				char	   *allowed = StateMachineAllowedList(machine, from);

				IdempotencyCount(STAT_TRANSITION_REJECTED, 1);
				ereport(ERROR,
						(errcode(ERRCODE_IDEMPOTENCY_TRANSITION_NOT_ALLOWED),
						 errmsg("transition from \"%s\" to \"%s\" is not allowed by state machine \"%s\"",
								machine->states[from], machine->states[to], machine->name),
						 allowed[0] != '\0' ?
						 errdetail("Allowed from \"%s\": %s.", machine->states[from], allowed) :
						 errdetail("No transition leaves \"%s\".", machine->states[from]),
						 errtablecol(trigdata->tg_relation, attnum)));
			}
			if (OidIsValid(cache->root))
				transition_note_move(cache, trigdata, newstr, newlen);
			return PointerGetDatum(newtuple);
		}
	}

	/* a new row, or a row that had no state yet: start in an initial state */
	transition_state(cache, newval, fcinfo->flinfo->fn_mcxt, &newstr, &newlen);

	/* unless it is a row an UPDATE moved here from another partition */
	if (OidIsValid(cache->root) && TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) &&
		transition_take_move(cache, trigdata->tg_trigger, newstr, newlen))
		return PointerGetDatum(newtuple);
	machine = transition_machine(cache, trigdata);
	to = transition_find(machine, trigdata, attnum, newstr, newlen);
	transition_require_initial(machine, trigdata, attnum, to);
	return PointerGetDatum(newtuple);
}
