/*-------------------------------------------------------------------------
 *
 * sqlcall.h
 *	  The frame in which the extension runs its SQL: SPI connected, running
 *	  as its tables' owner on behalf of a caller, with kept plans.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/frame/sqlcall.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_SQLCALL_H
#define IDEMPOTENCY_SQLCALL_H

#include "executor/spi.h"
#include "utils/timestamp.h"

#include "base/compat.h"

/* Stands for idempotency.key's OID in a statement's argument types. */
#define SQL_KEYTYPE InvalidOid

#define SQL_MAX_ARGS 20

/*
 * Which snapshot a statement reads with.
 */
typedef enum SqlSnapshot
{
	/* a new one for each statement, which may write (the default) */
	SQL_SNAPSHOT_NEW = 0,
	/* the caller's, read-only: a STABLE function's read, a catalog query */
	SQL_SNAPSHOT_CALLER,

	/*
	 * the latest committed state, read-only and without triggers: for a
	 * per-backend cache, which must never take back a definition older than
	 * the newest committed one, whatever the transaction's snapshot
	 */
	SQL_SNAPSHOT_LATEST,

	/*
	 * as SQL_SNAPSHOT_NEW (it may write, fires triggers and sees the
	 * transaction's own earlier writes), but of the latest committed state
	 * under REPEATABLE READ and SERIALIZABLE too, as RI checks read: for a
	 * statement that a lock has ordered after writers whose commits it must
	 * see, whatever the transaction's snapshot
	 */
	SQL_SNAPSHOT_NEW_LATEST,
} SqlSnapshot;

/*
 * One statement the extension runs, defined (as a static variable) beside
 * the code that fills its parameters and reads its result.  Its plan is
 * prepared on first use and kept until the extension's objects change.
 */
typedef struct SqlStatement
{
	const char *sql;
	int			nargs;
	Oid			argtypes[SQL_MAX_ARGS]; /* SQL_KEYTYPE for idempotency.key */
	int			expected_rc;	/* SPI_OK_... */
	int			natts;			/* columns of the rows it returns, or 0 */

	/*
	 * Plan for the actual values every time.  The cleanup's statements need
	 * it: a generic plan guesses LIMIT $2 and the share of expired rows, and
	 * on a large table may guess a hash join over all of it; a batch runs
	 * rarely enough that planning it each time costs nothing.
	 */
	bool		custom_plan;

	SqlSnapshot snapshot;

	/*
	 * Names none of the extension's objects, only PostgreSQL's or Citus's
	 * (pg_event_trigger_ddl_commands(), pg_dist_shard): runs without checking
	 * them, from an event trigger on anyone's CREATE TRIGGER or a trigger on
	 * a shard.  Its plan is kept and dropped with the others.
	 */
	bool		catalog_only;

	/* kept by sqlcall.c */
	SPIPlanPtr	plan;
	struct SqlStatement *next_prepared;
} SqlStatement;

/*
 * A call in progress: who called (the role name every record is filed
 * under, owner.c; 0 in a frame entered with SqlCallBeginAsCaller), one clock
 * reading for the whole call, and what to restore.
 */
typedef struct SqlCall
{
	Datum		owner;			/* caller's role name, as text */
	TimestampTz now;
	MemoryContext caller_cxt;	/* for results that outlive SPI */
	Oid			save_userid;
	int			save_sec_context;
} SqlCall;

extern void SqlCacheInvalidate(Oid relid);
extern void SqlCacheCheck(void);
extern void SqlCallBeginAsCaller(SqlCall *call);
extern void SqlCallBeginAsTablesOwner(SqlCall *call);
extern void SqlCallEnd(SqlCall *call);
extern uint64 SqlExecute(SqlStatement *stmt, Datum *values, const char *nulls);
extern uint64 SqlExecuteOnce(const char *sql, int nargs, Oid *argtypes, Datum *values,
							 int expected_rc);
extern Datum SqlResult(uint64 row, int col, bool *isnull);
extern Datum SqlKeep(SqlCall *call, Datum value);
extern bool SqlTry(void (*fn) (void *arg), void *arg, int sqlerrcode);
extern pg_noreturn void SqlRethrowHidingQuery(MemoryContext cxt) pg_attribute_noreturn();

#endif							/* IDEMPOTENCY_SQLCALL_H */
