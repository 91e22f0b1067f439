/*-------------------------------------------------------------------------
 *
 * inbox.c
 *	  Message de-duplication for consumers under at-least-once delivery:
 *	  inbox_receive() and inbox_receive_batch().
 *
 * A message id is recorded per (owner, consumer) in idempotency.inbox, in the
 * caller's transaction: if the transaction rolls back, the id stays unseen
 * and the redelivery is processed.  The unique index serialises concurrent
 * receives of one id: the second waits for the first and then sees it
 * (false) or, if the first rolled back, records it itself (true).  An entry
 * past its expiry counts as unseen and is renewed.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/messages/inbox.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "base/stats.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "key/args.h"
#include "messages/idset.h"
#include "messages/inbox.h"
#include "objects/citus_metadata.h"
#include "objects/extension.h"

/* Batches smaller than this go straight to INSERT ... ON CONFLICT. */
#define INBOX_PLAIN_INSERT_MIN_BATCH 2

/*
 * The statements: $1 owner, $2 consumer, then the message id(s), $4 now,
 * $5 expires_at.  Like a claim, receive_stmt waits for a concurrent
 * uncommitted receive of the same id and then conflicts (it committed) or
 * inserts (it rolled back).
 */
static SqlStatement receive_stmt = {
	.sql = "INSERT INTO idempotency.inbox AS i (owner, consumer, message_id, received_at, expires_at)"
	" VALUES ($1, $2, $3, $4, $5) ON CONFLICT (owner, consumer, message_id) DO NOTHING",
	.nargs = 5,
	.argtypes = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_INSERT,
};

/* renew one expired message id */
static SqlStatement reclaim_stmt = {
	.sql = "UPDATE idempotency.inbox AS i SET received_at = $4, expires_at = $5"
	" WHERE i.message_id OPERATOR(pg_catalog.=) $3"
	" AND i.consumer OPERATOR(pg_catalog.=) $2"
	" AND i.owner OPERATOR(pg_catalog.=) $1"
	" AND i.expires_at OPERATOR(pg_catalog.<=) $4",
	.nargs = 5,
	.argtypes = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_UPDATE,
};

/*
 * $3 holds a batch's ids sorted and each once (IdSetSortedUnique), and
 * unnest inserts them in that order.
 *
 * insert_new_stmt is a plain INSERT, for a batch expected to be all new: it
 * fails with unique_violation if any id was seen before, and the caller runs
 * it in a subtransaction and falls back to receive_batch_stmt, whose
 * RETURNING gives back the ids that were new.  A plain INSERT costs half as
 * much per row as ON CONFLICT, whose speculative insertion takes a lock,
 * probes the index and writes a second WAL record for every row.
 */
static SqlStatement insert_new_stmt = {
	.sql = "INSERT INTO idempotency.inbox AS i (owner, consumer, message_id, received_at, expires_at)"
	" SELECT $1, $2, m.id, $4, $5 FROM pg_catalog.unnest($3) AS m(id)",
	.nargs = 5,
	.argtypes = {TEXTOID, TEXTOID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_INSERT,
};

#define RECEIVE_BATCH_SQL \
	"INSERT INTO idempotency.inbox AS i (owner, consumer, message_id, received_at, expires_at)" \
	" SELECT $1, $2, m.id, $4, $5 FROM pg_catalog.unnest($3) AS m(id)" \
	" ON CONFLICT (owner, consumer, message_id) DO NOTHING RETURNING i.message_id"

static SqlStatement receive_batch_stmt = {
	.sql = RECEIVE_BATCH_SQL,
	.nargs = 5,
	.argtypes = {TEXTOID, TEXTOID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_INSERT_RETURNING,
	.natts = 1,
};

/* renew the expired entries among many ids */
#define RENEW_EXPIRED_SQL \
	"UPDATE idempotency.inbox AS i SET received_at = $4, expires_at = $5" \
	" WHERE i.message_id OPERATOR(pg_catalog.=) ANY ($3)" \
	" AND i.consumer OPERATOR(pg_catalog.=) $2" \
	" AND i.owner OPERATOR(pg_catalog.=) $1" \
	" AND i.expires_at OPERATOR(pg_catalog.<=) $4" \
	" RETURNING i.message_id"

static SqlStatement renew_expired_stmt = {
	.sql = RENEW_EXPIRED_SQL,
	.nargs = 5,
	.argtypes = {TEXTOID, TEXTOID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_UPDATE_RETURNING,
	.natts = 1,
};

/*
 * The same two on an inbox that Citus distributes, wrapped in a WITH: Citus
 * runs an INSERT ... SELECT by pulling the rows to the coordinator, and
 * reports rows that ON CONFLICT skipped as processed, which SPI refuses for
 * a statement with RETURNING; read through a WITH, only the rows returned
 * count.  Neither fails on an id seen before, so no error needs catching
 * (Citus rule 13: Citus reports a unique violation from its COPY path
 * without its SQLSTATE).  Planned for the actual values every time, as
 * Citus plans a multi-shard statement anyway.
 */
static SqlStatement citus_receive_batch_stmt = {
	.sql = "WITH n AS (" RECEIVE_BATCH_SQL ") SELECT n.message_id FROM n",
	.nargs = 5,
	.argtypes = {TEXTOID, TEXTOID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
	.custom_plan = true,
};

static SqlStatement citus_renew_expired_stmt = {
	.sql = "WITH n AS (" RENEW_EXPIRED_SQL ") SELECT n.message_id FROM n",
	.nargs = 5,
	.argtypes = {TEXTOID, TEXTOID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
	.custom_plan = true,
};

/* $1 now, $2 batch size: the oldest expired entries first */
static SqlStatement delete_expired_stmt = {
	.sql = "DELETE FROM idempotency.inbox AS i"
	" USING (SELECT e.message_id, e.consumer, e.owner FROM idempotency.inbox AS e"
	"        WHERE e.expires_at OPERATOR(pg_catalog.<=) $1"
	"        ORDER BY e.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS x"
	" WHERE i.message_id OPERATOR(pg_catalog.=) x.message_id"
	" AND i.consumer OPERATOR(pg_catalog.=) x.consumer"
	" AND i.owner OPERATOR(pg_catalog.=) x.owner",
	.nargs = 2,
	.argtypes = {TIMESTAMPTZOID, INT4OID},
	.expected_rc = SPI_OK_DELETE,
	.custom_plan = true,
};

/*
 * inbox_expiry
 *		now + ttl, where ttl must be a positive interval.
 */
static TimestampTz
inbox_expiry(FunctionCallInfo fcinfo, int argno, TimestampTz now)
{
	IdempotencyRequireArg(fcinfo, argno, "ttl");
	return IdempotencyAddPositive(now, PG_GETARG_DATUM(argno), "ttl");
}

PG_FUNCTION_INFO_V1(idempotency_inbox_receive);

/*
 * idempotency_inbox_receive
 *		inbox_receive(consumer, message_id, ttl): true the first time this
 *		role's consumer sees the id (process the message), false for a
 *		redelivery.
 */
Datum
idempotency_inbox_receive(PG_FUNCTION_ARGS)
{
	SqlCall		call;
	Datum		values[5];
	bool		first;

	IdempotencyCheckNargs(fcinfo, 3);
	values[1] = IdempotencyTextArg(fcinfo, 0, "consumer");
	values[2] = IdempotencyTextArg(fcinfo, 1, "message_id");

	SqlCallBegin(&call);
	values[0] = call.owner;
	values[3] = TimestampTzGetDatum(call.now);
	values[4] = TimestampTzGetDatum(inbox_expiry(fcinfo, 2, call.now));

	/* new; or expired and renewed; or cleaned away between the two */
	first = SqlExecute(&receive_stmt, values, NULL) == 1 ||
		SqlExecute(&reclaim_stmt, values, NULL) == 1 ||
		SqlExecute(&receive_stmt, values, NULL) == 1;
	SqlCallEnd(&call);

	IdempotencyCount(first ? STAT_INBOX_NEW : STAT_INBOX_DUPLICATE, 1);
	PG_RETURN_BOOL(first);
}

/*
 * inbox_insert_new
 *		insert_new_stmt, as SqlTry runs it.
 */
static void
inbox_insert_new(void *values)
{
	(void) SqlExecute(&insert_new_stmt, (Datum *) values, NULL);
}

/*
 * inbox_try_all_new
 *		Record a batch with one plain INSERT, which succeeds only if every id
 *		is new; true if it did.  It runs in a subtransaction so that a unique
 *		violation can be caught and the batch handed to the ON CONFLICT
 *		statement instead.
 *
 * A subtransaction that writes takes an XID of its own, and a backend past
 * PGPROC_MAX_CACHED_SUBXIDS of them makes every other backend's snapshots
 * slower until it ends.  So this path is skipped for a single id, where the
 * subtransaction costs about what it saves, and once the transaction holds
 * half that many, so that a consumer calling this in a long loop never
 * pushes its transaction over.
 */
static bool
inbox_try_all_new(Datum *values, int n)
{
	if (n < INBOX_PLAIN_INSERT_MIN_BATCH ||
		MyProc->subxidStatus.overflowed ||
		MyProc->subxidStatus.count >= PGPROC_MAX_CACHED_SUBXIDS / 2)
		return false;
	return SqlTry(inbox_insert_new, values, ERRCODE_UNIQUE_VIOLATION);
}

PG_FUNCTION_INFO_V1(idempotency_inbox_receive_batch);

/*
 * idempotency_inbox_receive_batch
 *		inbox_receive_batch(consumer, message_ids, ttl): the ids not seen
 *		before, in input order, each once.  One statement for a batch of new
 *		ids, two when some were seen, whatever the batch's size.
 */
Datum
idempotency_inbox_receive_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SqlCall		call;
	Datum		values[5];
	Datum	   *elems;
	int			n;
	Datum	   *sorted;
	int			m;
	bool	   *is_new;
	int			emitted = 0;

	IdempotencyCheckNargs(fcinfo, 3);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	values[1] = IdempotencyTextArg(fcinfo, 0, "consumer");
	n = IdSetArg(fcinfo, 1, "inbox_receive_batch", IDEMPOTENCY_INBOX_MAX_BATCH, &elems);
	for (int i = 0; i < n; i++)
	{
		if (VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i])) == 0 ||
			VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i])) > IDEMPOTENCY_KEY_MAXLEN)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("message_id must be 1 to %d bytes long", IDEMPOTENCY_KEY_MAXLEN)));
	}
	if (n == 0)
		return (Datum) 0;

	m = IdSetSortedUnique(elems, n, &sorted);
	is_new = palloc0(sizeof(bool) * m);

	SqlCallBegin(&call);
	values[0] = call.owner;
	values[2] = PointerGetDatum(construct_array(sorted, m, TEXTOID, -1, false, TYPALIGN_INT));
	values[3] = TimestampTzGetDatum(call.now);
	values[4] = TimestampTzGetDatum(inbox_expiry(fcinfo, 2, call.now));

	/*
	 * The common case, a batch of new ids, is one plain INSERT.  Otherwise
	 * some ids were seen before: record the batch skipping those, and among
	 * those renew the expired entries, which count as unseen; then, as
	 * inbox_receive does, record once more any that the cleanup deleted
	 * between the two statements (nothing stores them otherwise).
	 */
	if (IdempotencyCitusPartMethod(CITUS_INBOX) != '\0')
	{
		/* distributed by Citus: no statement that needs an error caught */
		int			marked = IdSetMark(sorted, m, is_new,
									   SqlExecute(&citus_receive_batch_stmt, values, NULL));

		if (marked < m)
			marked += IdSetMark(sorted, m, is_new,
								SqlExecute(&citus_renew_expired_stmt, values, NULL));
		if (marked < m)
			IdSetMark(sorted, m, is_new, SqlExecute(&citus_receive_batch_stmt, values, NULL));
	}
	else if (inbox_try_all_new(values, m))
		memset(is_new, true, sizeof(bool) * m);
	else
	{
		int			marked = IdSetMark(sorted, m, is_new,
									   SqlExecute(&receive_batch_stmt, values, NULL));

		if (marked < m)
			marked += IdSetMark(sorted, m, is_new, SqlExecute(&renew_expired_stmt, values, NULL));
		if (marked < m)
			IdSetMark(sorted, m, is_new, SqlExecute(&receive_batch_stmt, values, NULL));
	}

	/* the new ids in input order, each once */
	for (int i = 0; i < n; i++)
	{
		int			j = (Datum *) bsearch(&elems[i], sorted, m, sizeof(Datum), IdSetCompare) - sorted;

		if (is_new[j])
		{
			bool		idnull[1] = {false};

			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &elems[i], idnull);
			is_new[j] = false;
			emitted++;
		}
	}
	IdempotencyCount(STAT_INBOX_NEW, emitted);
	IdempotencyCount(STAT_INBOX_DUPLICATE, n - emitted);
	SqlCallEnd(&call);
	return (Datum) 0;
}

/*
 * InboxDeleteExpired
 *		Delete up to limit expired inbox entries, in the caller's frame.
 */
uint64
InboxDeleteExpired(SqlCall *call, int32 limit)
{
	Datum		values[2] = {TimestampTzGetDatum(call->now), Int32GetDatum(limit)};

	return SqlExecute(&delete_expired_stmt, values, NULL);
}
