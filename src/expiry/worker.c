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
 * once if the extension is not installed there, and otherwise runs the C code
 * of idempotency.cleanup() batch after batch (directly, never a function
 * looked up by name), each batch its own short transaction, until a batch
 * comes back short and the registry's sweep (sweep.c: each batch sweeps a
 * bounded number of the registry's blocks) has covered the whole registry
 * since the pass began.  Then it exits.  On a Citus cluster every node runs
 * it: the cleanup itself knows what each node deletes.
 *
 * The role the workers connect as (idempotency.cleanup_role, or the
 * bootstrap superuser) needs LOGIN and CONNECT on the database and nothing
 * else: the deletes run as the registry's owner.  The launcher checks both
 * before it starts a worker, so that a missing one is named in
 * cleanup_status instead of killing the worker at start-up.
 *
 * Why short-lived workers: a process that stays connected to a database makes
 * DROP DATABASE, ALTER DATABASE RENAME and CREATE DATABASE ... TEMPLATE of it
 * wait and then fail (after five seconds).  So a worker never pauses and
 * never stays long: it deletes back to back for at most about a second
 * (CLEANUP_WORKER_MAX_MS), or as many rows as
 * idempotency.cleanup_max_rows_per_second allows in that second, and exits.
 * If expired rows are left it says so in its status slot (backlog), with the
 * time the rate cap allows the next batch (next_run); the launcher, which is
 * connected to no database, waits until then and starts the next worker for
 * the rest (a database without a status slot, beyond the
 * IDEMPOTENCY_MAX_DATABASES tracked, gets one worker per pass).  Those
 * commands lock the database before they wait for other sessions to leave
 * it, and a worker that starts meanwhile waits for that lock before it
 * counts as connected; so they only ever wait for the one worker that is
 * connected, for about a second.  Databases created or
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
 *	  src/expiry/worker.c
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
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
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
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "base/shmem.h"
#include "expiry/cleanup.h"
#include "expiry/sweep.h"
#include "objects/extension.h"

/* The longest a failing database waits before its next try, in ms. */
#define CLEANUP_MAX_BACKOFF_MS (3600 * 1000L)

/* How long the launcher sleeps while the cleanup is turned off, in ms. */
#define LAUNCHER_IDLE_MS (60 * 1000L)

/*
 * How long a cleanup worker deletes before it leaves the rest of a backlog to
 * the next one, in ms: well under the five seconds DROP DATABASE waits.
 */
#define CLEANUP_WORKER_MAX_MS 1000L

/* bgw_extra of a cleanup worker: the role's OID, then this flag. */
#define CLEANUP_EXTRA_FIRST sizeof(Oid) /* the first worker of a pass */

PGDLLEXPORT void idempotency_launcher_main(Datum main_arg);
PGDLLEXPORT void idempotency_cleanup_main(Datum main_arg);

static void launcher_report_interval(void);

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
 *		The OIDs of the databases a pass visits, allocated in cxt, oldest
 *		first: pg_database's physical order changes as its rows are updated
 *		and pruned, and an operator watching cleanup_status should see the
 *		same order at every pass.
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
	list_sort(dbs, list_oid_cmp);
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

static void cleanup_record(Oid dbid, int64 deleted, bool done, const char *error);

/*
 * launcher_role_can_connect
 *		Whether idempotency.cleanup_role may log in and connect to a database.
 *		A worker that may not would die at start-up with nothing to show for
 *		it; instead the launcher skips the database and records in
 *		cleanup_status (and the log) which role lacks which privilege, and
 *		the backoff spaces out the next tries.
 */
static bool
launcher_role_can_connect(Oid dbid, Oid roleid)
{
	HeapTuple	tup;
	char		error[CLEANUP_ERROR_LEN] = "";
	char	   *hint = NULL;
	char	   *datname;

	if (!OidIsValid(roleid))
		return true;			/* the bootstrap superuser */

	StartTransactionCommand();
	datname = get_database_name(dbid);
	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(roleid));
	if (HeapTupleIsValid(tup) && datname != NULL)
	{
		Form_pg_authid role = (Form_pg_authid) GETSTRUCT(tup);
		char	   *rolname = pstrdup(NameStr(role->rolname));

		if (!role->rolcanlogin)
		{
			snprintf(error, sizeof(error),
					 "role \"%s\" named by \"idempotency.cleanup_role\" is not permitted to log in",
					 rolname);
			hint = psprintf("ALTER ROLE %s LOGIN", quote_identifier(rolname));
		}
		else if (IdempotencyDatabaseAclCheck(dbid, roleid, ACL_CONNECT) != ACLCHECK_OK)
		{
			snprintf(error, sizeof(error),
					 "role \"%s\" named by \"idempotency.cleanup_role\" has no CONNECT privilege on database \"%s\"",
					 rolname, datname);
			hint = psprintf("GRANT CONNECT ON DATABASE %s TO %s",
							quote_identifier(datname), quote_identifier(rolname));
		}
	}
	if (HeapTupleIsValid(tup))
		ReleaseSysCache(tup);

	if (error[0] != '\0')
	{
		ereport(WARNING,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s", error),
				 errdetail("Expired idempotency records in database \"%s\" are not being cleaned.",
						   datname),
				 errhint("Run %s.", hint)));
		/* what cleanup_status shows: the error and the missing grant */
		strlcat(error, ": it needs ", sizeof(error));
		strlcat(error, hint, sizeof(error));
	}
	CommitTransactionCommand();

	if (error[0] == '\0')
		return true;

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
	cleanup_record(dbid, 0, true, error);
	return false;
}

/*
 * launcher_start_worker
 *		Start a cleanup worker for one database and wait until it exits.
 *		Returns false if no worker could be started.
 */
static bool
launcher_start_worker(Oid dbid, Oid roleid, bool first)
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
	worker.bgw_extra[CLEANUP_EXTRA_FIRST] = first;

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
 * launcher_backlog
 *		Whether the worker that just exited left expired rows, and when the
 *		rate cap allows the next batch.  Clears the flag for the next worker:
 *		one that dies without reporting (its database was dropped, say) ends
 *		the database's pass.  Looks up the slot without taking one, so that a
 *		database without the extension gets none.
 */
static bool
launcher_backlog(Oid dbid, TimestampTz *resume_at)
{
	bool		backlog = false;

	LWLockAcquire(IdempotencyShared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < IDEMPOTENCY_MAX_DATABASES; i++)
	{
		CleanupStatus *slot = &IdempotencyShared->cleanup[i];

		if (slot->dbid == dbid)
		{
			backlog = slot->backlog;
			*resume_at = slot->next_run;
			slot->backlog = false;
			break;
		}
	}
	LWLockRelease(IdempotencyShared->lock);
	return backlog;
}

/*
 * launcher_reload_config
 *		Apply a SIGHUP, logging a change of schedule.
 */
static void
launcher_reload_config(void)
{
	int			old_interval = idempotency_cleanup_interval;
	int			old_batch_size = idempotency_cleanup_batch_size;

	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	if (old_interval != idempotency_cleanup_interval ||
		old_batch_size != idempotency_cleanup_batch_size)
		launcher_report_interval();
}

/*
 * launcher_pause
 *		Between two workers of one database: wait until resume_at, connected
 *		to no database, answering SIGTERM and reloads.  False if the cleanup
 *		was turned off meanwhile.
 */
static bool
launcher_pause(TimestampTz resume_at)
{
	static uint32 wait_event = 0;

	/* the rate cap's pause, under its own name in pg_stat_activity (17+) */
	if (wait_event == 0)
		wait_event = IdempotencyWaitEventNew("IdempotencyCleanupThrottle");

	for (;;)
	{
		long		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), resume_at);

		if (timeout > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 timeout, wait_event);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
			launcher_reload_config();
		if (idempotency_cleanup_interval == 0)
			return false;
		if (timeout <= 0)
			return true;
	}
}

/*
 * launcher_database_usable
 *		Whether a worker can still connect to the database: it may have been
 *		dropped, or closed to connections, while the launcher paused.
 */
static bool
launcher_database_usable(Oid dbid)
{
	HeapTuple	tup;
	bool		usable = false;

	StartTransactionCommand();
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dbid));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		usable = db->datallowconn && !db->datistemplate && !database_is_invalid_form(db);
		ReleaseSysCache(tup);
	}
	CommitTransactionCommand();
	return usable;
}

/*
 * launcher_run_worker
 *		Clean one database: start a worker and wait until it exits; while the
 *		workers leave a backlog, pause as long as the rate cap says and start
 *		the next one.  The pause is the launcher's, connected to no database,
 *		so that nothing holds the database between two workers.  Returns false
 *		if no worker could be started.
 */
static bool
launcher_run_worker(Oid dbid, Oid roleid)
{
	TimestampTz resume_at = 0;

	if (!launcher_start_worker(dbid, roleid, true))
		return false;
	while (launcher_backlog(dbid, &resume_at))
	{
		if (!launcher_pause(resume_at) || !launcher_database_usable(dbid))
			break;
		if (!launcher_start_worker(dbid, roleid, false))
			return false;
	}
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
		if (!launcher_role_can_connect(dbid, roleid))
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
			launcher_reload_config();
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
 * cleanup_record_skipped
 *		This database's SQL objects are not the ones this library was built
 *		for: note why in its status slot,
 *		without counting a failure, so that the launcher keeps its usual
 *		schedule.  Returns whether the reason is new, to be logged.
 */
static bool
cleanup_record_skipped(Oid dbid, const char *reason)
{
	CleanupStatus *slot;
	bool		is_new = true;

	LWLockAcquire(IdempotencyShared->lock, LW_EXCLUSIVE);
	slot = CleanupStatusFor(dbid);
	if (slot != NULL)
	{
		is_new = strncmp(slot->last_error, reason, CLEANUP_ERROR_LEN - 1) != 0;
		slot->last_end = GetCurrentTimestamp();
		slot->backlog = false;
		slot->next_run = 0;
		strlcpy(slot->last_error, reason, CLEANUP_ERROR_LEN);
	}
	LWLockRelease(IdempotencyShared->lock);
	return is_new;
}

/*
 * cleanup_should_run
 *		Whether this database has the extension, and its SQL objects are of
 *		the version this library works with (extension.c).  If they are not
 *		(the package was upgraded and ALTER EXTENSION ... UPDATE has not run
 *		yet), the reason is logged, once, with its hint, and the database
 *		skipped: an error would only repeat at every pass.  Any other
 *		refusal (a schema that is not the extension's) fails the pass, as
 *		before, with a backoff.  Every node of a Citus
 *		cluster runs the cleanup: cleanup() itself leaves distributed tables
 *		to the coordinator (citus_cleanup.c) and cleans what is node-local.
 */
static bool
cleanup_should_run(Oid dbid)
{
	MemoryContext workercxt = CurrentMemoryContext;
	bool		run;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	run = OidIsValid(get_extension_oid("idempotency", true));
	if (run)
	{
		PG_TRY();
		{
			IdempotencyCheckVersion();
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(workercxt);
			edata = CopyErrorData();
			FlushErrorState();
			AbortCurrentTransaction();
			if (cleanup_record_skipped(dbid, edata->message))
			{
				edata->elevel = LOG;
				ThrowErrorData(edata);
			}
			return false;
		}
		PG_END_TRY();
	}
	CommitTransactionCommand();
	return run;
}

/*
 * cleanup_batch
 *		One batch, in a transaction of its own.  The worker calls the C code
 *		of idempotency.cleanup() directly, not the SQL function: it runs as a
 *		superuser (or idempotency.cleanup_role), and a function found by its
 *		name could be anyone's.  IdempotencyCleanup refuses to run unless the
 *		schema and the tables it names are the extension's own (extension.c),
 *		and needs no privilege of the worker's role.  The batch is paced:
 *		*more says the registry's sweep has yet to cover the whole registry in
 *		this pass.
 */
static int64
cleanup_batch(int32 batch_size, bool *more)
{
	int64		deleted;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "idempotency cleanup batch");

	deleted = (int64) IdempotencyCleanup(batch_size, true, more);

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
			slot->backlog = false;
			slot->last_end = now;
			slot->next_run = TimestampTzPlusMilliseconds(now, backoff);
			strlcpy(slot->last_error, error, CLEANUP_ERROR_LEN);
		}
		else if (done)
		{
			slot->failures = 0;
			slot->backlog = false;
			slot->last_end = now;
			slot->next_run = 0;
			slot->last_error[0] = '\0';
		}
	}
	LWLockRelease(IdempotencyShared->lock);
}

/*
 * cleanup_record_backlog
 *		The worker stops with expired rows left after deleting deleted rows
 *		since started: tell the launcher to start another at the time the
 *		rate cap allows.
 */
static void
cleanup_record_backlog(Oid dbid, TimestampTz started, int64 deleted)
{
	CleanupStatus *slot;
	TimestampTz resume_at = started;

	if (idempotency_cleanup_max_rows_per_second > 0)
		resume_at = TimestampTzPlusMilliseconds(started,
												deleted * 1000 / idempotency_cleanup_max_rows_per_second);

	LWLockAcquire(IdempotencyShared->lock, LW_EXCLUSIVE);
	slot = CleanupStatusFor(dbid);
	if (slot != NULL)
	{
		slot->backlog = true;
		slot->next_run = resume_at;
	}
	LWLockRelease(IdempotencyShared->lock);
}

/*
 * cleanup_worker_done
 *		Whether this worker has had its share: about a second of deleting, or
 *		the rows the rate cap allows in a second.  Either way the launcher
 *		starts the next worker, after a pause if the cap requires one.
 */
static bool
cleanup_worker_done(TimestampTz started, int64 deleted)
{
	if (TimestampDifferenceExceeds(started, GetCurrentTimestamp(), CLEANUP_WORKER_MAX_MS))
		return true;
	return idempotency_cleanup_max_rows_per_second > 0 &&
		deleted >= (int64) idempotency_cleanup_max_rows_per_second * CLEANUP_WORKER_MAX_MS / 1000;
}

/*
 * idempotency_cleanup_main
 *		Part of a pass over one database, then exit: batches back to back
 *		until a batch comes back short with the registry swept (the pass is
 *		over) or the worker has had its share (the launcher starts the next
 *		one for the rest).
 */
void
idempotency_cleanup_main(Datum main_arg)
{
	Oid			dbid = DatumGetObjectId(main_arg);
	Oid			roleid;
	bool		first = MyBgworkerEntry->bgw_extra[CLEANUP_EXTRA_FIRST];
	MemoryContext workercxt = CurrentMemoryContext;
	TimestampTz started;
	volatile int64 deleted_here = 0;
	volatile bool backlog = false;

	memcpy(&roleid, MyBgworkerEntry->bgw_extra, sizeof(Oid));

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dbid, roleid, 0);

	if (!cleanup_should_run(dbid))
		proc_exit(0);

	started = GetCurrentTimestamp();
	LWLockAcquire(IdempotencyShared->lock, LW_EXCLUSIVE);
	{
		CleanupStatus *slot = CleanupStatusFor(dbid);

		/* a pass starts with its first worker and ends with its last */
		if (slot != NULL && first)
		{
			slot->last_start = started;
			slot->last_deleted = 0;
			SweepPassBegin(slot);
		}
	}
	LWLockRelease(IdempotencyShared->lock);

	PG_TRY();
	{
		for (;;)
		{
			int32		batch_size = idempotency_cleanup_batch_size;
			bool		more;
			int64		deleted = cleanup_batch(batch_size, &more);

			cleanup_record(dbid, deleted, false, NULL);
			deleted_here += deleted;
			if (deleted < batch_size && !more)
				break;

			/* answer SIGTERM or a reload; never pause here */
			CHECK_FOR_INTERRUPTS();
			if (ConfigReloadPending)
			{
				ConfigReloadPending = false;
				ProcessConfigFile(PGC_SIGHUP);
			}
			if (idempotency_cleanup_interval == 0)
				break;
			if (cleanup_worker_done(started, deleted_here))
			{
				backlog = true;
				break;
			}
		}
		if (backlog)
			cleanup_record_backlog(dbid, started, deleted_here);
		else
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
