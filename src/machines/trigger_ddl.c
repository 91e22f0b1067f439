/*-------------------------------------------------------------------------
 *
 * trigger_ddl.c
 *	  idempotency.check_new_triggers(): the event trigger that checks a new
 *	  check_transition, record_transition or version_guard trigger when it
 *	  is created, instead of at the first row written.
 *
 * PostgreSQL calls a trigger function only when a row is written, and has no
 * CREATE TRIGGER hook for the trigger's own function.  The install script
 * therefore creates an event trigger on ddl_command_end for CREATE TRIGGER, a
 * member of the extension, which runs the same checks the trigger functions
 * run when they fire (each one's TriggerProtocol, trigger.c) and, for
 * check_transition, also requires the state machine to exist.  An error aborts
 * the CREATE TRIGGER.
 *
 * Our trigger functions are recognised by OID, never by name: a new
 * trigger's function must be a member of the same extension as this event
 * trigger's own function (pg_depend), and its C entry point must be one of
 * ours (the address fmgr_info resolves it to).  A function of the same name
 * in another schema, or a SQL wrapper, is not ours and is left alone.
 *
 * Nothing is checked when check_function_bodies is off: pg_dump's scripts
 * turn it off, and a restore may create a trigger before the state
 * machines' rows or the table's primary key are back.  Nor in a binary
 * upgrade.  The trigger functions repeat their checks when they fire, so a
 * trigger created then (or while the event trigger was disabled) still
 * cannot misbehave.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/machines/trigger_ddl.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"

#include "frame/sqlcall.h"
#include "machines/triggers.h"

/*
 * The triggers the current command created: PostgreSQL's catalog only, read
 * as whoever runs the command, so that a CREATE TRIGGER on any table of the
 * database does not depend on the state of the extension's objects.
 */
static SqlStatement new_triggers_stmt = {
	.sql = "SELECT c.objid FROM pg_catalog.pg_event_trigger_ddl_commands() AS c"
	" WHERE c.classid OPERATOR(pg_catalog.=) $1",
	.nargs = 1,
	.argtypes = {OIDOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
	.snapshot = SQL_SNAPSHOT_CALLER,
	.catalog_only = true,
};

/*
 * trigger_ddl_new_triggers
 *		The OIDs of the triggers the current command created.
 */
static List *
trigger_ddl_new_triggers(void)
{
	Datum		values[1] = {ObjectIdGetDatum(TriggerRelationId)};
	List	   *result = NIL;
	SqlCall		call;
	uint64		n;

	SqlCallBeginAsCaller(&call);
	n = SqlExecute(&new_triggers_stmt, values, NULL);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		objid = SqlResult(i, 1, &isnull);
		MemoryContext oldcxt = MemoryContextSwitchTo(call.caller_cxt);

		if (!isnull)
			result = lappend_oid(result, DatumGetObjectId(objid));
		MemoryContextSwitchTo(oldcxt);
	}
	SqlCallEnd(&call);
	return result;
}

/*
 * trigger_ddl_check
 *		Check one new trigger, if its function is one of ours.
 */
static void
trigger_ddl_check(Oid extoid, Oid tgoid)
{
	Relation	tgrel;
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			tgrelid;
	Oid			tgfoid;
	FmgrInfo	flinfo;
	Relation	rel;
	Trigger    *trigger = NULL;

	tgrel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyInit(&skey, Anum_pg_trigger_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(tgoid));
	scan = systable_beginscan(tgrel, TriggerOidIndexId, true, NULL, 1, &skey);
	tuple = systable_getnext(scan);
	if (!HeapTupleIsValid(tuple))
	{
		/* created and dropped again by the same command: nothing to check */
		systable_endscan(scan);
		table_close(tgrel, AccessShareLock);
		return;
	}
	tgrelid = ((Form_pg_trigger) GETSTRUCT(tuple))->tgrelid;
	tgfoid = ((Form_pg_trigger) GETSTRUCT(tuple))->tgfoid;
	systable_endscan(scan);
	table_close(tgrel, AccessShareLock);

	if (getExtensionOfObject(ProcedureRelationId, tgfoid) != extoid)
		return;
	fmgr_info(tgfoid, &flinfo);
	if (flinfo.fn_addr != idempotency_check_transition &&
		flinfo.fn_addr != idempotency_record_transition &&
		flinfo.fn_addr != idempotency_version_guard)
		return;

	rel = relation_open(tgrelid, AccessShareLock);
	for (int i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
		if (rel->trigdesc->triggers[i].tgoid == tgoid)
			trigger = &rel->trigdesc->triggers[i];
	if (trigger == NULL)
		elog(ERROR, "could not find trigger %u of relation \"%s\"",
			 tgoid, RelationGetRelationName(rel));

	if (flinfo.fn_addr == idempotency_check_transition)
	{
		(void) TransitionTriggerProtocol.check(rel, trigger);
		TransitionCheckMachine(trigger);
	}
	else if (flinfo.fn_addr == idempotency_record_transition)
		(void) HistoryTriggerProtocol.check(rel, trigger);
	else
		(void) VersionGuardTriggerProtocol.check(rel, trigger);

	relation_close(rel, AccessShareLock);
}

PG_FUNCTION_INFO_V1(idempotency_check_new_triggers);

/*
 * idempotency_check_new_triggers
 *		ON ddl_command_end WHEN TAG IN ('CREATE TRIGGER')
 */
Datum
idempotency_check_new_triggers(PG_FUNCTION_ARGS)
{
	Oid			extoid;
	List	   *triggers;
	ListCell   *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("check_new_triggers: must be called as event trigger")));
	if (!check_function_bodies || IsBinaryUpgrade)
		PG_RETURN_VOID();

	/*
	 * Citus creates a distributed table's triggers on its shards through
	 * connections of its own; the trigger was checked on the coordinator when
	 * it was created there, and a check on a shard could not read the state
	 * machines (a distributed query from a query on a shard).
	 */
	{
		const char *app = GetConfigOption("application_name", true, false);

		if (app != NULL && strncmp(app, "citus_internal", strlen("citus_internal")) == 0)
			PG_RETURN_VOID();
	}

	/* our extension: the one this function belongs to */
	extoid = getExtensionOfObject(ProcedureRelationId, fcinfo->flinfo->fn_oid);
	if (!OidIsValid(extoid))
		PG_RETURN_VOID();

	triggers = trigger_ddl_new_triggers();
	foreach(lc, triggers)
		trigger_ddl_check(extoid, lfirst_oid(lc));
	PG_RETURN_VOID();
}
