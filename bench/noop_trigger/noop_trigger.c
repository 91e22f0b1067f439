/*-------------------------------------------------------------------------
 *
 * noop_trigger.c
 *	  A C trigger that returns the new row unchanged: the floor of what
 *	  PostgreSQL's trigger machinery costs per row, for bench/transition.sh.
 *	  Not part of the extension.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  bench/noop_trigger/noop_trigger.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(noop_trigger);

/*
 * noop_trigger
 *		Return NEW (or the inserted row) as it is.
 */
Datum
noop_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "noop_trigger: not called as trigger");
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		return PointerGetDatum(trigdata->tg_newtuple);
	return PointerGetDatum(trigdata->tg_trigtuple);
}
