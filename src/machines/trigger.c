/*-------------------------------------------------------------------------
 *
 * trigger.c
 *	  The protocol check and the per-statement cache that the three row
 *	  triggers (transition.c, history.c, version_guard.c) share.
 *
 * A trigger is checked when it is created (trigger_ddl.c) and again on the
 * first row of every statement it fires in, for triggers created while the
 * event trigger was disabled or before the extension was installed.  What
 * the check finds (the column's number) and whatever else a trigger needs
 * about the table is then kept in fn_extra for the rest of the statement,
 * so that a row costs no catalog lookup.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/machines/trigger.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_trigger.h"
#include "executor/spi.h"

#include "machines/triggers.h"

/*
 * trigger_column
 *		The column the trigger's argument argno names; an error if the table
 *		has no such column.  With a role ("state"), the detail says which
 *		trigger names it as what.
 */
static AttrNumber
trigger_column(Relation rel, Trigger *trigger, int argno, const char *role)
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
 * trigger_protocol_error
 *		A trigger defined for the wrong timing, level or event.
 */
static void
trigger_protocol_error(const TriggerProtocol *protocol, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			 errmsg("%s: %s", protocol->funcname,
					protocol->timing_message ? protocol->timing_message : what)));
}

/*
 * IdempotencyTriggerCheck
 *		Check a trigger against its protocol: row level, timing, events and
 *		arguments, and that the column it names exists (and, for a BEFORE
 *		trigger, is not generated).  Returns the column's number.
 */
AttrNumber
IdempotencyTriggerCheck(const TriggerProtocol *protocol, Relation rel, Trigger *trigger)
{
	int16		tgtype = trigger->tgtype;
	AttrNumber	attnum;

	if (!TRIGGER_FOR_ROW(tgtype))
		trigger_protocol_error(protocol, "must be fired for each row");
	if (protocol->before ? !TRIGGER_FOR_BEFORE(tgtype) : !TRIGGER_FOR_AFTER(tgtype))
		trigger_protocol_error(protocol, protocol->before ?
							   "must be fired before the event" :
							   "must be fired after the event");
	if (TRIGGER_FOR_DELETE(tgtype) || TRIGGER_FOR_TRUNCATE(tgtype) ||
		(protocol->update_only &&
		 (TRIGGER_FOR_INSERT(tgtype) || !TRIGGER_FOR_UPDATE(tgtype))))
		trigger_protocol_error(protocol, "must be fired for INSERT or UPDATE");
	if (trigger->tgnargs != protocol->nargs)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s: trigger \"%s\" must have %s",
						protocol->funcname, trigger->tgname, protocol->args_message)));
	attnum = trigger_column(rel, trigger, protocol->column_arg, protocol->column_role);

	/*
	 * A BEFORE trigger sees a stored generated column before it is computed
	 * (NULL in a new row, the old value in an update), so it could neither
	 * check nor set it.
	 */
	if (protocol->before && TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attgenerated)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("%s: column \"%s\" of relation \"%s\" is a generated column",
						protocol->funcname, trigger->tgargs[protocol->column_arg],
						RelationGetRelationName(rel)),
				 errdetail("Trigger \"%s\" fires before the column is computed, so it never sees the value written.",
						   trigger->tgname)));
	return attnum;
}

/*
 * IdempotencyTriggerCache
 *		The trigger's data for this statement: checked and built on its
 *		first row, from fn_extra afterwards.  Also refuses a call that is not
 *		a trigger's.
 */
TriggerCache *
IdempotencyTriggerCache(FunctionCallInfo fcinfo, const TriggerProtocol *protocol)
{
	TriggerCache *cache = fcinfo->flinfo->fn_extra;
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	AttrNumber	attnum;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s: must be called as trigger", protocol->funcname)));

	if (cache != NULL && cache->tgoid == trigdata->tg_trigger->tgoid)
		return cache;

	attnum = protocol->check(trigdata->tg_relation, trigdata->tg_trigger);
	Assert(protocol->cache_size >= sizeof(TriggerCache));
	cache = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, protocol->cache_size);
	cache->tgoid = trigdata->tg_trigger->tgoid;
	cache->attnum = attnum;
	if (protocol->build != NULL)
		protocol->build(cache, trigdata->tg_relation, trigdata->tg_trigger,
						fcinfo->flinfo->fn_mcxt);
	fcinfo->flinfo->fn_extra = cache;
	return cache;
}
