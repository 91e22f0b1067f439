/*-------------------------------------------------------------------------
 *
 * idempotency.h
 *	  Declarations shared between the extension's C files.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/idempotency.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_H
#define IDEMPOTENCY_H

#include "postgres.h"

#include "fmgr.h"
#include "port/atomics.h"
#include "storage/block.h"
#include "storage/lwlock.h"
#include "utils/relcache.h"
#include "utils/reltrigger.h"
#include "utils/timestamp.h"

#include "compat.h"

/* The longest key, in bytes, that idempotency.key accepts. */
#define IDEMPOTENCY_KEY_MAXLEN	255

/* Scopes follow the same length limit as keys. */
#define IDEMPOTENCY_SCOPE_MAXLEN 255

/* Length of a SHA-256 digest in bytes. */
#define IDEMPOTENCY_SHA256_LEN	32

/*
 * Custom SQLSTATEs, class "IK" (idempotency key).  An HTTP layer maps them as
 * the README's table says: IK001 -> 422, IK002/IK003/IK004 -> 409.
 */
#define ERRCODE_IDEMPOTENCY_REQUEST_MISMATCH	MAKE_SQLSTATE('I','K','0','0','1')
#define ERRCODE_IDEMPOTENCY_NO_CLAIM			MAKE_SQLSTATE('I','K','0','0','2')
#define ERRCODE_IDEMPOTENCY_ALREADY_FINISHED	MAKE_SQLSTATE('I','K','0','0','3')
#define ERRCODE_IDEMPOTENCY_STALE_ATTEMPT		MAKE_SQLSTATE('I','K','0','0','4')
#define ERRCODE_IDEMPOTENCY_TOKEN_REFUSED		MAKE_SQLSTATE('I','K','0','0','5')

/*
 * Custom SQLSTATEs, class "IS" (idempotency state machine): IS001 -> 409.
 */
#define ERRCODE_IDEMPOTENCY_TRANSITION_NOT_ALLOWED	MAKE_SQLSTATE('I','S','0','0','1')
#define ERRCODE_IDEMPOTENCY_UNKNOWN_STATE		MAKE_SQLSTATE('I','S','0','0','2')

/* Class "IV" (idempotency version): IV001 -> 409. */
#define ERRCODE_IDEMPOTENCY_STALE_WRITE		MAKE_SQLSTATE('I','V','0','0','1')

/* The most message ids inbox_receive_batch takes at once. */
#define IDEMPOTENCY_INBOX_MAX_BATCH 10000

/* GUCs (idempotency.c) */
extern int	idempotency_max_response_size;
extern int	idempotency_cleanup_interval;
extern int	idempotency_cleanup_batch_size;
extern int	idempotency_cleanup_max_rows_per_second;
extern char *idempotency_cleanup_role;
extern int	idempotency_history_ttl;

/*
 * shmem.c: shared state, present only when the library is preloaded.
 */
#define IDEMPOTENCY_MAX_DATABASES 128
#define CLEANUP_ERROR_LEN 256

/*
 * Where the registry's sweep (sweep.c) stands in one database.  A position
 * in another relation (the registry dropped and created again) or past the
 * end of the heap (TRUNCATE, VACUUM FULL) counts as block 0.
 */
typedef struct SweepPosition
{
	Oid			relid;			/* the registry it is a position in */
	BlockNumber next_block;		/* where the next sweep call starts */
	uint64		pass_blocks;	/* blocks swept since the worker's pass began */
} SweepPosition;

typedef struct CleanupStatus
{
	Oid			dbid;			/* InvalidOid: free slot */
	TimestampTz last_start;		/* last pass of the worker in this database */
	TimestampTz last_end;
	int64		last_deleted;	/* rows deleted by the last pass */
	int64		total_deleted;	/* since the server started */
	int32		failures;		/* consecutive failed passes */
	TimestampTz next_run;		/* no pass before this (backoff) */
	char		last_error[CLEANUP_ERROR_LEN];	/* empty after a good pass */
	bool		backlog;		/* the last worker left expired rows: the
								 * launcher starts another at next_run */
	SweepPosition sweep;		/* the registry's sweep (sweep.c) */
} CleanupStatus;

/* Counters of the stats view; stats.c keeps the names in this order. */
typedef enum IdempotencyStat
{
	STAT_BEGIN_EXECUTE,
	STAT_BEGIN_REPLAY,
	STAT_BEGIN_IN_PROGRESS,
	STAT_TAKEOVER,
	STAT_REQUEST_MISMATCH,
	STAT_FINISH,
	STAT_ABANDON,
	STAT_INBOX_NEW,
	STAT_INBOX_DUPLICATE,
	STAT_TOKEN_ISSUED,
	STAT_TOKEN_CONSUMED,
	STAT_TRANSITION_CHECKED,
	STAT_TRANSITION_REJECTED,
	STAT_STALE_WRITE,
	STAT_ROWS_CLEANED,
	STAT_NUM
} IdempotencyStat;

typedef struct IdempotencySharedState
{
	LWLock	   *lock;			/* guards the cleanup status table */
	CleanupStatus cleanup[IDEMPOTENCY_MAX_DATABASES];
	pg_atomic_uint64 stats[STAT_NUM];	/* atomics: no lock */
	pg_atomic_uint64 stats_reset;	/* TimestampTz of the last reset */
} IdempotencySharedState;

extern IdempotencySharedState *IdempotencyShared;
extern void IdempotencyShmemInit(void);
extern CleanupStatus *CleanupStatusFor(Oid dbid);

/*
 * statemachine.c: per-backend cache of state machine definitions.
 */
/*
 * Limits of a state machine definition, so that every backend's cached copy
 * stays small: states, transitions (entries of its arrays) and the length of
 * a state name in bytes.
 */
#define IDEMPOTENCY_SM_MAX_STATES		10000
#define IDEMPOTENCY_SM_MAX_TRANSITIONS	100000
#define IDEMPOTENCY_SM_MAX_STATE_LEN	255

typedef struct StateMachine
{
	char		name[NAMEDATALEN];	/* hash key */
	bool		valid;
	int			nstates;
	char	  **states;			/* state names, in definition order */
	int		   *state_lens;
	bool	   *initial;		/* [nstates] */
	int32	   *targets_start;	/* [nstates + 1]: state i's targets are */
	int32	   *targets;		/* targets[targets_start[i] .. [i + 1]), sorted */
	int32	   *slots;			/* hash of names: state index + 1, 0 if free */
	uint32		slot_mask;		/* number of slots - 1 */
	MemoryContext cxt;			/* holds all of the above */
} StateMachine;

extern uint64 StateMachineCacheGeneration;
extern StateMachine *StateMachineLookup(const char *name);
extern int	StateMachineFindState(StateMachine *machine, const char *state, int len);
extern bool StateMachineAllows(StateMachine *machine, int from, int to);
extern char *StateMachineAllowedList(StateMachine *machine, int from);
extern char *StateMachineInitialList(StateMachine *machine);

/*
 * The checks of how each of our triggers is defined, run when a trigger is
 * created (trigger_ddl.c) and when it fires; each returns the number of the
 * column the trigger names.
 */
extern AttrNumber TransitionCheckTrigger(Relation rel, Trigger *trigger,
										 bool machine_must_exist);
extern AttrNumber HistoryCheckTrigger(Relation rel, Trigger *trigger);
extern AttrNumber VersionGuardCheckTrigger(Relation rel, Trigger *trigger);

/* The trigger functions themselves, which trigger_ddl.c recognises. */
extern PGDLLEXPORT Datum idempotency_check_transition(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum idempotency_record_transition(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum idempotency_version_guard(PG_FUNCTION_ARGS);

/* stats.c: counted per backend, added to shared memory at transaction end */
extern uint64 IdempotencyLocalStats[STAT_NUM];
#define IdempotencyCount(stat, n) (IdempotencyLocalStats[(stat)] += (n))
extern void IdempotencyStatsInit(void);

/* worker.c */
extern void IdempotencyWorkerRegister(void);

/* key.c */
extern text *IdempotencyKeyFromBytes(const char *str, int len);
extern char *IdempotencyDisplayValue(const char *str, int len);

/* keyfuncs.c */
extern void IdempotencySha256(const char *data, size_t len,
							  uint8 digest[IDEMPOTENCY_SHA256_LEN]);

/*
 * registry.c: the prepared statements on idempotency.registry, and the
 * frame every registry function runs in (SPI connected, running as the
 * registry's owner, the caller's role name and the clock read once).
 */
typedef enum RegistryStmt
{
	RS_CLAIM,					/* insert a fresh claim, or nothing on conflict */
	RS_INSERT_FINISHED,			/* insert a finished record (defer_claim) */
	RS_LOOKUP,					/* read the caller's record */
	RS_RECLAIM_EXPIRED,			/* overwrite an expired record with a claim */
	RS_TAKEOVER,				/* take over a claim whose lease ran out */
	RS_FINISH,					/* store the response of a live claim */
	RS_ABANDON,					/* drop a live claim */
	RS_CLEANUP,					/* delete expired records in a block range */
	RS_HISTORY_INSERT,			/* record a state change */
	RS_HISTORY_CLEANUP,			/* delete a batch of expired history */
	RS_INBOX_RECEIVE,			/* record one message id, or nothing */
	RS_INBOX_RECLAIM,			/* renew one expired message id */
	RS_INBOX_INSERT_NEW,		/* record many message ids, all new */
	RS_INBOX_RECEIVE_BATCH,		/* record many message ids */
	RS_INBOX_RENEW_EXPIRED,		/* renew expired entries among many ids */
	RS_INBOX_CLEANUP,			/* delete a batch of expired inbox entries */
	RS_TOKEN_ISSUE,				/* record a new one-time token */
	RS_TOKEN_CONSUME,			/* use a token once */
	RS_TOKEN_LOOKUP,			/* read a token (to explain a refusal) */
	RS_TOKEN_CLEANUP,			/* delete a batch of expired tokens */
	RS_NUM_STMTS
} RegistryStmt;

/* Columns RS_LOOKUP returns, in order (1-based, as SPI numbers them). */
#define LOOKUP_STATUS		1
#define LOOKUP_ATTEMPT		2
#define LOOKUP_FINGERPRINT	3
#define LOOKUP_RESPONSE		4
#define LOOKUP_LEASE_UNTIL	5
#define LOOKUP_EXPIRES_AT	6
#define LOOKUP_STATUS_CODE	7
#define LOOKUP_BODY			8

typedef struct RegistryCall
{
	Datum		owner;			/* caller's role name, as text */
	TimestampTz now;			/* one clock reading for the whole call */
	MemoryContext caller_cxt;	/* for results that outlive SPI */
	Oid			save_userid;
	int			save_sec_context;
} RegistryCall;

extern void RegistryCallBegin(RegistryCall *call);
extern void RegistryCallEnd(RegistryCall *call);
extern uint64 RegistryExecute(RegistryStmt stmt, Datum *values,
							  const char *nulls);
extern int32 RegistryFence(void);
extern bool RegistryTry(void (*fn) (void *arg), void *arg, int sqlerrcode);
extern pg_noreturn void IdempotencyRethrowHidingQuery(MemoryContext cxt) pg_attribute_noreturn();

extern Datum RegistryOwnerName(Oid roleid);

/* registry.c: argument checks shared by every SQL-callable function */
extern void IdempotencyRequireArg(FunctionCallInfo fcinfo, int argno, const char *name);
extern Datum IdempotencyKeyArg(FunctionCallInfo fcinfo, int argno);
extern AttrNumber IdempotencyTriggerColumn(Relation rel, Trigger *trigger, int argno,
										   const char *role);
extern Datum IdempotencyScopeArg(FunctionCallInfo fcinfo, int argno);
extern TimestampTz IdempotencyAddPositive(TimestampTz now, Datum interval, const char *name);

/* deferred.c: claims taken with defer_claim, written by their finish */
typedef struct DeferredClaim
{
	text	   *owner;
	text	   *scope;
	text	   *key;
	bytea	   *fingerprint;	/* NULL when there is no request */
	int32		attempt;
	TimestampTz created_at;
	TimestampTz lease_until;
	TimestampTz expires_at;
	int			nest_level;		/* the subtransaction that took it */
} DeferredClaim;

extern DeferredClaim *DeferredClaimFind(Datum owner, Datum scope, Datum key);
extern DeferredClaim *DeferredClaimAdd(Datum owner, Datum scope, Datum key,
									   Datum fingerprint);
extern void DeferredClaimForget(DeferredClaim *claim);

/*
 * extension.c: the extension's own objects, found through its catalog
 * entries and checked to be members of the extension.
 */
typedef enum IdempotencyRelation
{
	IR_REGISTRY,
	IR_INBOX,
	IR_TOKENS,
	IR_STATE_MACHINES,
	IR_STATE_HISTORY,
	IR_NUM
} IdempotencyRelation;

typedef struct IdempotencyCatalog
{
	Oid			extoid;			/* pg_extension */
	Oid			nspoid;			/* the schema named idempotency, a member */
	Oid			relids[IR_NUM];	/* its tables, members */
	Oid			keytype;		/* idempotency.key, a member */
} IdempotencyCatalog;

extern const IdempotencyCatalog *IdempotencyCatalogGet(void);

/* cleanup.c: one batch of the cleanup, for cleanup() and the worker */
extern uint64 IdempotencyCleanup(int32 batch_size, bool paced, bool *more);

/*
 * sweep.c: the registry has no expires_at index; its cleanup walks the heap
 * in ranges of SWEEP_RANGE_BLOCKS blocks (TID range scans) and remembers
 * where it stopped.  A paced call (the background worker's) sweeps at most
 * SWEEP_PACED_BLOCKS blocks.
 */
#define SWEEP_RANGE_BLOCKS	4096
#define SWEEP_PACED_BLOCKS	4096

extern uint64 SweepRegistry(TimestampTz now, int32 fence, int32 limit, bool paced,
							bool *more);
extern void SweepPassBegin(CleanupStatus *slot);

/* hints.c */
extern void IdempotencyHintsInit(void);

/* tokens.c */
extern void TokenRequire(RegistryCall *call, Datum scope, Datum key);

/*
 * citus.c: what changes once idempotency.citus_setup() has distributed the
 * tables with Citus.  Without Citus, or before the setup, nothing does.
 */
typedef enum CitusTable
{
	CITUS_REGISTRY,
	CITUS_INBOX,
	CITUS_TOKENS,
	CITUS_HISTORY,
	CITUS_NUM_TABLES
} CitusTable;

extern char IdempotencyCitusPartMethod(CitusTable table);
extern bool IdempotencyCitusCleanup(CitusTable table, TimestampTz now, int32 limit,
									uint64 *deleted);
extern uint64 IdempotencyCitusInboxExecute(RegistryStmt stmt, Datum *values);
extern Oid	IdempotencyCitusShardOf(Relation rel);
extern char *IdempotencyCitusTableName(Relation rel);

#endif							/* IDEMPOTENCY_H */
