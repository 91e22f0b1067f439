/*-------------------------------------------------------------------------
 *
 * begin.c
 *	  idempotent_begin: the claim, its waits, take-over and replay; and
 *	  idempotent_call, which runs a handler under a claim.
 *
 * A record goes through these states:
 *
 *	 (absent) --begin--> processing --finish--> completed | failed
 *	                         |  ^
 *	                         |  +--begin after the lease ran out (new attempt)
 *	                         +----abandon--> abandoned (counts as absent)
 *
 * and a record whose expires_at has passed counts as absent, whether or not
 * the cleanup has removed it yet.  Every claim gets a new attempt number, a
 * fencing token that is never issued twice for the same key (RegistryFence
 * says why): that is why an abandoned claim stays as a row until the cleanup
 * removes it, instead of being deleted.
 *
 * Concurrency.  Exactly one caller may get "execute" for a live (owner,
 * scope, key).  The unique index is what guarantees it (Citus rule 5): a
 * record is written by an INSERT, which waits for a concurrent uncommitted
 * record of the key and then either conflicts (the other committed) or goes
 * in (it rolled back).  A transactional claim of a key nobody has, the
 * common case, writes nothing at begin: it is held by a transaction-scoped
 * lock on the key (LockRegistryKey), which writes no WAL, and written once,
 * whole, by its finish (begin_in_memory says when).  A duplicate takes the
 * same lock first, so it waits for the holder's transaction to end and then
 * reads what it committed: a replay, or an execute if it rolled back.  Every
 * claim that may insert takes the lock, so an external claim or one under
 * REPEATABLE READ, which write at begin, wait for a claim held in memory
 * too.  Whatever the locks did, the finish's INSERT is still checked by the
 * unique index, and a conflict there is a serialization failure.  A claim
 * written at begin is an INSERT ... ON CONFLICT DO NOTHING, and one that
 * conflicts reads and replays the record.  Overwriting an expired record and taking over a lapsed lease are UPDATEs
 * that re-check their condition, so under READ COMMITTED the loser re-reads
 * and loops, and under REPEATABLE READ or SERIALIZABLE it gets PostgreSQL's
 * serialization failure (40001), as does a claim that conflicts with a
 * record committed after the caller's snapshot was taken.
 *
 * A bounded wait (wait => false, max_wait, or a lock_timeout the caller has
 * set) runs the claim in a subtransaction with lock_timeout set to the bound;
 * a lock timeout there means another transaction holds the record or the
 * key's lock, and the answer is "in_progress" while the caller's
 * transaction stays usable.  That
 * holds only for a wait on the record: a lock on the registry table itself
 * (ALTER EXTENSION ... UPDATE, LOCK TABLE, CREATE INDEX) says nothing of the
 * key, which may be finished and held by nobody.  So a bounded begin first
 * takes the registry's lock, waiting for it as long as max_wait (or
 * idempotency.max_wait) lets it even with wait => false, and fails with
 * 55P03 past that (begin_lock_registry), never answering in_progress for it.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/begin.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "base/sha256.h"
#include "base/stats.h"
#include "distributed/delegate.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "key/args.h"
#include "key/key.h"
#include "key/locks.h"
#include "messages/tokens.h"
#include "objects/citus_metadata.h"
#include "objects/extension.h"
#include "registry/api.h"
#include "registry/http_headers.h"
#include "registry/registry.h"
#include "registry/xactclaims.h"


/* How often a claim is retried when concurrent changes keep moving the record. */
#define BEGIN_MAX_TRIES 10

/* The lease a claim gets when the caller names none: the shorter of this and ttl. */
#define DEFAULT_LEASE_USECS (5 * 60 * USECS_PER_SEC)

/*
 * An in_progress answer for a claim whose transaction has not committed (so
 * its lease cannot be read) estimates the lease as ending this long from now
 * at the most: such a claim is almost always a transactional one, which
 * holds the key only while its transaction runs.
 */
#define UNCOMMITTED_LEASE_GUESS_USECS USECS_PER_SEC

/*
 * Which statement a begin runs first, learnt per backend: an exponential
 * moving average, in 1/256ths, of how many recent begins found a record of
 * their key, updated with weight 1/8.  Above one half, begin reads first.
 */
#define FOUND_SHARE_ONE			256
#define FOUND_SHARE_READ_FIRST	(FOUND_SHARE_ONE / 2)
#define FOUND_SHARE_WEIGHT		8

static int	found_share = 0;

typedef struct BeginArgs
{
	Datum		key;
	Datum		scope;
	Jsonb	   *request;		/* NULL when there is none */
	Datum		fingerprint;	/* bytea, or 0 when there is no request */
	TimestampTz lease_until;	/* now + lease */
	TimestampTz expires_at;		/* now + ttl */
	int			lock_timeout_ms;	/* 0: wait as long as it takes */
	bool		defer_claim;	/* write nothing now: finish writes the record */
	bool		external;		/* for work outside the database: the claim
								 * may commit before its finish */
	bool		require_token;	/* the key must be a token issued to the
								 * caller */
	bool		in_memory;		/* a new key's claim is held by its lock and
								 * written by its finish (begin_in_memory) */
	bool		lock_key;		/* a claim that may insert takes the key's
								 * lock first */
	bool		locked;			/* this pass took the key's lock */
	bool		keep_lock;		/* and keeps it: its claim needs it */
} BeginArgs;

/* What one pass of the claim loop came to (begin_attempt). */
typedef enum BeginPass
{
	BEGIN_ANSWERED,
	BEGIN_RETRY,
	BEGIN_NEEDS_WAIT
} BeginPass;

typedef struct BeginResult
{
	const char *outcome;
	bool		takeover;		/* execute, by taking over a lapsed lease */
	RegistryRow rec;			/* the answer */
	int32		previous_attempt;	/* execute over an earlier claim: its
									 * attempt; 0 otherwise */
	const char *previous_end;	/* and how it ended (begin_previous_end) */
} BeginResult;

/*
 * begin_execute
 *		The answer for a claim that is now ours: the claim as written (or, if
 *		not written, to be written by its finish), remembered as this
 *		transaction's: one that must end before the transaction commits,
 *		unless it is for work outside the database.
 */
static void
begin_execute(BeginResult *result, const RegistryRow *claim, const BeginArgs *args,
			  bool written)
{
	result->outcome = "execute";
	result->rec = *claim;
	XactClaimAdd(claim, args->defer_claim && !written ? XACT_CLAIM_DEFERRED :
				 args->external ? XACT_CLAIM_EXTERNAL : XACT_CLAIM_TRANSACTIONAL,
				 written);
}

/*
 * begin_previous_end
 *		How the claim before an execute that overwrote a record ended, as
 *		the record was when the claim's UPDATE overwrote it: "lease_expired"
 *		for a claim that never ended (taken over once its lease ran out, or
 *		its record expired while it was processing: the work may have partly
 *		happened), "abandoned" for one given up with idempotent_abandon,
 *		"expired" for a finished record whose expiry passed (the work was
 *		done, and its answer is gone).
 */
static const char *
begin_previous_end(const RegistryRow *rec)
{
	switch (rec->status)
	{
		case RS_PROCESSING:
			return "lease_expired";
		case RS_ABANDONED:
			return "abandoned";
		case RS_COMPLETED:
		case RS_FAILED:
			return "expired";
	}
	elog(ERROR, "unexpected idempotency record status %d", (int) rec->status);
	return NULL;				/* keep compiler quiet */
}

/*
 * begin_over
 *		An execute that overwrote the record rec, the previous claim: report
 *		its attempt and how it ended.  The UPDATE that overwrote it
 *		re-checked rec's attempt (and status), so these are the values of
 *		the row it changed, not of a read that may have gone stale.
 */
static void
begin_over(BeginResult *result, const RegistryRow *rec)
{
	result->previous_attempt = DatumGetInt32(rec->values[RC_attempt]);
	result->previous_end = begin_previous_end(rec);
}

/*
 * begin_found
 *		Note whether a begin found a record of its key.
 */
static void
begin_found(bool found)
{
	bool		read_first = found_share > FOUND_SHARE_READ_FIRST;

	found_share += ((found ? FOUND_SHARE_ONE : 0) - found_share) / FOUND_SHARE_WEIGHT;
	if (read_first != (found_share > FOUND_SHARE_READ_FIRST))
		elog(DEBUG2, "idempotent_begin now %s",
			 read_first ? "claims first: most recent begins found no record of their key" :
			 "reads first: most recent begins found a record of their key");
}

/*
 * begin_reads_first
 *		Whether a begin reads the record before it tries to claim the key:
 *		for a deferred claim that takes no key's lock (past the
 *		transaction's budget), which writes nothing at begin; in a read-only
 *		transaction (or on a hot standby), where the claim's INSERT would
 *		fail with 25006 even for a key whose answer is there to replay; and
 *		when most of this backend's recent begins found a record.
 */
static bool
begin_reads_first(const BeginArgs *args)
{
	return (args->defer_claim && !args->lock_key) || XactReadOnly ||
		found_share > FOUND_SHARE_READ_FIRST;
}

/*
 * begin_lock_budget
 *		How many keys' locks one transaction's claims hold at most: half of
 *		max_locks_per_transaction, so that a batch claiming thousands of keys
 *		in one transaction cannot fill the shared lock table (whose size is
 *		max_locks_per_transaction per connection).  Past it, claims are
 *		written at begin, and their keys' locks given back once written.
 */
static int
begin_lock_budget(void)
{
	return Max(max_locks_per_xact / 2, 1);
}

/*
 * begin_in_memory
 *		Whether a claim of a key nobody has is held in memory, by the key's
 *		lock, and written once, whole, by its finish: a transactional claim
 *		under READ COMMITTED, in a transaction that may write and holds
 *		fewer keys' locks than its budget, on a registry that is not
 *		distributed.  The rest claim by writing the record now:
 *		an external claim must be visible before it is finished; a
 *		REPEATABLE READ or SERIALIZABLE snapshot would not see the record
 *		a duplicate waited for, so the duplicate would do its work and fail
 *		only at finish; and on Citus the record's shard is the arbiter
 *		(Citus rule 5), which a coordinator's lock is not.
 */
static bool
begin_in_memory(const BeginArgs *args)
{
	return !args->external && !args->defer_claim && args->lock_key &&
		!IsolationUsesXactSnapshot() && XactClaimLocks() < begin_lock_budget();
}

/*
 * begin_lock_key
 *		Take the key's lock before a claim that may insert its record
 *		(LockRegistryKey): waiting for a claim held in memory by another
 *		transaction, if may_wait, else returning false when it is held.
 *
 * Every claim that may insert takes it, not only those held in memory: an
 * insert that did not would go in beside such a claim, and the unique
 * index would make the claim's finish fail instead of the duplicate wait.
 */
static bool
begin_lock_key(SqlCall *call, BeginArgs *args, bool may_wait)
{
	if (!args->lock_key || args->locked)
		return true;
	if (!LockRegistryKey(call->owner, args->scope, args->key, true))
	{
		if (!may_wait)
			return false;
		IdempotencyCount(STAT_BEGIN_WAITED, 1);
		(void) LockRegistryKey(call->owner, args->scope, args->key, false);
	}
	XactClaimLocked();
	args->locked = true;
	return true;
}

/*
 * begin_inserted
 *		A claim's record was inserted: it keeps the key's lock to the end of
 *		the transaction, so that a claim held in memory by another one waits
 *		for it, unless the transaction is past its budget of keys' locks.
 *		Given back, the uncommitted row still makes a concurrent insert
 *		wait; a duplicate claim held in memory that took the lock since
 *		finds it only at its finish (40001), as defer_claim's duplicates did.
 */
static void
begin_inserted(BeginArgs *args)
{
	args->keep_lock = args->in_memory || XactClaimLocks() <= begin_lock_budget();
}

/*
 * begin_check_request
 *		Reusing a key for a different request is the caller's bug: say so.  A
 *		call without a request against a record stored with one is such a
 *		reuse too (a refund's key reused for a charge): replaying the record
 *		to it would hand one request's answer to another.
 */
static void
begin_check_request(BeginArgs *args, const RegistryRow *rec)
{
	if (!rec->nulls[RC_fingerprint] &&
		(args->request == NULL ||
		 !RegistryByteaEqual(rec->values[RC_fingerprint], args->fingerprint)))
	{
		IdempotencyCount(STAT_REQUEST_MISMATCH, 1);
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_REQUEST_MISMATCH),
				 errmsg("idempotency key \"%s\" in scope \"%s\" was already used for a different request",
						IdempotencyKeyDisplay(args->key),
						TextDatumGetCString(args->scope)),
				 args->request == NULL ?
				 errdetail("The key's record was stored with a request, and this call passes none.") : 0,
				 args->request == NULL ?
				 errhint("Pass the same request, or read the record with lookup().") :
				 errhint("Use a new key for a new request.")));
	}
}

/*
 * begin_pass
 *		One pass of the claim loop.  Returns BEGIN_ANSWERED with *result
 *		filled in when it reached an answer, BEGIN_RETRY when the record
 *		changed under it and the caller should try again, and, if it may
 *		neither write nor wait (may_write false), BEGIN_NEEDS_WAIT when only
 *		a write or a wait for the key's lock would answer.
 *
 * The fencing token is read from the clock at every pass, just before the
 * statement that may issue it (RegistryFence says why).
 *
 * Which statement comes first.  A new key is claimed by one INSERT ... ON
 * CONFLICT, and reading first would cost it an extra index probe; a retry
 * is answered by reading its record, and claiming first would cost it a
 * speculative insertion that conflicts.  So begin claims first unless most
 * of this backend's recent begins found a record (a consumer draining
 * redeliveries, a burst of retries), and then reads first.  Either order
 * gives the same answers: a claim that conflicts after a read that found
 * nothing (a concurrent claim, not yet committed when read) just loops, and
 * the next read sees the record.  A claim held in memory takes the key's lock
 * first and then reads: once the lock is ours, no other claim of the key is
 * open, and a record that is not there is not being written.  Reading first
 * without the lock, a claim that found nothing takes the lock and reads
 * again: the holder it waited for may have committed the record since.
 */
static BeginPass
begin_pass(SqlCall *call, BeginArgs *args, BeginResult *result, bool may_write)
{
	RegistryRow claim;
	RegistryRow rec;
	XactClaim  *mine;
	bool		found;
	bool		read_first = begin_reads_first(args);

	RegistryRowClaim(&claim, call, args->scope, args->key, args->fingerprint,
					 args->lease_until, args->expires_at);

	/*
	 * This very transaction holds a claim of the key (deferred or written,
	 * whatever mode this begin is in): in_progress.
	 */
	mine = XactClaimFind(call->owner, args->scope, args->key);
	if (mine != NULL)
	{
		begin_check_request(args, &mine->row);
		result->outcome = "in_progress";
		result->rec = mine->row;
		return BEGIN_ANSWERED;
	}

	/*
	 * The key's lock held by another transaction: by a claim held in memory,
	 * or only for a moment, by a begin that is reading the key's finished
	 * record.  Read first then: a record answers without the lock (waiting
	 * for it, a bounded begin would answer a replay in_progress), and its
	 * absence takes the lock, waiting if may_write, below.
	 */
	if (!read_first && !begin_lock_key(call, args, false))
		read_first = true;
	if (!read_first && !args->in_memory && !args->defer_claim)
	{
		if (!may_write)
			return BEGIN_NEEDS_WAIT;
		if (RegistryInsertClaim(call, &claim))
		{
			/* nobody has this key, the claim is ours */
			begin_inserted(args);
			begin_found(false);
			begin_execute(result, &claim, args, true);
			return BEGIN_ANSWERED;
		}
	}

	found = RegistryLookup(call, args->scope, args->key, &rec);
	if (!found && read_first && args->lock_key)
	{
		/*
		 * Read before the key's lock was ours: a claim in memory may have
		 * committed its record since.  Read again, holding it.
		 */
		if (!begin_lock_key(call, args, may_write))
			return BEGIN_NEEDS_WAIT;
		found = RegistryLookup(call, args->scope, args->key, &rec);
	}
	if (!found)
	{
		if (!args->defer_claim && !args->in_memory)
		{
			/* nobody has this key: claim it, unless that was tried */
			if (!may_write)
				return BEGIN_NEEDS_WAIT;
			if (!read_first || !RegistryInsertClaim(call, &claim))
				return BEGIN_RETRY; /* deleted since, or claimed since the
									 * read */
			begin_inserted(args);
			begin_found(false);
			begin_execute(result, &claim, args, true);
			return BEGIN_ANSWERED;
		}

		/*
		 * Nobody has this key: the claim is ours, held by the key's lock and
		 * written by its finish.  The finish's INSERT takes the registry's
		 * RowExclusiveLock, which is taken now instead: waiting for it at
		 * finish, behind an ALTER EXTENSION UPDATE that waits for this
		 * transaction's weaker lock, would be a deadlock.
		 */
		LockRelationOid(IdempotencyCatalogGet()->relids[IR_REGISTRY], RowExclusiveLock);
		args->keep_lock = true;
		begin_found(false);
		begin_execute(result, &claim, args, false);
		return BEGIN_ANSWERED;
	}

	/* an expired or abandoned record counts as absent: claim it afresh */
	if (!RegistryRowLive(&rec, call->now) && !may_write)
		return BEGIN_NEEDS_WAIT;
	if (!RegistryRowLive(&rec, call->now))
	{
		begin_found(true);
		if (!RegistryReclaim(call, &claim, &rec))
			return BEGIN_RETRY;
		begin_execute(result, &claim, args, true);
		begin_over(result, &rec);
		return BEGIN_ANSWERED;
	}

	begin_check_request(args, &rec);

	if (rec.status != RS_PROCESSING ||
		DatumGetTimestampTz(rec.values[RC_lease_until]) > call->now || may_write)
		begin_found(true);
	if (rec.status != RS_PROCESSING)
	{
		RegistryRowKeep(call, &rec);
		RegistryRowSet(&rec, RC_lease_until, (Datum) 0);
		result->outcome = "replay";
		result->rec = rec;
		return BEGIN_ANSWERED;
	}

	if (DatumGetTimestampTz(rec.values[RC_lease_until]) > call->now)
	{
		RegistryRowKeep(call, &rec);
		result->outcome = "in_progress";
		result->rec = rec;
		return BEGIN_ANSWERED;
	}

	/* the lease ran out: the work may have partly happened; take it over */
	if (!may_write)
		return BEGIN_NEEDS_WAIT;
	if (!RegistryTakeover(call, &claim, &rec))
		return BEGIN_RETRY;
	begin_execute(result, &claim, args, true);
	begin_over(result, &rec);
	result->takeover = true;
	return BEGIN_ANSWERED;
}

/*
 * begin_attempt
 *		begin_pass, giving the key's lock back unless the claim needs it: an
 *		answer read from a committed record (a replay, an in_progress), or a
 *		claim that overwrote a record, whose row then holds the key, must
 *		not make the key's next requests wait for this transaction.  Only
 *		this pass's acquisition is given back; one the transaction held
 *		before (a claim of the key it finished earlier) stays.
 */
static BeginPass
begin_attempt(SqlCall *call, BeginArgs *args, BeginResult *result, bool may_write)
{
	BeginPass	pass;

	args->locked = false;
	args->keep_lock = false;
	pass = begin_pass(call, args, result, may_write);
	if (args->locked && !args->keep_lock)
	{
		UnlockRegistryKey(call->owner, args->scope, args->key);
		XactClaimUnlocked();
	}
	return pass;
}

/*
 * begin_loop
 *		Run begin_attempt until it answers.  Under READ COMMITTED each pass
 *		sees what the previous concurrent change committed, so a few passes
 *		settle any race; running out of passes is reported as a
 *		serialization failure the caller may retry.
 */
static void
begin_loop(SqlCall *call, BeginArgs *args, BeginResult *result)
{
	/*
	 * The token first, inside a bounded wait's subtransaction too: a token
	 * row locked by a concurrent begin of the same key is a duplicate in
	 * progress like any other.
	 */
	if (args->require_token)
		TokenRequire(call, args->scope, args->key);

	for (int tries = 0; tries < BEGIN_MAX_TRIES; tries++)
	{
		if (begin_attempt(call, args, result, true) == BEGIN_ANSWERED)
			return;
		CHECK_FOR_INTERRUPTS();
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not claim idempotency key \"%s\" because of concurrent changes",
					IdempotencyKeyDisplay(args->key)),
			 errhint("Retry the request.")));
}

/* begin_loop's arguments, passed through SqlTry */
typedef struct BeginBounded
{
	SqlCall    *call;
	BeginArgs  *args;
	BeginResult *result;
} BeginBounded;

/*
 * begin_loop_bounded
 *		begin_loop with lock waits timing out after args->lock_timeout_ms.
 *		The subtransaction it runs in undoes the setting if it fails.
 */
static void
begin_loop_bounded(void *arg)
{
	BeginBounded *b = (BeginBounded *) arg;
	int			nestlevel = NewGUCNestLevel();
	char		ms[32];

	snprintf(ms, sizeof(ms), "%d", b->args->lock_timeout_ms);
	(void) set_config_option("lock_timeout", ms, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	begin_loop(b->call, b->args, b->result);
	AtEOXact_GUC(true, nestlevel);
}

/*
 * begin_read_only
 *		A bounded wait runs the claim in a subtransaction, which costs a
 *		start, a release and, once it writes, an XID of its own.  A begin
 *		that writes nothing (a replay, an in_progress answer, a claim held in
 *		memory of a key nobody has, whose lock was free) waits for nobody:
 *		try that first, without the subtransaction.  False when the answer
 *		takes a write, a wait for the key's lock or a token's row lock, which
 *		the bounded path does.
 */
static bool
begin_read_only(SqlCall *call, BeginArgs *args, BeginResult *result)
{
	if (args->require_token || (!begin_reads_first(args) && !args->in_memory))
		return false;
	return begin_attempt(call, args, result, false) == BEGIN_ANSWERED;
}

/*
 * begin_bounded
 *		begin_loop in a subtransaction whose lock waits time out; a lock
 *		timeout means another transaction holds the record, and the answer is
 *		in_progress, with the retry time estimated (the holder's lease is not
 *		visible while its transaction runs).
 */
static void
begin_bounded(SqlCall *call, BeginArgs *args, BeginResult *result)
{
	BeginBounded b = {call, args, result};

	if (!SqlTry(begin_loop_bounded, &b, ERRCODE_LOCK_NOT_AVAILABLE))
	{
		memset(result, 0, sizeof(BeginResult));
		result->outcome = "in_progress";
		RegistryRowClaim(&result->rec, call, args->scope, args->key, (Datum) 0,
						 Min(args->lease_until, call->now + UNCOMMITTED_LEASE_GUESS_USECS),
						 args->expires_at);
		RegistryRowSet(&result->rec, RC_attempt, (Datum) 0);
	}
}

/*
 * api_interval_usecs
 *		An interval's length in microseconds, months and days counted as 30
 *		and 1 days; for bounding a wait, not for timestamps.
 */
static int64
api_interval_usecs(Interval *span)
{
	return span->time + (int64) span->day * USECS_PER_DAY +
		(int64) span->month * DAYS_PER_MONTH * USECS_PER_DAY;
}

/*
 * begin_lock_timeout
 *		How long the claim may wait for another transaction's hold on the
 *		record, in ms; 0 for as long as it takes.  wait => false waits 1 ms;
 *		max_wait bounds the wait, and without it idempotency.max_wait does
 *		(-1: no bound, 0: no wait); a lock_timeout the caller has set bounds
 *		it too, but ends in in_progress instead of aborting the transaction.
 *
 * A bounded wait runs the claim in a subtransaction, which takes an XID of
 * its own when it writes, and a backend past PGPROC_MAX_CACHED_SUBXIDS of
 * them makes every other backend's snapshots slower until its transaction
 * ends.  So the setting's bound is not applied once the transaction holds
 * half that many (a batch claiming many keys in one transaction): such a
 * begin waits as an unbounded one does, bounded only by lock_timeout.  A
 * max_wait the caller passes is always applied.
 */
static int
begin_lock_timeout(FunctionCallInfo fcinfo, bool wait, int max_wait_arg)
{
	int64		ms;

	if (!wait)
		return 1;
	if (PG_ARGISNULL(max_wait_arg))
	{
		if (idempotency_max_wait < 0 ||
			MyProc->subxidStatus.overflowed ||
			MyProc->subxidStatus.count >= PGPROC_MAX_CACHED_SUBXIDS / 2)
			return LockTimeout;
		ms = idempotency_max_wait;
	}
	else
	{
		ms = api_interval_usecs(PG_GETARG_INTERVAL_P(max_wait_arg)) / 1000;
		if (ms < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_wait must not be negative")));
	}
	if (ms == 0)
		return 1;
	if (LockTimeout > 0 && LockTimeout < ms)
		return LockTimeout;
	return (int) Min(ms, (int64) INT_MAX);
}

/*
 * begin_lock_registry
 *		Take the lock on the registry that the claim's statements take (mode:
 *		AccessShareLock for a begin that only reads, RowExclusiveLock for one
 *		that may write), waiting for another transaction's lock on the table
 *		at most timeout_ms (begin_lock_timeout's bound for wait => true; 0:
 *		as long as lock_timeout lets it).  Past the bound: 55P03, a retryable
 *		error that says the table is locked, not in_progress, which would
 *		say that a request holds the key.  The lock is kept, as the
 *		statements' own would be, until the transaction ends.
 */
static void
begin_lock_registry(LOCKMODE mode, int timeout_ms, Datum key)
{
	Oid			relid = IdempotencyCatalogGet()->relids[IR_REGISTRY];
	MemoryContext oldcontext = CurrentMemoryContext;
	int			nestlevel;
	char		ms[32];

	if (ConditionalLockRelationOid(relid, mode))
		return;
	if (timeout_ms == 0)
	{
		LockRelationOid(relid, mode);
		return;
	}

	nestlevel = NewGUCNestLevel();
	snprintf(ms, sizeof(ms), "%d", timeout_ms);
	(void) set_config_option("lock_timeout", ms, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	PG_TRY();
	{
		LockRelationOid(relid, mode);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not claim idempotency key \"%s\": table \"idempotency.registry\" is locked",
						IdempotencyKeyDisplay(key)),
				 errdetail("Another transaction holds a lock on the registry table (ALTER EXTENSION idempotency UPDATE among others); the call waited %d ms for it.",
						   timeout_ms),
				 errhint("Retry the request.")));
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nestlevel);
}

/*
 * begin_retry_after
 *		An in_progress answer's retry_after: the whole seconds, rounded up,
 *		from now (read from the clock, not the statement's start) until the
 *		holder's lease ends, and at least 1.  For a claim whose transaction
 *		has not committed, the lease is begin_bounded's estimate.  An HTTP
 *		service sends it as Retry-After with its 409.
 */
static int32
begin_retry_after(const RegistryRow *rec)
{
	int64		usecs;

	if (rec->nulls[RC_lease_until])
		return 1;
	usecs = DatumGetTimestampTz(rec->values[RC_lease_until]) - GetCurrentTimestamp();
	if (usecs <= USECS_PER_SEC)
		return 1;
	return (int32) Min((usecs + USECS_PER_SEC - 1) / USECS_PER_SEC, (int64) PG_INT32_MAX);
}

/*
 * begin_claim
 *		The claim, once its arguments are read and its times set: with a
 *		bounded wait, the registry's lock is waited for within
 *		table_timeout_ms (begin_lock_registry), not the claim's 1 ms.
 */
static void
begin_claim(SqlCall *call, BeginArgs *args, int table_timeout_ms, BeginResult *result)
{
	/* a read-only transaction claims nothing; a hot standby locks nothing */
	args->lock_key = !XactReadOnly && IdempotencyCitusPartMethod(CITUS_REGISTRY) == '\0';
	/* past the budget, a deferred claim holds nothing, as it did before */
	if (args->defer_claim && XactClaimLocks() >= begin_lock_budget())
		args->lock_key = false;
	args->in_memory = begin_in_memory(args);

	if (args->lock_timeout_ms == 0)
		begin_loop(call, args, result);
	else
	{
		/* a claim held in memory takes the finish's lock now (begin_attempt) */
		begin_lock_registry(args->in_memory ? RowExclusiveLock : AccessShareLock,
							table_timeout_ms, args->key);
		if (!begin_read_only(call, args, result))
		{
			begin_lock_registry(RowExclusiveLock, table_timeout_ms, args->key);
			begin_bounded(call, args, result);
		}
	}
}

/*
 * begin_count
 *		Count a begin's answer in the statistics.
 */
static void
begin_count(const BeginResult *result)
{
	if (strcmp(result->outcome, "execute") == 0)
	{
		IdempotencyCount(STAT_BEGIN_EXECUTE, 1);
		if (result->takeover)
			IdempotencyCount(STAT_TAKEOVER, 1);
	}
	else if (strcmp(result->outcome, "replay") == 0)
		IdempotencyCount(STAT_BEGIN_REPLAY, 1);
	else
		IdempotencyCount(STAT_BEGIN_IN_PROGRESS, 1);
}

/*
 * begin_result_datum
 *		The result row of begin (or idempotent_call) for its answer: the
 *		record's columns the row has, the outcome, and begin's own columns
 *		where the row has them.
 */
static Datum
begin_result_datum(const ApiResult *res, const BeginResult *result)
{
	Datum	   *values = palloc0(res->out->desc->natts * sizeof(Datum));
	bool	   *nulls = palloc(res->out->desc->natts * sizeof(bool));

	memset(nulls, true, res->out->desc->natts * sizeof(bool));
	RegistryOutputFill(res->out, &result->rec, values, nulls);
	values[res->own] = CStringGetTextDatum(result->outcome);
	nulls[res->own] = false;
	if (result->previous_end != NULL && res->previous_attempt >= 0 && res->previous_end >= 0)
	{
		values[res->previous_attempt] = Int32GetDatum(result->previous_attempt);
		nulls[res->previous_attempt] = false;
		values[res->previous_end] = CStringGetTextDatum(result->previous_end);
		nulls[res->previous_end] = false;
	}
	if (res->retry_after >= 0 && strcmp(result->outcome, "in_progress") == 0)
	{
		values[res->retry_after] = Int32GetDatum(begin_retry_after(&result->rec));
		nulls[res->retry_after] = false;
	}
	return HeapTupleGetDatum(heap_form_tuple(res->out->desc, values, nulls));
}

/*
 * api_begin
 *		idempotent_begin(key, scope, request, ttl, lease, wait, require_token,
 *		max_wait, defer_claim[, external]): the 1.0 declaration has no
 *		external, and its claims are all external, as 1.0's were (they
 *		commit on their own); so are the 1.1 declaration's under
 *		idempotency.commit_rule = lease_is_external, but for deferred ones.
 */
static Datum
api_begin(FunctionCallInfo fcinfo, bool has_external)
{
	static ApiResult result_cache;
	ApiResult  *res;
	BeginArgs	args = {0};
	BeginResult result = {0};
	SqlCall		call;
	Datum		delegated;

	args.key = IdempotencyKeyArg(fcinfo, 0);
	args.scope = IdempotencyScopeArg(fcinfo, 1);
	if (IdempotencyCitusDelegate(fcinfo, CITUS_DELEGATE_BEGIN, &delegated))
		return delegated;
	if (!PG_ARGISNULL(2))
	{
		args.request = PG_GETARG_JSONB_P(2);
		args.fingerprint = RegistryFingerprint(args.request);
	}
	IdempotencyRequireArg(fcinfo, 3, "ttl");
	IdempotencyRequireArg(fcinfo, 5, "wait");
	IdempotencyRequireArg(fcinfo, 6, "require_token");
	args.require_token = PG_GETARG_BOOL(6);
	args.lock_timeout_ms = begin_lock_timeout(fcinfo, PG_GETARG_BOOL(5), 7);
	IdempotencyRequireArg(fcinfo, 8, "defer_claim");
	args.defer_claim = PG_GETARG_BOOL(8);
	args.external = true;
	if (has_external)
	{
		IdempotencyRequireArg(fcinfo, 9, "external");
		args.external = PG_GETARG_BOOL(9);
		if (args.defer_claim && args.external)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("defer_claim and external cannot both be true"),
					 errdetail("A deferred claim is written by its finish in the transaction that took it, so it cannot serve work outside the database.")));

		/*
		 * 1.0's rule, kept by the setting while clients written for 1.0 run
		 * on the 1.1 objects: a written claim may commit unfinished, its
		 * lease bounding it.  A deferred claim has nothing written to commit.
		 */
		if (idempotency_commit_rule == COMMIT_RULE_LEASE_IS_EXTERNAL && !args.defer_claim)
			args.external = true;
	}

	res = RegistryApiResult(fcinfo, &result_cache, "outcome");

	SqlCallBegin(&call);
	args.expires_at = IdempotencyAddPositive(call.now, PG_GETARG_DATUM(3), "ttl");
	if (PG_ARGISNULL(4))
		args.lease_until = Min(args.expires_at, call.now + DEFAULT_LEASE_USECS);
	else
	{
		/* a lease longer than ttl ends with the record: clamp it to ttl */
		args.lease_until = Min(IdempotencyAddPositive(call.now, PG_GETARG_DATUM(4), "lease"),
							   args.expires_at);
	}
	begin_claim(&call, &args, begin_lock_timeout(fcinfo, true, 7), &result);
	SqlCallEnd(&call);
	begin_count(&result);

	return begin_result_datum(res, &result);
}

PG_FUNCTION_INFO_V1(idempotency_idempotent_begin);

/*
 * idempotency_idempotent_begin
 *		idempotent_begin as the 1.0 SQL objects declare it: without external.
 */
Datum
idempotency_idempotent_begin(PG_FUNCTION_ARGS)
{
	IdempotencyCheckNargs(fcinfo, 9);
	return api_begin(fcinfo, false);
}

PG_FUNCTION_INFO_V1(idempotency_idempotent_begin_1_1);

/*
 * idempotency_idempotent_begin_1_1
 *		idempotent_begin(key, scope, request, ttl, lease, wait, require_token,
 *		max_wait, defer_claim, external)
 */
Datum
idempotency_idempotent_begin_1_1(PG_FUNCTION_ARGS)
{
	IdempotencyCheckNargs(fcinfo, 10);
	return api_begin(fcinfo, true);
}

/*
 * call_check_handler
 *		The handler idempotent_call runs: a plain function of one jsonb
 *		returning jsonb, that the caller may execute.  A STRICT one is not
 *		run on a NULL request, so it is refused with one rather than
 *		answered as if it had run.
 */
static void
call_check_handler(Oid handler, bool null_request)
{
	HeapTuple	tuple;
	Form_pg_proc proc;

	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(handler));
	if (!HeapTupleIsValid(tuple))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function with OID %u does not exist", handler)));
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	if (proc->prokind != PROKIND_FUNCTION || proc->proretset)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("handler %s is not a function returning one value",
						format_procedure(handler)),
				 errhint("The handler is a function taking the request as jsonb and returning the response as jsonb.")));
	if (proc->pronargs != 1 || proc->proargtypes.values[0] != JSONBOID ||
		proc->prorettype != JSONBOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("handler %s must take one jsonb argument and return jsonb",
						format_procedure(handler))));
	if (proc->proisstrict && null_request)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("handler %s is STRICT, and the request is null",
						format_procedure(handler)),
				 errdetail("A STRICT function is not run on a null argument, so the key would be finished without its work.")));
	ReleaseSysCache(tuple);
	if (IdempotencyFunctionAclCheck(handler, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FUNCTION, get_func_name(handler));
}

/*
 * call_handler
 *		Run the handler on the request, as the caller, with the caller's
 *		settings: through fmgr, which applies a SECURITY DEFINER handler's
 *		owner and its SET clauses as a call from SQL would.
 */
static Jsonb *
call_handler(Oid handler, Jsonb *request)
{
	FmgrInfo	flinfo;

	LOCAL_FCINFO(hfcinfo, 1);
	Datum		response;

	fmgr_info(handler, &flinfo);
	InitFunctionCallInfoData(*hfcinfo, &flinfo, 1, InvalidOid, NULL, NULL);
	hfcinfo->args[0].value = request != NULL ? JsonbPGetDatum(request) : (Datum) 0;
	hfcinfo->args[0].isnull = request == NULL;
	response = FunctionCallInvoke(hfcinfo);
	return hfcinfo->isnull ? NULL : DatumGetJsonbP(response);
}

PG_FUNCTION_INFO_V1(idempotency_idempotent_call);

/*
 * idempotency_idempotent_call
 *		idempotent_call(key, handler, request, scope, ttl, max_wait): claim
 *		the key as a transactional idempotent_begin does, run the handler on
 *		the request if the answer is execute, and finish with what it
 *		returned; the handler's writes are in the caller's transaction and
 *		commit with the record.  A replay returns the stored response, an
 *		in_progress answer the retry time, without running the handler.
 *
 * One statement instead of three, for a client that would otherwise send
 * begin, its write and finish separately (and BEGIN and COMMIT around them
 * in autocommit): one round trip per request.  A handler that fails fails
 * the statement, and the claim goes with its transaction.  On a registry
 * that Citus distributes, the handler's writes would not be on the record's
 * shard: refused.
 */
Datum
idempotency_idempotent_call(PG_FUNCTION_ARGS)
{
	static ApiResult result_cache;
	ApiResult  *res;
	BeginArgs	args = {0};
	BeginResult result = {0};
	SqlCall		call;
	Oid			handler;
	Jsonb	   *response = NULL;

	IdempotencyCheckNargs(fcinfo, 6);
	IdempotencyRequireSqlVersion(IDEMPOTENCY_SQL_1_2, "calling a handler under a claim");
	args.key = IdempotencyKeyArg(fcinfo, 0);
	IdempotencyRequireArg(fcinfo, 1, "handler");
	handler = PG_GETARG_OID(1);
	if (!PG_ARGISNULL(2))
	{
		args.request = PG_GETARG_JSONB_P(2);
		args.fingerprint = RegistryFingerprint(args.request);
	}
	args.scope = IdempotencyScopeArg(fcinfo, 3);
	IdempotencyRequireArg(fcinfo, 4, "ttl");
	if (IdempotencyCitusPartMethod(CITUS_REGISTRY) != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("idempotent_call is not available on a distributed registry"),
				 errhint("Call idempotent_begin and idempotent_finish around the handler's writes.")));
	call_check_handler(handler, args.request == NULL);
	args.lock_timeout_ms = begin_lock_timeout(fcinfo, true, 5);

	res = RegistryApiResult(fcinfo, &result_cache, "outcome");

	SqlCallBegin(&call);
	args.expires_at = IdempotencyAddPositive(call.now, PG_GETARG_DATUM(4), "ttl");
	args.lease_until = Min(args.expires_at, call.now + DEFAULT_LEASE_USECS);
	begin_claim(&call, &args, args.lock_timeout_ms, &result);
	SqlCallEnd(&call);
	begin_count(&result);

	if (strcmp(result.outcome, "execute") == 0)
	{
		response = call_handler(handler, args.request);
		RegistryApiFinish(args.key, args.scope, response);
		RegistryRowSet(&result.rec, RC_status, CStringGetTextDatum("completed"));
		RegistryRowSet(&result.rec, RC_response, response != NULL ? JsonbPGetDatum(response) : (Datum) 0);
	}

	return begin_result_datum(res, &result);
}
