/*-------------------------------------------------------------------------
 *
 * citus.c
 *	  What the extension does differently once idempotency.citus_setup()
 *	  has distributed its tables with Citus.
 *
 * Nothing here links against Citus: Citus is optional, and everything it
 * knows is read from its catalog tables (pg_dist_partition, pg_dist_shard,
 * pg_dist_placement, pg_dist_node, pg_dist_local_group) with SQL, after
 * checking that they exist.  A database without Citus pays one syscache
 * probe per backend and table for all of this.
 *
 * - Which of our tables are distributed: a per-backend cache, reset by a
 *	 relcache invalidation of the table (Citus sends one when it distributes
 *	 a table, on every node that learns of it).
 * - The cleanup (Citus rules 12 and 16, README): a DELETE ... FOR UPDATE SKIP
 *	 LOCKED is refused on a distributed table, so the coordinator (Citus
 *	 group 0) deletes shard by shard: one statement per node holding shards,
 *	 each shard's DELETE bounded and passing over locked rows, the whole call
 *	 bounded by its batch size.  Other nodes leave distributed tables to the
 *	 coordinator and clean only their node-local tables (state history).
 *	 The registry's shards have no index on expires_at either: they are
 *	 swept by block ranges like the plain registry (sweep.c).
 * - The inbox's batch (rule 13): statements whose success does not depend
 *	 on catching an error.
 * - Shards seen by triggers (rule 15): the distributed table a shard belongs
 *	 to, for history rows and for the state machine cache's invalidation.
 * - my_records and my_tokens (rule 14): citus_setup() points the views at
 *	 functions that read the rows as the registry's owner, because Citus
 *	 checks shard privileges as the caller.
 * - One request, one worker, one connection (doc/scaling-out-single-shard.md):
 *	 on the coordinator, idempotent_begin, idempotent_finish,
 *	 idempotent_abandon and lookup hand their call to the worker holding the
 *	 key, through Citus's forced function delegation, as the caller.  The
 *	 caller's business writes in the same transaction travel over the same
 *	 connection, so Citus commits them with the record in one phase.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/citus.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "citus.h"
#include "compat.h"
#include "extension.h"
#include "registry.h"
#include "sqlcall.h"
#include "sweep.h"

/* The tables whose distribution we keep track of, among the extension's. */
static const IdempotencyRelation citus_table_relations[CITUS_NUM_TABLES] = {
	[CITUS_REGISTRY] = IR_REGISTRY,
	[CITUS_INBOX] = IR_INBOX,
	[CITUS_TOKENS] = IR_TOKENS,
	[CITUS_HISTORY] = IR_STATE_HISTORY,
	[CITUS_OUTBOX] = IR_OUTBOX,
};

typedef struct CitusTableState
{
	bool		valid;
	Oid			relid;
	char		partmethod;		/* pg_dist_partition.partmethod; '\0': not a
								 * Citus table */
} CitusTableState;

static CitusTableState citus_tables[CITUS_NUM_TABLES];

/* The last relation asked about by IdempotencyCitusShardOf, and the answer. */
static Oid	shard_cache_relid = InvalidOid;
static Oid	shard_cache_parent = InvalidOid;

/*
 * The API functions that hand their calls to a worker, and the functions
 * they hand them to: the same C entry points declared with the key as an
 * idempotency.key (Citus pins a forced delegation to the value of the
 * distribution argument, and compares it with the registry's distribution
 * column by type as well as by value).  They are distributed by the key or,
 * with citus_setup(distribute_by => 'scope'), by the scope: pg_dist_object
 * says which argument.  A begin with require_token also reads the tokens
 * table, co-located with the registry and distributed by the same value
 * (the token is the key; or the scope), so it too stays within the pin.
 */
typedef struct CitusDelegateDef
{
	const char *name;			/* the delegate, in the extension's schema */
	const char *main;			/* the function it stands for, likewise */
	SqlStatement call;			/* the call, made as the caller */
} CitusDelegateDef;

/*
 * The delegate's arguments are the main function's, with the key (always
 * the first) an idempotency.key where the main function takes text.
 */
#define CITUS_DELEGATE_CALL(text, n, ...) \
	{.sql = (text), .nargs = (n), .argtypes = {SQL_KEYTYPE, __VA_ARGS__}, \
	 .expected_rc = SPI_OK_SELECT}

static CitusDelegateDef citus_delegate_defs[CITUS_NUM_DELEGATES] = {
	[CITUS_DELEGATE_BEGIN] = {
		"citus_idempotent_begin", "idempotent_begin",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_idempotent_begin($1, $2, $3, $4, $5,"
							" $6, $7, $8, $9, $10)", 10,
							TEXTOID, JSONBOID, INTERVALOID, INTERVALOID, BOOLOID, BOOLOID,
							INTERVALOID, BOOLOID, BOOLOID)
	},
	[CITUS_DELEGATE_FINISH] = {
		"citus_idempotent_finish", "idempotent_finish",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_idempotent_finish($1, $2, $3, $4, $5,"
							" $6, $7, $8, $9)", 9,
							JSONBOID, TEXTOID, INT4OID, BOOLOID, INT4OID, BYTEAOID, INTERVALOID,
							JSONBOID)
	},
	[CITUS_DELEGATE_ABANDON] = {
		"citus_idempotent_abandon", "idempotent_abandon",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_idempotent_abandon($1, $2, $3)", 3,
							TEXTOID, INT4OID)
	},
	[CITUS_DELEGATE_LOOKUP] = {
		"citus_lookup", "lookup",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_lookup($1, $2, $3)", 3,
							TEXTOID, JSONBOID)
	},
	[CITUS_DELEGATE_CHECKPOINT] = {
		"citus_idempotent_checkpoint", "idempotent_checkpoint",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_idempotent_checkpoint($1, $2, $3,"
							" $4, $5)", 5,
							TEXTOID, JSONBOID, TEXTOID, INT4OID)
	},
	[CITUS_DELEGATE_RENEW] = {
		"citus_idempotent_renew", "idempotent_renew",
		CITUS_DELEGATE_CALL("SELECT * FROM idempotency.citus_idempotent_renew($1, $2, $3, $4)", 4,
							INTERVALOID, TEXTOID, INT4OID)
	},
};

/*
 * How Citus routes calls of a function that is a member of this extension:
 * the argument (from 0) and whether with force_delegation; no row if it
 * routes none.
 */
static SqlStatement function_distarg_stmt = {
	.sql = "SELECT o.distribution_argument_index, o.force_delegation IS TRUE"
	" FROM pg_catalog.pg_dist_object AS o"
	" JOIN pg_catalog.pg_depend AS d"
	"   ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass"
	"  AND d.objid OPERATOR(pg_catalog.=) o.objid"
	"  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass"
	"  AND d.refobjid OPERATOR(pg_catalog.=) $2"
	"  AND d.deptype OPERATOR(pg_catalog.=) 'e'"
	" WHERE o.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass"
	"   AND o.objid OPERATOR(pg_catalog.=) $1"
	"   AND o.distribution_argument_index IS NOT NULL",
	.nargs = 2,
	.argtypes = {OIDOID, OIDOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 2,
	.snapshot = SQL_SNAPSHOT_CALLER,
	.catalog_only = true,
};

/*
 * Per backend: whether this node hands calls over (the coordinator, with the
 * registry distributed and the delegates distributed with force_delegation),
 * and the functions the delegates stand for; and whether the registry's shards are a
 * version behind its SQL objects.  Reset by an invalidation of the registry
 * or of pg_dist_object (Citus sends one when it distributes a function).
 */
typedef struct CitusDelegateState
{
	bool		valid;
	bool		shards_behind;	/* updated, citus_setup() not yet run again */
	Oid			dist_object_relid;	/* pg_dist_object, watched */
	bool		active[CITUS_NUM_DELEGATES];
	int			distarg[CITUS_NUM_DELEGATES];	/* the key's or the scope's
												 * argument */
	Oid			main_fns[CITUS_NUM_DELEGATES];	/* looked up on first use */
} CitusDelegateState;

static CitusDelegateState citus_delegate;

/* Set while a call is being handed over: its delegate then runs here. */
static bool citus_delegating = false;

/*
 * Set when the tokens were written here as their owner in the current
 * transaction (issue_token, consume_token): their shards are co-located
 * with the registry's, and a call handed over on the caller's connection
 * could touch placements the owner's connection modified, which Citus
 * refuses.  The rest of the transaction runs its calls here, as before.
 * Reset at the end of the transaction.
 */
static bool citus_owner_in_xact = false;
static bool citus_xact_callback_registered = false;

/*
 * IdempotencyCitusInvalidate
 *		Forget what we know about a table when it (or everything) is
 *		invalidated; called by the extension's relcache callback.
 */
void
IdempotencyCitusInvalidate(Oid relid)
{
	for (int i = 0; i < CITUS_NUM_TABLES; i++)
		if (relid == InvalidOid || relid == citus_tables[i].relid)
			citus_tables[i].valid = false;
	if (relid == InvalidOid || relid == shard_cache_relid)
		shard_cache_relid = InvalidOid;
	if (relid == InvalidOid || relid == citus_delegate.dist_object_relid ||
		relid == citus_tables[CITUS_REGISTRY].relid)
		citus_delegate.valid = false;
}

/*
 * citus_catalog_exists
 *		Whether Citus's catalog tables are there (the extension is created in
 *		this database).  A syscache probe.
 */
static bool
citus_catalog_exists(void)
{
	return OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE));
}

/*
 * The queries on Citus's catalog, run as whoever is running, on the
 * caller's snapshot (catalog_only: they name none of the extension's
 * objects; a check on a shard must not depend on them).
 */
static SqlStatement partmethod_stmt = {
	.sql = "SELECT p.partmethod FROM pg_catalog.pg_dist_partition AS p"
	" WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
	.nargs = 1,
	.argtypes = {OIDOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
	.snapshot = SQL_SNAPSHOT_CALLER,
	.catalog_only = true,
};

static SqlStatement local_group_stmt = {
	.sql = "SELECT g.groupid FROM pg_catalog.pg_dist_local_group AS g",
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
	.snapshot = SQL_SNAPSHOT_CALLER,
	.catalog_only = true,
};

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

static SqlStatement shard_table_stmt = {
	.sql = "SELECT s.logicalrelid::pg_catalog.oid FROM pg_catalog.pg_dist_shard AS s"
	" WHERE s.shardid OPERATOR(pg_catalog.=) $1",
	.nargs = 1,
	.argtypes = {INT8OID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
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

/*
 * IdempotencyCitusPartMethod
 *		How Citus distributes one of our tables: 'h' (hash), 'n' (reference
 *		or Citus local table), ..., or '\0' when it is a plain table.
 */
char
IdempotencyCitusPartMethod(CitusTable table)
{
	CitusTableState *state = &citus_tables[table];

	if (state->valid)
		return state->partmethod;

	state->relid = IdempotencyCatalogGet()->relids[citus_table_relations[table]];
	state->partmethod = '\0';
	if (OidIsValid(state->relid) && citus_catalog_exists())
	{
		Datum		values[1] = {ObjectIdGetDatum(state->relid)};
		bool		isnull;
		SqlCall		call;

		SqlCallBeginAsCaller(&call);
		if (SqlExecute(&partmethod_stmt, values, NULL) == 1)
			state->partmethod = DatumGetChar(SqlResult(0, 1, &isnull));
		SqlCallEnd(&call);
	}
	state->valid = true;
	return state->partmethod;
}

/*
 * citus_local_group
 *		This node's Citus group id: 0 on the coordinator, whether or not any
 *		node is registered yet (citus_is_coordinator() says false then).  In
 *		the frame, with Citus's catalog present.
 */
static int32
citus_local_group(void)
{
	bool		isnull;

	if (SqlExecute(&local_group_stmt, NULL, NULL) != 1)
		elog(ERROR, "pg_dist_local_group has no row");
	return DatumGetInt32(SqlResult(0, 1, &isnull));
}

/*
 * The cleanup of a distributed table.
 */

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
	group = citus_local_group();
	if (group != 0)
	{
		SqlCallEnd(&call);
		return true;			/* a worker node: the coordinator cleans
								 * shards */
	}

	/* the active placements, grouped by node */
	values[0] = ObjectIdGetDatum(citus_tables[table].relid);
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
									get_rel_name(IdempotencyCatalogGet()->relids[citus_table_relations[table]]), sweep);
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

/*
 * IdempotencyCitusShardOf
 *		The distributed table that rel is a shard of, or InvalidOid.  A
 *		trigger on a distributed table fires on its shards, where TG_RELID is
 *		the shard: "orders_102173" in the table's schema, the table's name and
 *		its shard id, which pg_dist_shard confirms.  The answer for the last
 *		relation asked about is kept until it is invalidated, so a statement
 *		writing many rows asks Citus once.
 */
Oid
IdempotencyCitusShardOf(Relation rel)
{
	const char *name = RelationGetRelationName(rel);
	const char *suffix = strrchr(name, '_');
	Oid			parent = InvalidOid;

	if (RelationGetRelid(rel) == shard_cache_relid)
		return shard_cache_parent;

	if (suffix != NULL && suffix[1] != '\0' &&
		strspn(suffix + 1, "0123456789") == strlen(suffix + 1) &&
		strlen(suffix + 1) < 19 && citus_catalog_exists())
	{
		Datum		values[1] = {Int64GetDatum(strtoi64(suffix + 1, NULL, 10))};
		bool		isnull;
		SqlCall		call;

		SqlCallBeginAsCaller(&call);
		if (SqlExecute(&shard_table_stmt, values, NULL) == 1)
		{
			Oid			candidate = DatumGetObjectId(SqlResult(0, 1, &isnull));
			char	   *candidate_name = get_rel_name(candidate);

			if (candidate_name != NULL &&
				get_rel_namespace(candidate) == RelationGetNamespace(rel) &&
				strlen(candidate_name) == (size_t) (suffix - name) &&
				strncmp(candidate_name, name, suffix - name) == 0)
				parent = candidate;
		}
		SqlCallEnd(&call);
	}
	shard_cache_relid = RelationGetRelid(rel);
	shard_cache_parent = parent;
	return parent;
}

/*
 * IdempotencyCitusTableName
 *		The schema-qualified name of the table a trigger fired for: of the
 *		distributed table when it fired on a shard.
 */
char *
IdempotencyCitusTableName(Relation rel)
{
	Oid			parent = IdempotencyCitusShardOf(rel);

	if (OidIsValid(parent))
		return quote_qualified_identifier(get_namespace_name(get_rel_namespace(parent)),
										  get_rel_name(parent));
	return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
									  RelationGetRelationName(rel));
}

/*
 * citus_own_rows
 *		Read the caller's own rows as the tables' owner (select runs the
 *		statement) and hand each row the frame returned to emit, which adds
 *		it to the result set; only for a caller who may read the view the
 *		rows are for.
 */
static void
citus_own_rows(FunctionCallInfo fcinfo, const char *view, uint64 (*select) (SqlCall *call),
			   void (*emit) (ReturnSetInfo *rsinfo, HeapTuple tuple, TupleDesc desc))
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SqlCall		call;
	uint64		n;

	IdempotencyRequireViewPrivilege(view);
	InitMaterializedSRF(fcinfo, 0);
	SqlCallBegin(&call);
	n = select(&call);
	for (uint64 i = 0; i < n; i++)
		emit(rsinfo, SPI_tuptable->vals[i], SPI_tuptable->tupdesc);
	SqlCallEnd(&call);
}

/*
 * citus_emit_record
 *		One row of my_records: the registry's columns, and whether it expired
 *		(as of the transaction's start, as now() in the view).
 */
static void
citus_emit_record(ReturnSetInfo *rsinfo, HeapTuple tuple, TupleDesc desc)
{
	TupleDesc	out = rsinfo->setDesc;
	RegistryOutput *map = RegistryOutputMap(out);
	RegistryRow row;
	Datum	   *values = palloc0(out->natts * sizeof(Datum));
	bool	   *nulls = palloc(out->natts * sizeof(bool));

	memset(nulls, true, out->natts * sizeof(bool));
	RegistryRowFromTuple(&row, tuple, desc);
	RegistryOutputFill(map, &row, values, nulls);
	for (int i = 0; i < out->natts; i++)
	{
		if (strcmp(NameStr(TupleDescAttr(out, i)->attname), "expired") != 0)
			continue;
		values[i] = BoolGetDatum(!RegistryRowLive(&row, GetCurrentTransactionStartTimestamp()));
		nulls[i] = false;
	}
	tuplestore_putvalues(rsinfo->setResult, out, values, nulls);
}

PG_FUNCTION_INFO_V1(idempotency_citus_my_records);

/*
 * idempotency_citus_my_records
 *		The caller's records, read as the registry's owner: what my_records
 *		shows once citus_setup() has distributed the registry.
 */
Datum
idempotency_citus_my_records(PG_FUNCTION_ARGS)
{
	citus_own_rows(fcinfo, "my_records", RegistrySelectOwn, citus_emit_record);
	return (Datum) 0;
}

/* all of a role's tokens, $1 its name, on the caller's snapshot */
static SqlStatement own_tokens_stmt = {
	.sql = "SELECT t.token, t.scope, t.issued_at, t.expires_at, t.consumed_at"
	" FROM idempotency.tokens AS t WHERE t.owner OPERATOR(pg_catalog.=) $1",
	.nargs = 1,
	.argtypes = {TEXTOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 5,
	.snapshot = SQL_SNAPSHOT_CALLER,
};

/*
 * citus_select_tokens
 *		Read all of the caller's tokens; returns how many there are.
 */
static uint64
citus_select_tokens(SqlCall *call)
{
	Datum		values[1] = {call->owner};

	return SqlExecute(&own_tokens_stmt, values, NULL);
}

/*
 * citus_emit_token
 *		One row of my_tokens, with its state.
 */
static void
citus_emit_token(ReturnSetInfo *rsinfo, HeapTuple tuple, TupleDesc desc)
{
	Datum		values[6];
	bool		nulls[6];
	const char *state;

	for (int i = 0; i < 5; i++)
		values[i] = SPI_getbinval(tuple, desc, i + 1, &nulls[i]);
	if (!nulls[4])
		state = "used";
	else if (DatumGetTimestampTz(values[3]) <= GetCurrentTransactionStartTimestamp())
		state = "expired";
	else
		state = "unused";
	values[5] = CStringGetTextDatum(state);
	nulls[5] = false;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

PG_FUNCTION_INFO_V1(idempotency_citus_my_tokens);

/*
 * idempotency_citus_my_tokens
 *		The caller's tokens, read as the tokens table's owner.
 */
Datum
idempotency_citus_my_tokens(PG_FUNCTION_ARGS)
{
	citus_own_rows(fcinfo, "my_tokens", citus_select_tokens, citus_emit_token);
	return (Datum) 0;
}

/*
 * citus_delegate_function
 *		The OID of a delegate (main = false) or of the function it stands
 *		for, InvalidOid if there is none: the argument types are the
 *		delegate's statement's, the key an idempotency.key in the delegate
 *		and text in the main function.
 */
static Oid
citus_delegate_function(CitusDelegate which, bool main)
{
	const CitusDelegateDef *def = &citus_delegate_defs[which];
	Oid			argtypes[SQL_MAX_ARGS];

	for (int i = 0; i < def->call.nargs; i++)
		argtypes[i] = def->call.argtypes[i] != SQL_KEYTYPE ? def->call.argtypes[i] :
			main ? TEXTOID : IdempotencyCatalogGet()->keytype;
	return LookupFuncName(list_make2(makeString("idempotency"),
									 makeString(pstrdup(main ? def->main : def->name))),
						  def->call.nargs, argtypes, true);
}

/*
 * IdempotencyCitusDistributionArgument
 *		The argument (from 0) Citus routes calls of a function of this
 *		extension (extoid) by, and whether with force_delegation; -1 if it
 *		routes none.  Inside a SQL frame, where pg_dist_object exists.
 */
int
IdempotencyCitusDistributionArgument(Oid funcid, Oid extoid, bool *forced)
{
	Datum		values[2] = {ObjectIdGetDatum(funcid), ObjectIdGetDatum(extoid)};
	bool		isnull;

	*forced = false;
	if (SqlExecute(&function_distarg_stmt, values, NULL) != 1)
		return -1;
	*forced = DatumGetBool(SqlResult(0, 2, &isnull));
	return DatumGetInt32(SqlResult(0, 1, &isnull));
}

/*
 * citus_delegate_refresh
 *		Decide again whether this backend hands calls over, and drop the kept
 *		plans.  It does on the Citus coordinator (group 0), with the 1.1 SQL
 *		objects, the registry hash-distributed and each delegate a member of
 *		the extension distributed with force_delegation (citus_setup() of
 *		1.1 does that).  On every node, the registry's shards are behind
 *		while the 1.1 objects are installed and citus_setup() has not run
 *		since.
 */
static void
citus_delegate_refresh(void)
{
	const IdempotencyCatalog *catalog = IdempotencyCatalogGet();

	for (int i = 0; i < CITUS_NUM_DELEGATES; i++)
	{
		citus_delegate.active[i] = false;
		citus_delegate.main_fns[i] = InvalidOid;
	}
	citus_delegate.shards_behind = false;
	citus_delegate.dist_object_relid = get_relname_relid("pg_dist_object", PG_CATALOG_NAMESPACE);

	if (catalog->sql_version >= IDEMPOTENCY_SQL_1_1 &&
		OidIsValid(citus_delegate.dist_object_relid) &&
		IdempotencyCitusPartMethod(CITUS_REGISTRY) == 'h')
	{
		SqlCall		call;
		bool		coordinator;

		SqlCallBeginAsCaller(&call);
		coordinator = citus_local_group() == 0;
		for (int i = 0; i < CITUS_NUM_DELEGATES; i++)
		{
			Oid			fn = citus_delegate_function(i, false);
			bool		forced;

			if (!OidIsValid(fn))
				continue;
			citus_delegate.distarg[i] = IdempotencyCitusDistributionArgument(fn, catalog->extoid,
																			 &forced);
			citus_delegate.active[i] = forced && citus_delegate.distarg[i] >= 0 &&
				citus_delegate.distarg[i] < citus_delegate_defs[i].call.nargs;
		}
		SqlCallEnd(&call);

		/*
		 * citus_setup() of 1.1 gives the registry's shards the columns the
		 * update added, then distributes the delegates: until it has, the
		 * shards have 1.0's columns (the update's ALTER TABLE reached only
		 * the distributed table itself).
		 */
		citus_delegate.shards_behind = !citus_delegate.active[CITUS_DELEGATE_BEGIN];
		if (!coordinator)
			memset(citus_delegate.active, 0, sizeof(citus_delegate.active));
	}
	citus_delegate.valid = true;
}

/*
 * citus_delegate_called
 *		Whether the function called is a delegate (citus_idempotent_begin
 *		and the others run the same C entry points as the functions they
 *		stand for), remembered for the last function asked about.
 */
static bool
citus_delegate_called(FunctionCallInfo fcinfo)
{
	static Oid	last_fn = InvalidOid;
	static bool last_answer = false;
	Oid			fn = fcinfo->flinfo ? fcinfo->flinfo->fn_oid : InvalidOid;

	if (fn != last_fn)
	{
		char	   *name = OidIsValid(fn) ? get_func_name(fn) : NULL;

		last_answer = name != NULL && strncmp(name, "citus_", 6) == 0;
		last_fn = fn;
	}
	return last_answer;
}

/*
 * citus_delegate_check_access
 *		A delegate runs only for a caller who may run the function it stands
 *		for: grant_usage() grants both, and a grant an administrator took
 *		back from the one must not stay open through the other.
 */
static void
citus_delegate_check_access(CitusDelegate which)
{
	const CitusDelegateDef *def = &citus_delegate_defs[which];
	Oid			main_fn;

	if (!citus_delegate.valid)
		citus_delegate_refresh();
	main_fn = citus_delegate.main_fns[which];
	/* an update may have replaced the function since */
	if (!OidIsValid(main_fn) || !SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(main_fn)))
	{
		main_fn = citus_delegate_function(which, true);
		if (!OidIsValid(main_fn))
			elog(ERROR, "function idempotency.%s does not exist", def->main);
		citus_delegate.main_fns[which] = main_fn;
	}
	if (IdempotencyFunctionAclCheck(main_fn, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FUNCTION, get_func_name(main_fn));
}

/*
 * IdempotencyCitusDelegate
 *		On the Citus coordinator, run this call on the worker that holds its
 *		key (or its scope), and return true with its result in *result; false where it is to
 *		run here (a plain server, a worker, the 1.0 SQL objects, a call that
 *		reads another shard, or the delegate itself when Citus kept it here).
 *
 * The call is made again, as the caller, to the function's delegate, which
 * citus_setup() distributed with force_delegation: Citus sends it to the
 * key's worker over the caller's own connection, inside the caller's
 * transaction, where it runs as on one server (as the tables' owner, on the
 * local shard).  Writes the caller then makes to tables co-located with the
 * registry, for the same key (or scope), go over the same connection: one worker, one
 * connection, a one-phase commit.  Run as the tables' owner on the
 * coordinator, as before, the record would travel over a connection of the
 * owner's and the business rows over the caller's, which Citus commits in
 * two phases, and refuses outright for co-located shards.
 *
 * The call's claims are then known to the worker's backend (xactclaims.c),
 * which every later call for the key in the transaction reaches again.
 * Errors come back with the worker's SQLSTATE, message, detail and hint.
 */
bool
IdempotencyCitusDelegate(FunctionCallInfo fcinfo, CitusDelegate which, Datum *result)
{
	CitusDelegateDef *def = &citus_delegate_defs[which];
	MemoryContext caller_cxt = CurrentMemoryContext;
	Datum		values[SQL_MAX_ARGS];
	char		nulls[SQL_MAX_ARGS];
	SqlCall		call;
	volatile uint64 processed = 0;

	if (citus_delegate_called(fcinfo))
	{
		citus_delegate_check_access(which);
		return false;
	}
	if (citus_delegating || citus_owner_in_xact)
		return false;
	if (!citus_delegate.valid)
		citus_delegate_refresh();
	if (!citus_delegate.active[which] || PG_NARGS() != def->call.nargs ||
		PG_ARGISNULL(citus_delegate.distarg[which]))
		return false;

	for (int i = 0; i < def->call.nargs; i++)
	{
		values[i] = PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}

	SqlCallBeginAsCaller(&call);
	citus_delegating = true;
	PG_TRY();
	{
		processed = SqlExecute(&def->call, values, nulls);
	}
	PG_FINALLY();
	{
		citus_delegating = false;
	}
	PG_END_TRY();
	if (processed != 1)
		elog(ERROR, "delegated call returned " UINT64_FORMAT " rows", processed);

	/* the answer, copied out of the frame's memory */
	MemoryContextSwitchTo(caller_cxt);
	{
		TupleDesc	spidesc = SPI_tuptable->tupdesc;
		TupleDesc	desc;

		if (get_call_result_type(fcinfo, NULL, &desc) == TYPEFUNC_COMPOSITE)
		{
			Datum	   *outvalues = palloc(sizeof(Datum) * desc->natts);
			bool	   *outnulls = palloc(sizeof(bool) * desc->natts);

			if (spidesc->natts != desc->natts)
				elog(ERROR, "delegated call returned %d columns, expected %d",
					 spidesc->natts, desc->natts);
			for (int i = 0; i < desc->natts; i++)
				outvalues[i] = SqlResult(0, i + 1, &outnulls[i]);
			desc = BlessTupleDesc(desc);
			*result = HeapTupleGetDatum(heap_form_tuple(desc, outvalues, outnulls));
		}
		else
		{
			Form_pg_attribute att = TupleDescAttr(spidesc, 0);
			bool		isnull;
			Datum		value = SqlResult(0, 1, &isnull);

			fcinfo->isnull = isnull;
			*result = isnull ? (Datum) 0 : datumCopy(value, att->attbyval, att->attlen);
		}
	}
	SqlCallEnd(&call);
	return true;
}

/*
 * citus_xact_callback
 *		Forget, at the end of each transaction, that the tokens were written
 *		in it as their owner.
 */
static void
citus_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			citus_owner_in_xact = false;
			break;
		default:
			break;
	}
}

/*
 * IdempotencyCitusNoteOwnerAccess
 *		The tokens are about to be written here as their owner: later calls
 *		in this transaction are not handed over (see citus_owner_in_xact).
 *		Costs a store.
 */
void
IdempotencyCitusNoteOwnerAccess(void)
{
	if (!citus_xact_callback_registered)
	{
		RegisterXactCallback(citus_xact_callback, NULL);
		citus_xact_callback_registered = true;
	}
	citus_owner_in_xact = true;
}

/*
 * IdempotencyCitusRegistryVersion
 *		The SQL version whose registry columns the statements may name: the
 *		installed one, but 1.0's while a distributed registry's shards still
 *		lack what the update added (between ALTER EXTENSION ... UPDATE and
 *		citus_setup()), so that the API keeps working in between.
 */
IdempotencySqlVersion
IdempotencyCitusRegistryVersion(void)
{
	const IdempotencyCatalog *catalog = IdempotencyCatalogGet();

	if (catalog->sql_version < IDEMPOTENCY_SQL_1_1)
		return catalog->sql_version;
	if (!citus_delegate.valid)
		citus_delegate_refresh();
	return citus_delegate.shards_behind ? IDEMPOTENCY_SQL_1_0 : catalog->sql_version;
}

/*
 * IdempotencyCitusRequireSetup
 *		Refuse a feature that needs the registry columns of a version that
 *		the shards of a distributed registry do not have yet.
 */
void
IdempotencyCitusRequireSetup(IdempotencySqlVersion version, const char *feature)
{
	if (IdempotencyCitusRegistryVersion() >= version)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%s needs citus_setup() to run again after the update of extension \"idempotency\"",
					feature),
			 errdetail("The shards of the distributed registry do not have the columns the update added."),
			 errhint("Run SELECT idempotency.citus_setup() on the coordinator.")));
}
