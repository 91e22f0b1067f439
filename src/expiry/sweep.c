/*-------------------------------------------------------------------------
 *
 * sweep.c
 *	  The registry's cleanup: a sweep of the heap by block ranges that
 *	  remembers where it stopped, instead of an index on expires_at.
 *
 * The registry has one index, its primary key.  A btree on expires_at
 * would serve only the cleanup and cost every claim a second index insert
 * (about 7% of the execute path), so the cleanup walks the heap
 * instead, the way autovacuum does: sweep_stmt deletes the expired records
 * of one range of SWEEP_RANGE_BLOCKS blocks, which PostgreSQL reads with a
 * Tid Range Scan ('(b,0)' <= ctid < '(b + n,0)'), and the sweep moves on
 * range by range.  What the btree batch did stays: the fencing margin
 * (attempt < fence - 1), SKIP LOCKED, one short transaction per call.
 *
 * Where the sweep stopped (SweepPosition): in the database's CleanupStatus
 * slot in shared memory when the library is preloaded and the database has
 * a slot (the background worker claims it), otherwise in a static of this
 * backend.  A lost position (a restart, a new backend, the registry created
 * again, a heap now shorter) just starts again at block 0.  The position is
 * saved when the call ends, even if the caller's transaction later rolls
 * back: the rows that were deleted then come back and wait for the next lap,
 * which is never wrong (an expired record counts as absent anyway).  Two
 * sweeps at once (a hand call while the worker runs) may each save their own
 * position, and the last one wins: the position is a hint, not a lock.
 *
 * One call (SweepRegistry) sweeps from the remembered position, range by
 * range, wrapping from the heap's end to block 0, until:
 * - it has deleted its limit: a range cut short by the limit is resumed at
 *	 the block of the last record deleted (a Tid Range Scan returns blocks in
 *	 order, so everything before it was looked at);
 * - or it has swept the whole heap once (a lap): nothing expired is left
 *	 that no transaction holds, as the btree batch used to mean by coming
 *	 back short;
 * - or, when paced, it has swept SWEEP_PACED_BLOCKS blocks.
 * So cleanup() by hand behaves as before: a call deletes a batch, and a
 * call that deletes fewer than its batch size has left nothing expired
 * behind it (tests that empty a table call it once or until it returns 0).
 * On a large table with nothing expired a hand call reads the whole heap.
 *
 * The background worker calls paced (worker.c): each of its batches is
 * bounded by rows and by SWEEP_PACED_BLOCKS blocks, so a batch on a huge
 * table with nothing expired still ends quickly and the worker's pacing
 * (about a second per worker, the rate cap, the backlog hand-over) holds.
 * Its pass over a database is over when a batch deletes fewer than its size
 * and the sweep has covered the whole heap since the pass began
 * (SweepPosition.pass_blocks, reset by SweepPassBegin).  Without a shared
 * slot a paced call is not paced: it sweeps a lap like a hand call, since a
 * static position dies with the short-lived worker.
 *
 * Under Citus the registry's shards are swept by citus_cleanup.c with the same
 * statement shape; see IdempotencyCitusCleanup.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/expiry/sweep.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/itemptr.h"
#include "storage/lwlock.h"
#include "utils/rel.h"

#include "base/shmem.h"
#include "expiry/sweep.h"
#include "frame/sqlcall.h"
#include "objects/extension.h"
#include "registry/registry.h"

/*
 * $1 now, $2 batch size, $3 a fencing token one second older than the
 * current one, $4 and $5 a block range of the heap, '(b,0)' to '(b + n,0)':
 * a Tid Range Scan of those blocks.  The expired records in heap order;
 * SKIP LOCKED passes over any record a live transaction is changing (a
 * claim being taken over, say), so the cleanup never waits for the
 * application nor removes what it holds.  A record whose last attempt was
 * issued within the last two seconds stays a little longer: once it is
 * gone, the next claim of its key starts from the clock, and that must be
 * above every attempt the record ever had (RegistryFence).  The one row
 * returned holds how many went and the highest ctid deleted: when the batch
 * size cut the range short, the sweep goes on from that block.
 */
static SqlStatement sweep_stmt = {
	.sql = "WITH d AS (DELETE FROM idempotency.registry AS r"
	" WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
	"   SELECT e.ctid FROM idempotency.registry AS e"
	"    WHERE e.ctid OPERATOR(pg_catalog.>=) $4"
	"    AND e.ctid OPERATOR(pg_catalog.<) $5"
	"    AND e.expires_at OPERATOR(pg_catalog.<=) $1"
	"    AND e.attempt OPERATOR(pg_catalog.<) $3"
	"    LIMIT $2 FOR UPDATE SKIP LOCKED))"
	" RETURNING r.ctid)"
	" SELECT pg_catalog.count(*), pg_catalog.max(d.ctid) FROM d",
	.nargs = 5,
	.argtypes = {TIMESTAMPTZOID, INT4OID, INT4OID, TIDOID, TIDOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 2,
	.custom_plan = true,
};

/* The position when there is no shared slot to keep it in. */
static SweepPosition sweep_local_position;

/*
 * sweep_load
 *		Where the sweep of relid stopped; *shared says whether the position
 *		came from (and goes back to) shared memory: this database's status
 *		slot, if it has one.  A sweep never claims a slot (only the worker
 *		does), so a hand call does not make a database appear in
 *		cleanup_status.
 */
static BlockNumber
sweep_load(Oid relid, bool *shared)
{
	SweepPosition position = sweep_local_position;

	*shared = false;
	if (IdempotencyShared != NULL)
	{
		CleanupStatus *slot;

		LWLockAcquire(IdempotencyShared->lock, LW_SHARED);
		slot = CleanupStatusFind(MyDatabaseId);
		if (slot != NULL)
		{
			position = slot->sweep;
			*shared = true;
		}
		LWLockRelease(IdempotencyShared->lock);
	}
	return position.relid == relid ? position.next_block : 0;
}

/*
 * sweep_save
 *		Remember where the sweep of relid stopped and add the blocks swept
 *		to the worker's pass; returns the pass's blocks so far.  If the slot
 *		went away meanwhile (the launcher freed it), the backend keeps the
 *		position.
 */
static uint64
sweep_save(Oid relid, BlockNumber next_block, uint64 swept, bool shared)
{
	SweepPosition *position = &sweep_local_position;
	uint64		pass_blocks;

	if (shared)
	{
		CleanupStatus *slot;

		LWLockAcquire(IdempotencyShared->lock, LW_EXCLUSIVE);
		slot = CleanupStatusFind(MyDatabaseId);
		if (slot != NULL)
			position = &slot->sweep;
	}
	if (position->relid != relid)
		position->pass_blocks = 0;
	position->relid = relid;
	position->next_block = next_block;
	position->pass_blocks += swept;
	pass_blocks = position->pass_blocks;
	if (shared)
		LWLockRelease(IdempotencyShared->lock);
	return pass_blocks;
}

/*
 * sweep_range
 *		Delete up to limit expired records in blocks [from, to); returns how
 *		many went, and in *last the block of the last one (from if none).
 *		Runs in the caller's SQL frame (sqlcall.c).
 */
static uint64
sweep_range(TimestampTz now, int32 fence, int32 limit, BlockNumber from,
			BlockNumber to, BlockNumber *last)
{
	ItemPointerData lower;
	ItemPointerData upper;
	Datum		values[5];
	Datum		result;
	bool		isnull;
	uint64		deleted;

	ItemPointerSet(&lower, from, 0);
	ItemPointerSet(&upper, to, 0);
	values[0] = TimestampTzGetDatum(now);
	values[1] = Int32GetDatum(limit);
	values[2] = Int32GetDatum(fence);
	values[3] = PointerGetDatum(&lower);
	values[4] = PointerGetDatum(&upper);

	if (SqlExecute(&sweep_stmt, values, NULL) != 1)
		elog(ERROR, "unexpected answer from the registry's cleanup statement");
	result = SqlResult(0, 1, &isnull);
	deleted = (uint64) DatumGetInt64(result);
	result = SqlResult(0, 2, &isnull);
	*last = isnull ? from : ItemPointerGetBlockNumber((ItemPointer) DatumGetPointer(result));

	/*
	 * A record updated after the statement's snapshot is locked in its new
	 * version, which may lie outside the range (a Tid Range Scan does not
	 * recheck its range then); keep the position within the range.
	 */
	*last = Min(Max(*last, from), to);
	return deleted;
}

/*
 * SweepRegistry
 *		Delete up to limit expired records of the (plain, not distributed)
 *		registry, in the caller's SQL frame, sweeping from where the last
 *		call stopped; see the file header for when a call ends.  With paced,
 *		*more says whether the worker's pass has yet to cover the whole heap;
 *		it is false otherwise.
 */
uint64
SweepRegistry(SqlCall *call, int32 limit, bool paced, bool *more)
{
	int32		fence = RegistryFence() - 1;
	Oid			relid = IdempotencyCatalogGet()->relids[IR_REGISTRY];
	Relation	rel;
	BlockNumber nblocks;
	BlockNumber next;
	uint64		swept = 0;
	uint64		deleted = 0;
	uint64		pass_blocks;
	bool		shared;

	Assert(limit > 0);
	*more = false;

	/* the heap's length now; blocks added meanwhile wait for the next lap */
	rel = table_open(relid, AccessShareLock);
	nblocks = RelationGetNumberOfBlocks(rel);
	table_close(rel, AccessShareLock);

	next = sweep_load(relid, &shared);
	if (next >= nblocks)
		next = 0;
	paced = paced && shared;

	while (deleted < (uint64) limit && swept < nblocks &&
		   !(paced && swept >= SWEEP_PACED_BLOCKS))
	{
		BlockNumber to = (BlockNumber) Min((uint64) next + SWEEP_RANGE_BLOCKS,
										   (uint64) nblocks);
		int32		want = limit - (int32) deleted;
		BlockNumber last;
		uint64		n;

		CHECK_FOR_INTERRUPTS();
		n = sweep_range(call->now, fence, want, next, to, &last);
		deleted += n;
		if (n >= (uint64) want)
		{
			/* cut short by the limit: go on from the last block deleted */
			swept += last - next;
			next = last;
			break;
		}
		swept += to - next;
		next = to >= nblocks ? 0 : to;
	}

	pass_blocks = sweep_save(relid, next, swept, shared);
	*more = paced && pass_blocks < nblocks;
	return deleted;
}

/*
 * SweepPassBegin
 *		The worker starts a pass over its database: its blocks count from
 *		here.  Caller holds IdempotencyShared->lock exclusively.
 */
void
SweepPassBegin(CleanupStatus *slot)
{
	slot->sweep.pass_blocks = 0;
}
