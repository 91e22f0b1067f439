/*-------------------------------------------------------------------------
 *
 * triggers.h
 *	  What the extension's three row triggers share: how each must be
 *	  defined, checked when it is created and when it fires, and the data
 *	  each keeps per statement.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/machines/triggers.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_TRIGGERS_H
#define IDEMPOTENCY_TRIGGERS_H

#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/rel.h"

/*
 * The data a trigger keeps in fn_extra for the statement it fires in (the
 * executor gives every statement a new FmgrInfo, so nothing in it outlives
 * an ALTER TABLE): each trigger's own struct begins with this.
 */
typedef struct TriggerCache
{
	Oid			tgoid;			/* the trigger it was built for */
	AttrNumber	attnum;			/* the column the trigger names */
} TriggerCache;

/* How one of the trigger functions must be defined. */
typedef struct TriggerProtocol
{
	const char *funcname;		/* for messages: "check_transition" */
	bool		before;			/* BEFORE the event; else AFTER */
	bool		update_only;	/* UPDATE alone; else INSERT and/or UPDATE */
	const char *timing_message; /* one message for any wrong timing, level or
								 * event; NULL for one message each */
	int			nargs;
	const char *args_message;	/* "two arguments, the ..." */
	int			column_arg;		/* the argument that names the column */
	const char *column_role;	/* "state", for the detail; or NULL */

	/* the whole check: IdempotencyTriggerCheck and the trigger's own */
	AttrNumber	(*check) (Relation rel, Trigger *trigger);
	Size		cache_size;		/* of the struct beginning with TriggerCache */
	/* fills in the rest of that struct, or NULL */
	void		(*build) (TriggerCache *cache, Relation rel, Trigger *trigger,
						  MemoryContext cxt);
} TriggerProtocol;

/* trigger.c */
extern AttrNumber IdempotencyTriggerCheck(const TriggerProtocol *protocol,
										  Relation rel, Trigger *trigger);
extern TriggerCache *IdempotencyTriggerCache(FunctionCallInfo fcinfo,
											 const TriggerProtocol *protocol);

/*
 * Each trigger's protocol; trigger_ddl.c runs their checks when a trigger
 * is created (check_transition's also asks for the machine to exist).
 */
extern const TriggerProtocol TransitionTriggerProtocol;
extern const TriggerProtocol HistoryTriggerProtocol;
extern const TriggerProtocol VersionGuardTriggerProtocol;
extern void TransitionCheckMachine(Trigger *trigger);

/* version_guard.c: the executor hooks that tell MERGE's actions apart */
extern void VersionGuardInit(void);

/* The trigger functions themselves, which trigger_ddl.c recognises. */
extern PGDLLEXPORT Datum idempotency_check_transition(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum idempotency_record_transition(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum idempotency_version_guard(PG_FUNCTION_ARGS);

#endif							/* IDEMPOTENCY_TRIGGERS_H */
