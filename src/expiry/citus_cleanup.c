/*-------------------------------------------------------------------------
 *
 * citus_cleanup.c
 *	  The cleanup of a table that Citus distributes (Citus rules 12 and 16).
 *
 * A DELETE ... FOR UPDATE SKIP LOCKED is refused on a distributed table, so
 * the coordinator (Citus group 0) deletes shard by shard: one statement per
 * node holding shards, each shard's DELETE bounded and passing over locked
 * rows, the whole call bounded by its batch size.  Other nodes leave
 * distributed tables to the coordinator and clean only their node-local
 * tables (state history).  The registry's shards have no index on
 * expires_at either: they are swept by block ranges like the plain registry
 * (sweep.c).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/expiry/citus_cleanup.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "distributed/delegate.h"
#include "expiry/citus_cleanup.h"
#include "expiry/sweep.h"
#include "frame/sqlcall.h"
#include "objects/citus_metadata.h"
#include "registry/registry.h"

/* a table's active placements, grouped by node; $2 this node's group */
static SqlStatement placements_stmt = {
	.sql = "SELECT pg_catalog.shard_name(s.logicalrelid, s.shardid),"
	" p.groupid, n.nodename, n.nodeport,"
	" p.groupid OPERATOR(pg_catalog.=) $2"
	" FROM pg_catalog.pg_dist_shard AS s"
	" JOIN pg_catalog.pg_dist_placement AS p"
	"   ON p.shardid OPERATOR(pg_catalog.=) s.shardid"
	" LEFT JOIN pg_catalog.pg_dist_node AS n"
	"   ON n.groupid OPERATOR(pg_catalog.=) p.groupid"
	"  AND n.noderole OPERATOR(pg_catalog.=) 'primary' AND n.isactive"
	" WHERE s.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass"
	"   AND p.shardstate OPERATOR(pg_catalog.=) 1"
	"   AND (n.nodeid IS NOT NULL OR p.groupid OPERATOR(pg_catalog.=) $2)"
	" ORDER BY p.groupid, s.shardid",
	.nargs = 2,
	.argtypes = {OIDOID, INT4OID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 5,
	.snapshot = SQL_SNAPSHOT_CALLER,
	.catalog_only = true,
};

/* the cleanup's statements for other nodes, each on a connection of its own */
static SqlStatement run_on_workers_stmt = {
	.sql = "SELECT r.success, r.result"
	" FROM pg_catalog.master_run_on_worker($1, $2, $3, true) AS r",
	.nargs = 3,
	.argtypes = {TEXTARRAYOID, INT4ARRAYOID, TEXTARRAYOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 2,
	.catalog_only = true,
};

/* One active shard placement. */
typedef struct CitusShard
{
	char	   *name;			/* schema-qualified, quoted */
	int			node;			/* index into the nodes */
	int32		limit;			/* rows its DELETE may take this round; 0:
								 * none */
	uint64		deleted;		/* this round */
	BlockNumber next_block;		/* sweep: the range this round starts at */
	uint64		nblocks;		/* sweep: the shard's length, as last seen */
} CitusShard;

/* A node holding some of the shards. */
typedef struct CitusNode
{
	char	   *name;
	int32		port;
	bool		local;			/* this node: run its statement through SPI */
} CitusNode;

/*
 * citus_cleanup_statement
 *		One statement deleting, on one node, up to each shard's limit of
 *		expired rows, oldest first, passing over rows a live transaction
 *		holds; it returns the counts as an integer array, in shard order.
 *		NULL if no shard of the node has anything to do this round.  The
 *		shards are plain tables on their node, so FOR UPDATE SKIP LOCKED and
 *		ctid are allowed there.
 *
 * With sweep (the registry, which has no expires_at index) each shard's DELETE
 * takes the expired rows of one block range, from next_block on, in heap
 * order, as sweep.c's statement does, and the answer also holds each shard's
 * length in blocks: "{deleted,nblocks,deleted,nblocks,...}".
 */
static char *
citus_cleanup_statement(CitusShard *shards, int nshards, int node, const char *expired,
						bool sweep)
{
	StringInfoData with;
	StringInfoData counts;
	int			n = 0;

	initStringInfo(&with);
	initStringInfo(&counts);
	for (int i = 0; i < nshards; i++)
	{
		if (shards[i].node != node || shards[i].limit == 0)
			continue;
		if (sweep)
		{
			appendStringInfo(&with,
							 "%sd%d AS (DELETE FROM %s AS t"
							 " WHERE t.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
							 "SELECT e.ctid FROM %s AS e"
							 " WHERE e.ctid OPERATOR(pg_catalog.>=) '(%u,0)'::pg_catalog.tid"
							 " AND e.ctid OPERATOR(pg_catalog.<) '(%u,0)'::pg_catalog.tid"
							 " AND %s"
							 " LIMIT %d FOR UPDATE SKIP LOCKED))"
							 " RETURNING 1)",
							 n == 0 ? "WITH " : ", ", n, shards[i].name, shards[i].name,
							 shards[i].next_block, shards[i].next_block + SWEEP_RANGE_BLOCKS,
							 expired, shards[i].limit);
			appendStringInfo(&counts,
							 "%s(SELECT pg_catalog.count(*) FROM d%d),"
							 " pg_catalog.pg_relation_size(%s::pg_catalog.regclass)"
							 " OPERATOR(pg_catalog./)"
							 " pg_catalog.current_setting('block_size')::pg_catalog.int8",
							 n == 0 ? "" : ", ", n, quote_literal_cstr(shards[i].name));
		}
		else
		{
			appendStringInfo(&with,
							 "%sd%d AS (DELETE FROM %s AS t"
							 " WHERE t.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
							 "SELECT e.ctid FROM %s AS e"
							 " WHERE %s"
							 " ORDER BY e.expires_at LIMIT %d FOR UPDATE SKIP LOCKED))"
							 " RETURNING 1)",
							 n == 0 ? "WITH " : ", ", n, shards[i].name, shards[i].name, expired,
							 shards[i].limit);
			appendStringInfo(&counts, "%s(SELECT pg_catalog.count(*) FROM d%d)", n == 0 ? "" : ", ", n);
		}
		n++;
	}
	if (n == 0)
		return NULL;
	appendStringInfo(&with, " SELECT ARRAY[%s]::pg_catalog.text", counts.data);
	return with.data;
}

/*
 * citus_cleanup_number
 *		The next number in a node's answer, after *p; moves *p past it.
 */
static uint64
citus_cleanup_number(const char **p, const char *answer)
{
	while (**p != '\0' && (**p < '0' || **p > '9'))
		(*p)++;
	if (**p == '\0')
		elog(ERROR, "unexpected answer from a cleanup statement: \"%s\"", answer);
	return strtoul(*p, (char **) p, 10);
}

/*
 * citus_cleanup_counts
 *		Spread a node's answer, "{3,0,5}" (with sweep, each count followed by
 *		the shard's length in blocks), over its shards in this round.
 */
static uint64
citus_cleanup_counts(CitusShard *shards, int nshards, int node, const char *answer,
					 bool sweep)
{
	const char *p = answer;
	uint64		total = 0;

	for (int i = 0; i < nshards; i++)
	{
		if (shards[i].node != node || shards[i].limit == 0)
			continue;
		shards[i].deleted = citus_cleanup_number(&p, answer);
		if (sweep)
			shards[i].nblocks = citus_cleanup_number(&p, answer);
		total += shards[i].deleted;
	}
	return total;
}

/*
 * citus_cleanup_round
 *		Run one round: the local node's statement through SPI, the others'
 *		in parallel through Citus's master_run_on_worker(), each on a
 *		connection of its own that commits by itself.  Returns how many rows
 *		went.
 */
static uint64
citus_cleanup_round(CitusShard *shards, int nshards, CitusNode *nodes, int nnodes,
					const char *expired, const char *table, bool sweep)
{
	Datum	   *names = palloc(sizeof(Datum) * nnodes);
	Datum	   *ports = palloc(sizeof(Datum) * nnodes);
	Datum	   *commands = palloc(sizeof(Datum) * nnodes);
	int		   *which = palloc(sizeof(int) * nnodes);
	int			nremote = 0;
	uint64		total = 0;

	for (int node = 0; node < nnodes; node++)
	{
		char	   *sql = citus_cleanup_statement(shards, nshards, node, expired, sweep);

		if (sql == NULL)
			continue;
		if (nodes[node].local)
		{
			bool		isnull;
			Datum		answer;

			if (SqlExecuteOnce(sql, 0, NULL, NULL, SPI_OK_SELECT) != 1)
				elog(ERROR, "a cleanup statement returned no answer");
			answer = SqlResult(0, 1, &isnull);
			if (isnull)
				elog(ERROR, "a cleanup statement returned no answer");
			total += citus_cleanup_counts(shards, nshards, node,
										  TextDatumGetCString(answer), sweep);
			continue;
		}
		names[nremote] = CStringGetTextDatum(nodes[node].name);
		ports[nremote] = Int32GetDatum(nodes[node].port);
		commands[nremote] = CStringGetTextDatum(sql);
		which[nremote] = node;
		nremote++;
	}

	if (nremote > 0)
	{
		Datum		values[3];

		values[0] = PointerGetDatum(construct_array(names, nremote, TEXTOID, -1, false, TYPALIGN_INT));
		values[1] = PointerGetDatum(construct_array(ports, nremote, INT4OID, 4, true, TYPALIGN_INT));
		values[2] = PointerGetDatum(construct_array(commands, nremote, TEXTOID, -1, false, TYPALIGN_INT));
		if (SqlExecute(&run_on_workers_stmt, values, NULL) != (uint64) nremote)
			elog(ERROR, "master_run_on_worker did not answer for every node");

		for (int i = 0; i < nremote; i++)
		{
			bool		isnull;
			bool		success = DatumGetBool(SqlResult(i, 1, &isnull));
			Datum		answer = SqlResult(i, 2, &isnull);
			char	   *result = isnull ? NULL : TextDatumGetCString(answer);
			CitusNode  *node = &nodes[which[i]];

			if (!success)
				ereport(ERROR,
						(errcode(strncmp(result ? result : "", "failed to connect", 17) == 0 ?
								 ERRCODE_CONNECTION_FAILURE : ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
						 errmsg("could not delete expired rows of table \"idempotency.%s\" on node %s:%d",
								table, node->name, node->port),
						 errdetail("%s", result ? result : "no answer")));
			total += citus_cleanup_counts(shards, nshards, which[i], result ? result : "", sweep);
		}
	}
	return total;
}

/*
 * IdempotencyCitusCleanup
 *		Delete up to limit expired rows of a hash-distributed table of ours,
 *		shard by shard; false if the table is not hash-distributed (the
 *		caller then runs its plain statement).  Only the coordinator deletes:
 *		anywhere else this deletes nothing and returns true.  Called inside
 *		the caller's SQL frame (sqlcall.c: SPI connected, as the tables' owner).
 *
 * The limit is shared among the shards: each round gives every shard still
 * in play an equal part of what is left (at least one row, to as many shards
 * as that allows), and a shard that did not use all of its part leaves play.
 * So the call deletes at most limit rows, and fewer only if the table has
 * fewer expired rows that no transaction holds: what a batch means on a
 * single server, which the background worker relies on to know when to
 * stop.  With the default batch size there is usually one round.
 *
 * The registry's shards are swept by block ranges (sweep, as sweep.c does
 * on a plain server): a shard stays in play while its part was used up (its
 * range may hold more) or, having used less, moves on to its next range
 * until it has reached its end.  Each call sweeps every shard from block 0:
 * the position is not kept per shard (the coordinator would need a slot per
 * shard, and each background worker is a new process), so the call is not
 * paced by blocks.  A shard is rescanned from its start on every call, which
 * costs reading what the last call left dead until vacuum, about one range.
 */
bool
IdempotencyCitusCleanup(CitusTable table, TimestampTz now, int32 limit, uint64 *deleted)
{
	SqlCall		call;
	Datum		values[2];
	CitusShard *shards;
	CitusNode  *nodes;
	int			nshards;
	int			nnodes = 0;
	int32		group;
	char	   *now_literal;
	char	   *expired;
	int64		budget = limit;
	int			inplay;
	bool	   *play;
	bool		sweep = table == CITUS_REGISTRY;

	if (IdempotencyCitusPartMethod(table) != 'h')
		return false;
	*deleted = 0;

	SqlCallBeginAsCaller(&call);
	group = IdempotencyCitusLocalGroup();
	if (group != 0)
	{
		SqlCallEnd(&call);
		return true;			/* a worker node: the coordinator cleans
								 * shards */
	}

	/* the active placements, grouped by node */
	values[0] = ObjectIdGetDatum(IdempotencyCitusTableRelid(table));
	values[1] = Int32GetDatum(group);
	nshards = (int) SqlExecute(&placements_stmt, values, NULL);
	shards = palloc0(sizeof(CitusShard) * Max(nshards, 1));
	nodes = palloc0(sizeof(CitusNode) * Max(nshards, 1));
	for (int i = 0; i < nshards; i++)
	{
		bool		isnull;
		int32		shard_group = DatumGetInt32(SqlResult(i, 2, &isnull));

		if (i == 0 || shard_group != DatumGetInt32(SqlResult(i - 1, 2, &isnull)))
		{
			nodes[nnodes].local = DatumGetBool(SqlResult(i, 5, &isnull));
			nodes[nnodes].name = nodes[nnodes].local ? NULL :
				TextDatumGetCString(SqlResult(i, 3, &isnull));
			nodes[nnodes].port = nodes[nnodes].local ? 0 :
				DatumGetInt32(SqlResult(i, 4, &isnull));
			nnodes++;
		}
		shards[i].name = TextDatumGetCString(SqlResult(i, 1, &isnull));
		shards[i].node = nnodes - 1;
	}

	now_literal = quote_literal_cstr(DatumGetCString(DirectFunctionCall1(timestamptz_out,
																		 TimestampTzGetDatum(now))));

	/*
	 * What counts as expired: as each table's cleanup statement has it, a
	 * registry record also needs its last attempt two seconds behind the
	 * clock, so that no fencing token is issued twice (RegistryFence).
	 */
	expired = psprintf("e.expires_at OPERATOR(pg_catalog.<=) %s::pg_catalog.timestamptz%s",
					   now_literal,
					   table == CITUS_REGISTRY ?
					   psprintf(" AND e.attempt OPERATOR(pg_catalog.<) %d", RegistryFence() - 1) : "");

	/* rounds: an equal part of what is left for each shard still in play */
	play = palloc(sizeof(bool) * Max(nshards, 1));
	memset(play, true, sizeof(bool) * Max(nshards, 1));
	inplay = nshards;
	while (budget > 0 && inplay > 0)
	{
		int64		part = Max(budget / inplay, 1);
		int64		handed = 0;
		uint64		round;

		for (int i = 0; i < nshards; i++)
		{
			shards[i].limit = 0;
			shards[i].deleted = 0;
			if (play[i] && handed < budget)
			{
				shards[i].limit = (int32) Min(part, budget - handed);
				handed += shards[i].limit;
			}
		}

		round = citus_cleanup_round(shards, nshards, nodes, nnodes, expired,
									get_rel_name(IdempotencyCitusTableRelid(table)), sweep);
		*deleted += round;
		budget -= (int64) round;

		/*
		 * Out of play: the shards that did not use all of their part (with
		 * sweep: and have no range left).  Each round either deletes rows,
		 * moves a shard to its next range or takes shards out of play, so the
		 * rounds end.
		 */
		inplay = 0;
		for (int i = 0; i < nshards; i++)
		{
			if (shards[i].limit > 0)
			{
				play[i] = shards[i].deleted >= (uint64) shards[i].limit;
				if (sweep && !play[i])
				{
					shards[i].next_block += SWEEP_RANGE_BLOCKS;
					play[i] = shards[i].next_block < shards[i].nblocks;
				}
			}
			inplay += play[i] ? 1 : 0;
		}
	}

	SqlCallEnd(&call);
	return true;
}
