/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  Background cleanup of expired records: a launcher and short-lived
 *	  per-database workers.
 *
 * Design.  One launcher, registered at server start when the library is
 * preloaded, connects to no database (it reads only the shared catalog
 * pg_database).  Every idempotency.cleanup_interval it lists the databases
 * that accept connections and are not templates and, one at a time, starts a
 * dynamic worker for each.  The worker connects to its database, returns at
 * once if the extension is not installed there (or the server is a Citus
 * worker node), and otherwise calls idempotency.cleanup() batch after batch,
 * each batch its own short transaction, until a batch comes back short.  Then
 * it exits.
 *
 * Why short-lived workers: a process that stays connected to a database makes
 * DROP DATABASE, ALTER DATABASE RENAME and CREATE DATABASE ... TEMPLATE of it
 * wait and then fail; ours stays only for the few milliseconds a pass takes,
 * which those commands' own five-second wait absorbs.  Databases created or
 * dropped after start-up are picked up at the next pass.  Template databases
 * are never visited, so CREATE DATABASE from template1 never finds us there.
 *
 * The launcher starts only once recovery has finished, so a hot standby
 * never runs it, and it starts after promotion; it also checks
 * RecoveryInProgress() before each pass.  The postmaster restarts it after a
 * crash.  A failed pass is logged, recorded in shared memory (the
 * cleanup_status view) and retried after a backoff that doubles up to an
 * hour; if max_worker_processes is exhausted the launcher logs it and tries
 * again at the next pass, and idempotency.cleanup() keeps working by hand.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "idempotency.h"

/* The longest a failing database waits before its next try, in ms. */
#define CLEANUP_MAX_BACKOFF_MS (3600 * 1000L)

/* How long the launcher sleeps while the cleanup is turned off, in ms. */
#define LAUNCHER_IDLE_MS (60 * 1000L)

PGDLLEXPORT void idempotency_launcher_main(Datum main_arg);
PGDLLEXPORT void idempotency_cleanup_main(Datum main_arg);

/*
 * IdempotencyWorkerRegister
 *		Register the launcher; called from _PG_init while preloading.
 */
void
IdempotencyWorkerRegister(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "idempotency");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "idempotency_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "idempotency launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "idempotency launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * launcher_databases
 *		The OIDs of the databases a pass visits, allocated in cxt.
 */
static List *
launcher_databases(MemoryContext cxt)
{
	List	   *dbs = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();

	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext oldcxt;

		if (!db->datallowconn || db->datistemplate || database_is_invalid_form(db))
			continue;
		oldcxt = MemoryContextSwitchTo(cxt);
		dbs = lappend_oid(dbs, db->oid);
		MemoryContextSwitchTo(oldcxt);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);

	CommitTransactionCommand();
	return dbs;
}

/*
 * launcher_cleanup_role
 *		The OID of idempotency.cleanup_role, InvalidOid for the bootstrap
 *		superuser; false if the role does not exist (the pass is skipped).
 */
static bool
launcher_cleanup_role(Oid *roleid)
{
	*roleid = InvalidOid;
	if (idempotency_cleanup_role == NULL || idempotency_cleanup_role[0] == '\0')
		return true;

	StartTransactionCommand();
	*roleid = get_role_oid(idempotency_cleanup_role, true);
	CommitTransactionCommand();
	if (!OidIsValid(*roleid))
	{
		ereport(WARNING,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role \"%s\" named by \"idempotency.cleanup_role\" does not exist",
						idempotency_cleanup_role),
				 errdetail("Expired idempotency records are not being cleaned.")));
		return false;
	}
	return true;
}

/*
 * launcher_due
 *		Whether a database's backoff allows a pass now.
 */
static bool
launcher_due(Oid dbid, TimestampTz now)
{
	bool		due = true;

	LWLockAcquire(IdempotencyShared->lock, LW_SHARED);
	for (int i = 0; i < IDEMPOTENCY_MAX_DATABASES; i++)
	{
		CleanupStatus *slot = &IdempotencyShared->cleanup[i];

		if (slot->dbid == dbid)
		{
			due = slot->next_run <= now;
			break;
		}
	}
	LWLockRelease(IdempotencyShared->lock);
	return due;
}

/*
 * launcher_forget_dropped
 *		Free the status slots of databases that are gone.
 */
static void
launcher_forget_dropped(List *dbs)
{
	LWLockAcquire(IdempotencyShared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < IDEMPOTENCY_MAX_DATABASES; i++)
	{
		CleanupStatus *slot = &IdempotencyShared->cleanup[i];

		if (slot->dbid != InvalidOid && !list_member_oid(dbs, slot->dbid))
			slot->dbid = InvalidOid;
	}
	LWLockRelease(IdempotencyShared->lock);
}

/*
 * launcher_run_worker
 *		Start the cleanup worker for one database and wait until it exits.
 *		Returns false if no worker could be started.
 */
static bool
launcher_run_worker(Oid dbid, Oid roleid)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	pid_t		pid;

	memset(&worker, 0, sizeof(worker));
	/* on 18, DROP DATABASE and the like terminate it rather than wait */
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION |
		IDEMPOTENCY_BGWORKER_INTERRUPTIBLE;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "idempotency");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "idempotency_cleanup_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "idempotency cleanup of database %u", dbid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "idempotency cleanup");
	worker.bgw_main_arg = ObjectIdGetDatum(dbid);
	worker.bgw_notify_pid = MyProcPid;
	memcpy(worker.bgw_extra, &roleid, sizeof(Oid));

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(LOG,
				(errmsg("could not start an idempotency cleanup worker: no background worker slot is free"),
				 errhint("Raise \"max_worker_processes\"; meanwhile idempotency.cleanup() can be called by hand.")));
		return false;
	}

	if (WaitForBackgroundWorkerStartup(handle, &pid) == BGWH_POSTMASTER_DIED ||
		WaitForBackgroundWorkerShutdown(handle) == BGWH_POSTMASTER_DIED)
		proc_exit(1);
	pfree(handle);
	return true;
}

/*
 * launcher_pass
 *		Visit every database once.
 */
static void
launcher_pass(MemoryContext passcxt)
{
	List	   *dbs;
	Oid			roleid;
	ListCell   *lc;

	if (!launcher_cleanup_role(&roleid))
		return;

	dbs = launcher_databases(passcxt);
	foreach(lc, dbs)
	{
		Oid			dbid = lfirst_oid(lc);

		CHECK_FOR_INTERRUPTS();
		if (RecoveryInProgress() || idempotency_cleanup_interval == 0)
			break;
		if (!launcher_due(dbid, GetCurrentTimestamp()))
			continue;
		if (!launcher_run_worker(dbid, roleid))
			break;
	}
	launcher_forget_dropped(dbs);
}

/*
 * launcher_report_interval
 *		Log the cleanup schedule, so that an operator (and a test) can see a
 *		change of idempotency.cleanup_interval take effect.
 */
static void
launcher_report_interval(void)
{
	if (idempotency_cleanup_interval == 0)
		ereport(LOG,
				(errmsg("idempotency background cleanup is off"),
				 errdetail("\"idempotency.cleanup_interval\" is 0.")));
	else
		ereport(LOG,
				(errmsg("idempotency background cleanup runs every %d s in batches of %d records",
						idempotency_cleanup_interval, idempotency_cleanup_batch_size)));
}

/*
 * idempotency_launcher_main
 *		The launcher's main loop.
 */
void
idempotency_launcher_main(Datum main_arg)
{
	MemoryContext passcxt;
	TimestampTz last_pass;
	uint32		wait_event;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	wait_event = IdempotencyWaitEventNew("IdempotencyLauncherMain");

	passcxt = AllocSetContextCreate(TopMemoryContext, "idempotency launcher pass context",
									ALLOCSET_DEFAULT_SIZES);
	last_pass = GetCurrentTimestamp();
	launcher_report_interval();

	for (;;)
	{
		long		timeout = LAUNCHER_IDLE_MS;

		if (idempotency_cleanup_interval > 0)
		{
			TimestampTz next = TimestampTzPlusMilliseconds(last_pass,
														   idempotency_cleanup_interval * 1000L);

			timeout = Max(TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next), 0);
		}

		if (timeout > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 timeout, wait_event);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			int			old_interval = idempotency_cleanup_interval;
			int			old_batch_size = idempotency_cleanup_batch_size;

			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (old_interval != idempotency_cleanup_interval ||
				old_batch_size != idempotency_cleanup_batch_size)
				launcher_report_interval();
			continue;			/* the interval may have changed */
		}

		if (timeout > 0 || idempotency_cleanup_interval == 0 || RecoveryInProgress())
			continue;

		last_pass = GetCurrentTimestamp();
		launcher_pass(passcxt);
		MemoryContextReset(passcxt);
	}
}

/*
 * cleanup_should_run
 *		Whether this database has the extension and this node deletes (a
 *		plain server, or a Citus coordinator; never a Citus worker node).
 */
static bool
cleanup_should_run(void)
{
	bool		run;
	bool		isnull;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	run = OidIsValid(get_extension_oid("idempotency", true));
	if (run && OidIsValid(get_extension_oid("citus", true)))
	{
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (SPI_execute("SELECT pg_catalog.citus_is_coordinator()", true, 1) != SPI_OK_SELECT)
			elog(ERROR, "SPI_execute failed");
		run = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) &&
			!isnull;
		SPI_finish();
		PopActiveSnapshot();
	}
	CommitTransactionCommand();
	return run;
}

/*
 * cleanup_batch
 *		One batch through the SQL function, in a transaction of its own.
 */
static int64
cleanup_batch(int32 batch_size)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(batch_size)};
	bool		isnull;
	int64		deleted;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "SELECT idempotency.cleanup($1)");

	if (SPI_execute_with_args("SELECT idempotency.cleanup($1)", 1, argtypes, values,
							  NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "SPI_execute_with_args failed");
	deleted = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(true);
	pgstat_report_activity(STATE_IDLE, NULL);
	return deleted;
}

/*
 * cleanup_record
 *		Update this database's status slot.  error is NULL after a batch or a
 *		finished pass (done), the message after a failure.
 */
static void
cleanup_record(Oid dbid, int64 deleted, bool done, const char *error)
{
	CleanupStatus *slot;
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(IdempotencyShared->lock, LW_EXCLUSIVE);
	slot = CleanupStatusFor(dbid);
	if (slot != NULL)
	{
		slot->last_deleted += deleted;
		slot->total_deleted += deleted;
		if (error != NULL)
		{
			long		backoff = Min((long) idempotency_cleanup_interval * 1000L << Min(slot->failures, 20),
									  CLEANUP_MAX_BACKOFF_MS);

			slot->failures++;
			slot->last_end = now;
			slot->next_run = TimestampTzPlusMilliseconds(now, backoff);
			strlcpy(slot->last_error, error, CLEANUP_ERROR_LEN);
		}
		else if (done)
		{
			slot->failures = 0;
			slot->last_end = now;
			slot->next_run = 0;
			slot->last_error[0] = '\0';
		}
	}
	LWLockRelease(IdempotencyShared->lock);
}

/*
 * idempotency_cleanup_main
 *		One pass over one database, then exit.
 */
void
idempotency_cleanup_main(Datum main_arg)
{
	Oid			dbid = DatumGetObjectId(main_arg);
	Oid			roleid;
	MemoryContext workercxt = CurrentMemoryContext;
	uint32		wait_event;

	memcpy(&roleid, MyBgworkerEntry->bgw_extra, sizeof(Oid));

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dbid, roleid, 0);
	wait_event = IdempotencyWaitEventNew("IdempotencyCleanupThrottle");

	if (!cleanup_should_run())
		proc_exit(0);

	LWLockAcquire(IdempotencyShared->lock, LW_EXCLUSIVE);
	{
		CleanupStatus *slot = CleanupStatusFor(dbid);

		if (slot != NULL)
		{
			slot->last_start = GetCurrentTimestamp();
			slot->last_deleted = 0;
		}
	}
	LWLockRelease(IdempotencyShared->lock);

	PG_TRY();
	{
		for (;;)
		{
			int32		batch_size = idempotency_cleanup_batch_size;
			int64		deleted = cleanup_batch(batch_size);

			cleanup_record(dbid, deleted, false, NULL);
			if (deleted < batch_size)
				break;

			/* keep under the rate cap, and answer SIGTERM or a reload */
			if (idempotency_cleanup_max_rows_per_second > 0)
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 deleted * 1000L / idempotency_cleanup_max_rows_per_second,
								 wait_event);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
			if (ConfigReloadPending)
			{
				ConfigReloadPending = false;
				ProcessConfigFile(PGC_SIGHUP);
			}
			if (idempotency_cleanup_interval == 0)
				break;
		}
		cleanup_record(dbid, 0, true, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(workercxt);
		edata = CopyErrorData();
		cleanup_record(dbid, 0, true, edata->message);
		PG_RE_THROW();
	}
	PG_END_TRY();

	proc_exit(0);
}
