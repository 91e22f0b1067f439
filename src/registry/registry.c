/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  The registry's row and the statements on idempotency.registry, each
 *	  with the one function that fills its parameters and reads its result.
 *
 * A record is handled as a row image (RegistryRow): a value or NULL for each
 * column of REGISTRY_COLUMNS (registry.h).  Every statement takes the same
 * parameters: $1 to $16 the columns of an image, in the table's order, then
 * the call's clock reading, the attempt a finish or abandon names (or that a
 * claim read the record at) and the status a claim read it with.  The
 * statements that write or read a whole record are built from the column
 * list when first used, so none of them can leave a column out (a fresh
 * claim's INSERT names those a claim can hold a value in, by the list's own
 * flag; the table has no column defaults, so the rest are NULL).
 *
 * They name only the columns that the installed SQL objects have: between a
 * package upgrade and ALTER EXTENSION ... UPDATE the registry lacks the
 * columns a later version added (at its end).  The statements are built for
 * the installed version and built again when it changes (the update's ALTER
 * TABLE invalidates the registry's relcache entry, which makes the catalog
 * read the version again); a parameter for a column the table lacks is
 * declared and unused, and an image read from such a table has it NULL.
 *
 * Every statement is single-table and addressed by the primary key (owner,
 * scope, key), the first three columns (Citus rule 3).  They run in the
 * caller's SQL frame (sqlcall.c), as the table's owner, filtered on the
 * caller's role name.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/registry.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "base/compat.h"
#include "distributed/delegate.h"
#include "registry/registry.h"

/*
 * RegistryFence
 *		The fencing token a claim made now starts from: whole seconds since
 *		2000-01-01, read from the clock at the moment of the claim.
 *
 * An attempt number is a fencing token, and one must never be issued twice
 * for the same key.  While a record exists, every claim that changes its
 * holder sets attempt = GREATEST(attempt + 1, RegistryFence()), so the
 * number only grows.  An abandoned claim is not deleted but marked
 * "abandoned" (it counts as absent), so its number is remembered too.  Only
 * the cleanup deletes records, and only those whose attempt lies at least
 * two seconds behind the clock (sweep.c); a claim of the key
 * after that starts from the clock, which is past every number the deleted
 * record held.  This holds as long as the server's clock does not step back
 * by a second or more between a deletion and the next claim of the key; an
 * int4 of seconds lasts until 2068.
 */
int32
RegistryFence(void)
{
	return RegistryFenceAt(GetCurrentTimestamp());
}

/*
 * RegistryFenceAt
 *		The fence a claim made at time t starts from.  A record's created_at
 *		is its first claim's clock reading, taken just before that claim read
 *		the fence, so RegistryFenceAt(created_at) bounds every attempt the
 *		record was given from below (its first claim may have been given a
 *		larger number: a reclaim continues from the number before it).
 */
int32
RegistryFenceAt(TimestampTz t)
{
	return (int32) (t / USECS_PER_SEC);
}


/*
 * The parameters after an image's columns: the clock, the attempt a finish
 * or abandon names (or that a claim saw the record hold), and the status a
 * claim saw the record hold.
 */
#define PARAM_NOW		(REGISTRY_NCOLUMNS + 1)
#define PARAM_ATTEMPT	(REGISTRY_NCOLUMNS + 2)
#define PARAM_SEEN_STATUS (REGISTRY_NCOLUMNS + 3)
#define REGISTRY_NARGS	(REGISTRY_NCOLUMNS + 3)

/*
 * The completer's batch alone takes one more: the claims it passes over, a
 * text[n][2] of scope and key (XactClaimsInDatabase), or NULL.
 */
#define PARAM_PASSED_OVER (REGISTRY_NARGS + 1)

typedef struct RegistryColumnDef
{
	const char *name;
	Oid			type;
	bool		claim;			/* can hold a value in a fresh claim */
	bool		ends;			/* written when a claim ends */
	IdempotencySqlVersion since;	/* the SQL version that added it */
} RegistryColumnDef;

#define REGISTRY_COLUMN_DEF(name, type, claim, ends, since) {#name, type, claim, ends, since},
static const RegistryColumnDef registry_columns[REGISTRY_NCOLUMNS] = {
	REGISTRY_COLUMNS(REGISTRY_COLUMN_DEF)
};

static const char *const registry_status_names[] = {
	[RS_PROCESSING] = "processing",
	[RS_COMPLETED] = "completed",
	[RS_FAILED] = "failed",
	[RS_ABANDONED] = "abandoned",
};

/* The statuses as text datums, made once per backend. */
static Datum registry_status_datums[lengthof(registry_status_names)];

/*
 * "The record is live": it counts as present, neither expired nor
 * abandoned.  RegistryRowLive is the same rule in C.
 */
#define REGISTRY_LIVE_SQL \
	"(r.expires_at OPERATOR(pg_catalog.>) $17" \
	" AND r.status OPERATOR(pg_catalog.<>) 'abandoned')"

StaticAssertDecl(PARAM_NOW == 17, "REGISTRY_LIVE_SQL names the clock as $17");

/*
 * The SQL version the statements were built for, and how many of the
 * columns (a prefix of REGISTRY_COLUMNS) its registry has; -1 before the
 * first build.
 */
static int	registry_built_version = -1;
static int	registry_ncolumns = 0;

/*
 * registry_columns_of
 *		How many of the columns (a prefix of REGISTRY_COLUMNS) the registry
 *		of that SQL version has.
 */
static int
registry_columns_of(IdempotencySqlVersion version)
{
	int			n = 0;

	while (n < REGISTRY_NCOLUMNS && registry_columns[n].since <= version)
		n++;
	for (int i = n; i < REGISTRY_NCOLUMNS; i++)
		Assert(registry_columns[i].since > version);
	return n;
}

/*
 * A claim of a key nobody has a record of.  ON CONFLICT waits for a
 * concurrent claim that is not yet committed: that wait is what lets a
 * duplicate request replay the first one's answer instead of failing.
 */
static SqlStatement claim_stmt = {.expected_rc = SPI_OK_INSERT};

/*
 * A claim taken with defer_claim, written once, complete, by its finish.  A
 * plain INSERT, not ON CONFLICT: a conflict can only end the transaction
 * (RegistryInsertFinished), so the speculative insertion that ON CONFLICT
 * pays for on every call (a pre-check of the index, a speculative lock, a
 * confirmation record) would buy nothing.  The unique check still waits for
 * a concurrent uncommitted record of the key.
 */
static SqlStatement insert_finished_stmt = {.expected_rc = SPI_OK_INSERT};

/* The whole record of a key, whatever its state. */
static SqlStatement lookup_stmt = {.expected_rc = SPI_OK_SELECT,.natts = REGISTRY_NCOLUMNS};

/* all of a role's records, $1 its name, on the caller's snapshot */
static SqlStatement select_own_stmt = {
	.nargs = 1,
	.argtypes = {TEXTOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = REGISTRY_NCOLUMNS,
	.snapshot = SQL_SNAPSHOT_CALLER,
};

/*
 * Overwrites an expired or abandoned record with a fresh claim, re-checking
 * that condition, so that of two sessions racing for the record exactly one
 * updates it.  The attempt grows from the record's (RegistryFence).  It
 * also re-checks the attempt and status the claim read: the record it
 * overwrites is exactly the one read, so what the claim reports of the
 * previous attempt is what the UPDATE saw, never a stale read (PostgreSQL
 * 15's RETURNING shows only the new row).
 */
static SqlStatement reclaim_stmt = {.expected_rc = SPI_OK_UPDATE_RETURNING,.natts = 1};

/*
 * Takes over a live claim whose lease ran out, re-checking that condition
 * and the attempt read, like reclaim_stmt.  The record keeps everything
 * else, its expiry too.
 */
static SqlStatement takeover_stmt = {.expected_rc = SPI_OK_UPDATE_RETURNING,.natts = 2};

/*
 * Ends a live claim (of the given attempt, if one is named): the columns
 * that ending writes, from a finish's or an abandon's image.  A NULL
 * expires_at keeps the claim's.
 */
static SqlStatement end_stmt = {.expected_rc = SPI_OK_UPDATE};

/*
 * Records the step a live claim (of the given attempt) has reached and its
 * state (idempotent_checkpoint).  Only unindexed columns change: a HOT
 * update.
 */
static SqlStatement checkpoint_stmt = {.expected_rc = SPI_OK_UPDATE};

/*
 * Extends the lease of a live claim of the given attempt, to no later than
 * the record's expiry (idempotent_renew).
 */
static SqlStatement renew_stmt = {.expected_rc = SPI_OK_UPDATE_RETURNING,.natts = 1};

/*
 * Takes over, as a begin's take-over does, up to $19 (the attempt
 * parameter's place) of the caller's claims whose lease ran out and that
 * nobody took over: the completer's batch.  SKIP LOCKED passes over a claim
 * another completer (or a begin) holds, so no two get the same one; the
 * claims the calling transaction holds and must end itself (its
 * transactional and deferred ones, $20) it passes over too, as it cannot
 * lock them out of itself.  Each
 * row returned is the whole record after the take-over, then the attempt
 * it had before.  Not under Citus (a distributed table refuses SKIP LOCKED).
 */
static SqlStatement stalled_stmt = {.expected_rc = SPI_OK_UPDATE_RETURNING,
.natts = REGISTRY_NCOLUMNS + 1};

/*
 * registry_column_list
 *		Append "r.a, r.b, ..." (qualified) or "a, b, ..." for every column.
 */
static void
registry_column_list(StringInfo buf, bool qualified)
{
	for (int i = 0; i < registry_ncolumns; i++)
		appendStringInfo(buf, "%s%s%s", i > 0 ? ", " : "",
						 qualified ? "r." : "", registry_columns[i].name);
}

/*
 * registry_identity_sql
 *		Append the condition that addresses one record by its primary key.
 */
static void
registry_identity_sql(StringInfo buf)
{
	appendStringInfoString(buf, " WHERE ");
	for (int i = 0; i < REGISTRY_NIDENTITY; i++)
		appendStringInfo(buf, "%sr.%s OPERATOR(pg_catalog.=) $%d",
						 i > 0 ? " AND " : "", registry_columns[i].name, i + 1);
}

/*
 * registry_insert_sql
 *		INSERT of a whole image or, for a fresh claim, of the columns a claim
 *		can hold a value in: the table has no column defaults, so the others
 *		are NULL, as the claim's image has them (RegistryRowClaim).  Naming
 *		fewer columns makes the statement cheaper to plan and, under Citus,
 *		to print for the shard and plan again there.
 */
static char *
registry_insert_sql(bool claim)
{
	StringInfoData buf;
	StringInfoData values;
	char	   *sql;

	initStringInfo(&buf);
	initStringInfo(&values);
	for (int i = 0; i < registry_ncolumns; i++)
	{
		if (claim && !registry_columns[i].claim)
			continue;
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", registry_columns[i].name);
		appendStringInfo(&values, "%s$%d", values.len > 0 ? ", " : "", i + 1);
	}
	sql = psprintf("INSERT INTO idempotency.registry AS r (%s) VALUES (%s)%s", buf.data,
				   values.data, claim ? " ON CONFLICT (owner, scope, key) DO NOTHING" : "");
	pfree(buf.data);
	pfree(values.data);
	return sql;
}

/*
 * registry_set_sql
 *		"SET a = $n, ..." for the columns a claim writes (every one but the
 *		identity) or, with ends, those ending a claim writes.
 */
static void
registry_set_sql(StringInfo buf, bool ends)
{
	bool		first = true;

	appendStringInfoString(buf, " SET ");
	for (int i = REGISTRY_NIDENTITY; i < registry_ncolumns; i++)
	{
		const char *name = registry_columns[i].name;

		if (ends && !registry_columns[i].ends)
			continue;
		appendStringInfo(buf, "%s%s = ", first ? "" : ", ", name);
		first = false;
		if (i == RC_attempt)
			appendStringInfo(buf, "GREATEST(r.attempt OPERATOR(pg_catalog.+) 1, $%d)", i + 1);
		else if (i == RC_expires_at && ends)
			appendStringInfo(buf, "COALESCE($%d, r.expires_at)", i + 1);
		else
			appendStringInfo(buf, "$%d", i + 1);
	}
}

/*
 * registry_statement
 *		Give a statement its text and the image's parameter types.
 */
static void
registry_statement(SqlStatement *stmt, char *sql)
{
	stmt->sql = sql;
	stmt->nargs = REGISTRY_NARGS;
	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
		stmt->argtypes[i] = registry_columns[i].type;
	stmt->argtypes[PARAM_NOW - 1] = TIMESTAMPTZOID;
	stmt->argtypes[PARAM_ATTEMPT - 1] = INT4OID;
	stmt->argtypes[PARAM_SEEN_STATUS - 1] = TEXTOID;
}

/*
 * registry_build
 *		Build the statements' texts and the status datums for the registry
 *		columns the installed SQL version has (under Citus, those its shards
 *		have: IdempotencyCitusRegistryVersion): once per backend, and again
 *		when that version changes.
 *		The statements' kept plans are dropped with the cache of plans.
 */
static void
registry_build(void)
{
	IdempotencySqlVersion version = IdempotencyCitusRegistryVersion();
	MemoryContext oldcontext;
	StringInfoData buf;
	const char *recovery_returning;

	if (registry_built_version == (int) version)
		return;
	StaticAssertStmt(PARAM_PASSED_OVER <= SQL_MAX_ARGS, "too many registry parameters");
	oldcontext = MemoryContextSwitchTo(TopMemoryContext);

	if (registry_built_version < 0)
		for (size_t i = 0; i < lengthof(registry_status_names); i++)
			registry_status_datums[i] = CStringGetTextDatum(registry_status_names[i]);
	else
		SqlCacheInvalidate(InvalidOid);

	/* the columns this version's table has: a prefix of the list */
	registry_ncolumns = registry_columns_of(version);
	recovery_returning = version >= IDEMPOTENCY_SQL_1_1 ?
		", r.recovery_point, r.recovery_state" : "";

	registry_statement(&claim_stmt, registry_insert_sql(true));
	registry_statement(&insert_finished_stmt, registry_insert_sql(false));

	initStringInfo(&buf);
	appendStringInfoString(&buf, "SELECT ");
	registry_column_list(&buf, true);
	appendStringInfoString(&buf, " FROM idempotency.registry AS r");
	registry_identity_sql(&buf);
	registry_statement(&lookup_stmt, buf.data);
	lookup_stmt.natts = registry_ncolumns;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "SELECT ");
	registry_column_list(&buf, true);
	appendStringInfoString(&buf, " FROM idempotency.registry AS r"
						   " WHERE r.owner OPERATOR(pg_catalog.=) $1");
	select_own_stmt.sql = buf.data;
	select_own_stmt.natts = registry_ncolumns;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "UPDATE idempotency.registry AS r");
	registry_set_sql(&buf, false);
	registry_identity_sql(&buf);
	appendStringInfo(&buf, " AND NOT " REGISTRY_LIVE_SQL
					 " AND r.attempt OPERATOR(pg_catalog.=) $%d"
					 " AND r.status OPERATOR(pg_catalog.=) $%d RETURNING r.attempt",
					 PARAM_ATTEMPT, PARAM_SEEN_STATUS);
	registry_statement(&reclaim_stmt, buf.data);

	initStringInfo(&buf);
	appendStringInfo(&buf, "UPDATE idempotency.registry AS r"
					 " SET attempt = GREATEST(r.attempt OPERATOR(pg_catalog.+) 1, $%d),"
					 " updated_at = $%d, lease_until = $%d",
					 RC_attempt + 1, RC_updated_at + 1, RC_lease_until + 1);
	registry_identity_sql(&buf);
	appendStringInfo(&buf, " AND r.status OPERATOR(pg_catalog.=) 'processing'"
					 " AND r.lease_until OPERATOR(pg_catalog.<=) $%d AND " REGISTRY_LIVE_SQL
					 " AND r.attempt OPERATOR(pg_catalog.=) $%d"
					 " RETURNING r.attempt, r.expires_at%s", PARAM_NOW, PARAM_ATTEMPT,
					 recovery_returning);
	registry_statement(&takeover_stmt, buf.data);
	takeover_stmt.natts = version >= IDEMPOTENCY_SQL_1_1 ? 4 : 2;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "UPDATE idempotency.registry AS r");
	registry_set_sql(&buf, true);
	registry_identity_sql(&buf);
	appendStringInfo(&buf, " AND r.status OPERATOR(pg_catalog.=) 'processing' AND " REGISTRY_LIVE_SQL
					 " AND ($%d IS NULL OR r.attempt OPERATOR(pg_catalog.=) $%d)",
					 PARAM_ATTEMPT, PARAM_ATTEMPT);
	registry_statement(&end_stmt, buf.data);

	if (version >= IDEMPOTENCY_SQL_1_1)
	{
		initStringInfo(&buf);
		appendStringInfo(&buf, "UPDATE idempotency.registry AS r"
						 " SET recovery_point = $%d, recovery_state = $%d, updated_at = $%d",
						 RC_recovery_point + 1, RC_recovery_state + 1, RC_updated_at + 1);
		registry_identity_sql(&buf);
		appendStringInfo(&buf, " AND r.status OPERATOR(pg_catalog.=) 'processing' AND " REGISTRY_LIVE_SQL
						 " AND r.attempt OPERATOR(pg_catalog.=) $%d", PARAM_ATTEMPT);
		registry_statement(&checkpoint_stmt, buf.data);

		initStringInfo(&buf);
		appendStringInfo(&buf, "UPDATE idempotency.registry AS r"
						 " SET lease_until = LEAST($%d, r.expires_at), updated_at = $%d",
						 RC_lease_until + 1, RC_updated_at + 1);
		registry_identity_sql(&buf);
		appendStringInfo(&buf, " AND r.status OPERATOR(pg_catalog.=) 'processing' AND " REGISTRY_LIVE_SQL
						 " AND r.attempt OPERATOR(pg_catalog.=) $%d RETURNING r.lease_until",
						 PARAM_ATTEMPT);
		registry_statement(&renew_stmt, buf.data);

		initStringInfo(&buf);
		appendStringInfo(&buf, "UPDATE idempotency.registry AS r"
						 " SET attempt = GREATEST(r.attempt OPERATOR(pg_catalog.+) 1, $%d),"
						 " updated_at = $%d, lease_until = LEAST($%d, r.expires_at)"
						 " FROM (SELECT s.key, s.scope, s.owner, s.attempt"
						 " FROM idempotency.registry AS s"
						 " WHERE s.owner OPERATOR(pg_catalog.=) $%d"
						 " AND ($%d IS NULL OR s.scope OPERATOR(pg_catalog.=) $%d)"
						 " AND s.status OPERATOR(pg_catalog.=) 'processing'"
						 " AND s.lease_until OPERATOR(pg_catalog.<=) $%d"
						 " AND s.expires_at OPERATOR(pg_catalog.>) $%d"
						 " AND ($%d IS NULL OR NOT EXISTS (SELECT"
						 " FROM pg_catalog.generate_subscripts($%d, 1) AS o(i)"
						 " WHERE s.scope OPERATOR(pg_catalog.=) $%d[o.i][1]"
						 " AND s.key OPERATOR(pg_catalog.=) $%d[o.i][2]))"
						 " LIMIT $%d FOR UPDATE SKIP LOCKED) AS s"
						 " WHERE r.key OPERATOR(pg_catalog.=) s.key"
						 " AND r.scope OPERATOR(pg_catalog.=) s.scope"
						 " AND r.owner OPERATOR(pg_catalog.=) s.owner RETURNING ",
						 RC_attempt + 1, RC_updated_at + 1, RC_lease_until + 1,
						 RC_owner + 1, RC_scope + 1, RC_scope + 1, PARAM_NOW, PARAM_NOW,
						 PARAM_PASSED_OVER, PARAM_PASSED_OVER, PARAM_PASSED_OVER,
						 PARAM_PASSED_OVER, PARAM_ATTEMPT);
		registry_column_list(&buf, true);
		appendStringInfoString(&buf, ", s.attempt");
		registry_statement(&stalled_stmt, buf.data);
		stalled_stmt.nargs = PARAM_PASSED_OVER;
		stalled_stmt.argtypes[PARAM_PASSED_OVER - 1] = TEXTARRAYOID;
	}

	MemoryContextSwitchTo(oldcontext);
	registry_built_version = version;
}

/*
 * registry_execute_all
 *		Run one of the statements with an image's columns and the extra
 *		parameters (attempt only where one is given, the status a claim saw
 *		only where it saw a record, the claims the completer passes over
 *		only for its batch).
 */
static uint64
registry_execute_all(SqlStatement *stmt, SqlCall *call, const RegistryRow *row,
					 RegistryAttempt attempt, Datum seen_status, Datum passed_over)
{
	Datum		values[PARAM_PASSED_OVER];
	char		nulls[PARAM_PASSED_OVER];

	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
	{
		values[i] = row->values[i];
		nulls[i] = row->nulls[i] ? 'n' : ' ';
	}
	values[PARAM_NOW - 1] = TimestampTzGetDatum(call->now);
	nulls[PARAM_NOW - 1] = ' ';
	values[PARAM_ATTEMPT - 1] = Int32GetDatum(attempt.value);
	nulls[PARAM_ATTEMPT - 1] = attempt.given ? ' ' : 'n';
	values[PARAM_SEEN_STATUS - 1] = seen_status;
	nulls[PARAM_SEEN_STATUS - 1] = seen_status == (Datum) 0 ? 'n' : ' ';
	values[PARAM_PASSED_OVER - 1] = passed_over;
	nulls[PARAM_PASSED_OVER - 1] = passed_over == (Datum) 0 ? 'n' : ' ';
	return SqlExecute(stmt, values, nulls);
}

/*
 * registry_execute_seen
 *		registry_execute_all for a statement that passes no claims over.
 */
static uint64
registry_execute_seen(SqlStatement *stmt, SqlCall *call, const RegistryRow *row,
					  RegistryAttempt attempt, Datum seen_status)
{
	return registry_execute_all(stmt, call, row, attempt, seen_status, (Datum) 0);
}

/*
 * registry_execute
 *		registry_execute_seen for a statement that names no record seen.
 */
static uint64
registry_execute(SqlStatement *stmt, SqlCall *call, const RegistryRow *row,
				 RegistryAttempt attempt)
{
	return registry_execute_seen(stmt, call, row, attempt, (Datum) 0);
}

/*
 * RegistryStatusName
 *		A status as stored.
 */
const char *
RegistryStatusName(RegistryStatus status)
{
	return registry_status_names[status];
}

/*
 * RegistryColumnVarlena
 *		Whether a column's values are passed by reference.
 */
bool
RegistryColumnVarlena(RegistryColumn col)
{
	Oid			type = registry_columns[col].type;

	return type == TEXTOID || type == BYTEAOID || type == JSONBOID || type == SQL_KEYTYPE;
}

/*
 * RegistryRowSet
 *		Set one column of an image; (Datum) 0 sets it to NULL.  No column has
 *		0 as a valid value: an attempt is at least 1, a status code at least
 *		100, and no timestamp is 2000-01-01 00:00 UTC.
 */
void
RegistryRowSet(RegistryRow *row, RegistryColumn col, Datum value)
{
	row->values[col] = value;
	row->nulls[col] = value == (Datum) 0;
}

/*
 * RegistryRowGet
 *		One column of an image, (Datum) 0 for NULL.
 */
Datum
RegistryRowGet(const RegistryRow *row, RegistryColumn col)
{
	return row->nulls[col] ? (Datum) 0 : row->values[col];
}

/*
 * registry_row_status
 *		Set an image's status.
 */
static void
registry_row_status(RegistryRow *row, RegistryStatus status)
{
	registry_build();
	row->status = status;
	RegistryRowSet(row, RC_status, registry_status_datums[status]);
}

/*
 * registry_row_empty
 *		An image of a record of (scope, key) with every other column NULL.
 */
static void
registry_row_empty(RegistryRow *row, SqlCall *call, Datum scope, Datum key)
{
	memset(row->values, 0, sizeof(row->values));
	memset(row->nulls, true, sizeof(row->nulls));
	RegistryRowSet(row, RC_owner, call->owner);
	RegistryRowSet(row, RC_scope, scope);
	RegistryRowSet(row, RC_key, key);
}

/*
 * RegistryRowClaim
 *		The image of a fresh claim of (scope, key) by the caller: every
 *		column not named here is NULL, so a claim that overwrites an old
 *		record leaves nothing of its answer.  The attempt is the fence, read
 *		from the clock now, just before the statement that may issue it.
 */
void
RegistryRowClaim(RegistryRow *row, SqlCall *call, Datum scope, Datum key,
				 Datum fingerprint, TimestampTz lease_until, TimestampTz expires_at)
{
	registry_row_empty(row, call, scope, key);
	registry_row_status(row, RS_PROCESSING);
	RegistryRowSet(row, RC_attempt, Int32GetDatum(RegistryFence()));
	RegistryRowSet(row, RC_fingerprint, fingerprint);
	RegistryRowSet(row, RC_created_at, TimestampTzGetDatum(call->now));
	RegistryRowSet(row, RC_updated_at, TimestampTzGetDatum(call->now));
	RegistryRowSet(row, RC_lease_until, TimestampTzGetDatum(lease_until));
	RegistryRowSet(row, RC_expires_at, TimestampTzGetDatum(expires_at));
}

/*
 * registry_row_end
 *		Write into an image what ending its claim writes: the answer (none
 *		for an abandon), and no lease.  An answer without a new expiry leaves
 *		the image's expires_at as it is.
 */
static void
registry_row_end(RegistryRow *row, SqlCall *call, const RegistryAnswer *answer)
{
	registry_row_status(row, answer == NULL ? RS_ABANDONED :
						answer->failed ? RS_FAILED : RS_COMPLETED);
	RegistryRowSet(row, RC_response, answer ? answer->response : (Datum) 0);
	RegistryRowSet(row, RC_status_code, answer ? Int32GetDatum(answer->status_code) : (Datum) 0);
	RegistryRowSet(row, RC_body, answer ? answer->body : (Datum) 0);
	RegistryRowSet(row, RC_headers, answer ? answer->headers : (Datum) 0);
	RegistryRowSet(row, RC_updated_at, TimestampTzGetDatum(call->now));
	RegistryRowSet(row, RC_lease_until, (Datum) 0);
	if (answer == NULL)
		RegistryRowSet(row, RC_expires_at, TimestampTzGetDatum(call->now));
	else if (answer->expires_at != 0)
		RegistryRowSet(row, RC_expires_at, TimestampTzGetDatum(answer->expires_at));
}

/*
 * RegistryRowKeep
 *		Copy an image's values that an answer shows (detoasted) into the
 *		caller's memory, for an answer that outlives the call.  The identity
 *		and the fingerprint are only compared, never kept: they are cleared.
 */
void
RegistryRowKeep(SqlCall *call, RegistryRow *row)
{
	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
	{
		if (i < REGISTRY_NIDENTITY || i == RC_fingerprint)
			RegistryRowSet(row, i, (Datum) 0);
		else if (!row->nulls[i] && RegistryColumnVarlena(i))
			row->values[i] = SqlKeep(call, row->values[i]);
	}
}

/*
 * RegistryRowLive
 *		Whether a record counts as present: neither expired nor abandoned
 *		(REGISTRY_LIVE_SQL in SQL).
 */
bool
RegistryRowLive(const RegistryRow *row, TimestampTz now)
{
	return DatumGetTimestampTz(row->values[RC_expires_at]) > now &&
		row->status != RS_ABANDONED;
}

/*
 * RegistryOutputMap
 *		For a function's result row, which of its columns are the registry's
 *		of the same name (checked to be of the same type); the others are the
 *		function's own.
 */
RegistryOutput *
RegistryOutputMap(TupleDesc desc)
{
	RegistryOutput *out;

	out = palloc(offsetof(RegistryOutput, source) + desc->natts * sizeof(int));
	out->desc = desc;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		out->source[i] = -1;
		for (int c = 0; c < REGISTRY_NCOLUMNS; c++)
		{
			if (strcmp(NameStr(attr->attname), registry_columns[c].name) != 0)
				continue;
			if (registry_columns[c].type != SQL_KEYTYPE &&
				registry_columns[c].type != attr->atttypid)
				elog(ERROR, "result column \"%s\" is of type %u, expected %u",
					 NameStr(attr->attname), attr->atttypid, registry_columns[c].type);
			out->source[i] = c;
		}
	}
	return out;
}

/*
 * RegistryOutputFill
 *		Fill a result row's registry columns from an image.
 */
void
RegistryOutputFill(const RegistryOutput *out, const RegistryRow *row,
				   Datum *values, bool *nulls)
{
	for (int i = 0; i < out->desc->natts; i++)
	{
		int			c = out->source[i];

		if (c < 0)
			continue;
		values[i] = row->values[c];
		nulls[i] = row->nulls[c];
	}
}

/*
 * RegistryInsertClaim
 *		Claim a key nobody has a record of; false if a record exists (once
 *		any concurrent claim of it has committed).
 */
bool
RegistryInsertClaim(SqlCall *call, const RegistryRow *claim)
{
	RegistryAttempt none = {false, 0};

	/* claim_stmt names only the columns a claim can hold a value in */
	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
		Assert(registry_columns[i].claim || claim->nulls[i]);
	registry_build();
	return registry_execute(&claim_stmt, call, claim, none) == 1;
}

/*
 * registry_status_decode
 *		A stored status as one of ours.
 */
static RegistryStatus
registry_status_decode(Datum value)
{
	text	   *status = DatumGetTextPP(value);

	for (size_t i = 0; i < lengthof(registry_status_names); i++)
		if (VARSIZE_ANY_EXHDR(status) == strlen(registry_status_names[i]) &&
			memcmp(VARDATA_ANY(status), registry_status_names[i], VARSIZE_ANY_EXHDR(status)) == 0)
			return (RegistryStatus) i;
	elog(ERROR, "unexpected idempotency record status \"%s\"", text_to_cstring(status));
	return RS_PROCESSING;		/* keep compiler quiet */
}

/*
 * RegistryLookup
 *		Read the caller's record of (scope, key), whatever its state; false
 *		if there is none.
 */
bool
RegistryLookup(SqlCall *call, Datum scope, Datum key, RegistryRow *rec)
{
	RegistryAttempt none = {false, 0};

	registry_build();
	registry_row_empty(rec, call, scope, key);
	if (registry_execute(&lookup_stmt, call, rec, none) == 0)
		return false;
	RegistryRowFromTuple(rec, SPI_tuptable->vals[0], SPI_tuptable->tupdesc);
	return true;
}

/*
 * registry_row_read
 *		A record from a row whose first ncolumns columns are the registry's
 *		first ncolumns, in the table's order; the later ones are NULL.
 *
 * The row's layout is that of the statement that read it, which need not
 * be the one registry_build would give now: a statement built for the 1.0
 * table that waited for the registry's lock held by ALTER EXTENSION ...
 * UPDATE is granted it after the update committed, and the invalidation
 * that the lock brings makes the next build one for 1.1; the row it read
 * still has 1.0's columns, which are a prefix of 1.1's.  So the row is read
 * by its own column count, never by the current build's.
 */
static void
registry_row_read(RegistryRow *row, HeapTuple tuple, TupleDesc desc, int ncolumns)
{
	/* the record's columns, and one more (claim_stalled's previous attempt) */
	Datum		values[REGISTRY_NCOLUMNS + 1];
	bool		nulls[REGISTRY_NCOLUMNS + 1];

	if (ncolumns < registry_columns_of(IDEMPOTENCY_SQL_1_0) || ncolumns > REGISTRY_NCOLUMNS ||
		desc->natts > REGISTRY_NCOLUMNS + 1)
		elog(ERROR, "registry row has %d columns, expected %d to %d",
			 ncolumns, registry_columns_of(IDEMPOTENCY_SQL_1_0), REGISTRY_NCOLUMNS);

	/*
	 * In one pass: heap_getattr of each column would walk the tuple from its
	 * start past every variable-length column before it.
	 */
	heap_deform_tuple(tuple, desc, values, nulls);
	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
	{
		row->values[i] = (Datum) 0;
		row->nulls[i] = true;
		if (i >= ncolumns)
			continue;
		Assert(strcmp(NameStr(TupleDescAttr(desc, i)->attname), registry_columns[i].name) == 0);
		row->values[i] = values[i];
		row->nulls[i] = nulls[i];
	}
	row->status = registry_status_decode(row->values[RC_status]);
}

/*
 * RegistryRowFromTuple
 *		A record as a row of RegistrySelectOwn or of the lookup returned it:
 *		the columns of the registry its statement was built for, in the
 *		table's order (registry_row_read).
 */
void
RegistryRowFromTuple(RegistryRow *row, HeapTuple tuple, TupleDesc desc)
{
	registry_row_read(row, tuple, desc, desc->natts);
}

/*
 * RegistrySelectOwn
 *		Read all of the caller's records (RegistryRowFromTuple reads each of
 *		the rows); returns how many there are.
 */
uint64
RegistrySelectOwn(SqlCall *call)
{
	Datum		values[1] = {call->owner};

	registry_build();
	return SqlExecute(&select_own_stmt, values, NULL);
}

/*
 * RegistryReclaim
 *		Claim a key whose record, as read in seen, is expired or abandoned,
 *		overwriting every column; false if the record changed since it was
 *		read.  The claim's attempt becomes the one issued.
 */
bool
RegistryReclaim(SqlCall *call, RegistryRow *claim, const RegistryRow *seen)
{
	RegistryAttempt read = {true, DatumGetInt32(seen->values[RC_attempt])};
	bool		isnull;

	registry_build();
	if (registry_execute_seen(&reclaim_stmt, call, claim, read,
							  registry_status_datums[seen->status]) == 0)
		return false;
	RegistryRowSet(claim, RC_attempt, SqlResult(0, 1, &isnull));
	return true;
}

/*
 * RegistryTakeover
 *		Take over a live claim, as read in seen, whose lease ran out; false
 *		if the record changed since it was read.  The claim's attempt and
 *		expiry become the record's.
 */
bool
RegistryTakeover(SqlCall *call, RegistryRow *claim, const RegistryRow *seen)
{
	RegistryAttempt read = {true, DatumGetInt32(seen->values[RC_attempt])};
	bool		isnull;

	registry_build();
	if (registry_execute(&takeover_stmt, call, claim, read) == 0)
		return false;
	RegistryRowSet(claim, RC_attempt, SqlResult(0, 1, &isnull));
	RegistryRowSet(claim, RC_expires_at, SqlResult(0, 2, &isnull));
	if (takeover_stmt.natts > 2)
	{
		/* the steps the previous attempts recorded stay, to resume from */
		RegistryRowSet(claim, RC_recovery_point, SqlResult(0, 3, &isnull));
		RegistryRowSet(claim, RC_recovery_state, SqlResult(0, 4, &isnull));
	}
	return true;
}

/*
 * RegistryFinish
 *		Store the answer of the caller's live claim (of that attempt, if one
 *		is named); false if there is no such claim.
 */
bool
RegistryFinish(SqlCall *call, Datum scope, Datum key, const RegistryAnswer *answer,
			   RegistryAttempt attempt)
{
	RegistryRow row;

	registry_build();
	registry_row_empty(&row, call, scope, key);
	registry_row_end(&row, call, answer);
	return registry_execute(&end_stmt, call, &row, attempt) == 1;
}

/*
 * RegistryAbandon
 *		Give up the caller's live claim (of that attempt, if one is named):
 *		the record stays, marked abandoned and without an answer, so that its
 *		attempt is remembered.  False if there is no such claim.
 */
bool
RegistryAbandon(SqlCall *call, Datum scope, Datum key, RegistryAttempt attempt)
{
	RegistryRow row;

	registry_build();
	registry_row_empty(&row, call, scope, key);
	registry_row_end(&row, call, NULL);
	return registry_execute(&end_stmt, call, &row, attempt) == 1;
}

/*
 * RegistryInsertFinished
 *		Write a claim not written yet (deferred, or held in memory by its
 *		key's lock), ended with its answer (abandoned if answer is NULL), as
 *		one record.
 *
 * If a record of the key exists (a duplicate request raced past this one's
 * begin: a deferred claim, or a key lock that did not serialise the two, as
 * after a restart with a prepared one), the insert first waits for its transaction: if that rolls back,
 * ours goes in; if it committed, the other request did the work, and this
 * transaction, whose business write is a second one, must roll back.  The
 * unique violation becomes a serialization failure, whose retry replays the
 * other request's answer.  Nothing is caught and carried on from: the error
 * only changes its SQLSTATE and words on its way out.
 */
void
RegistryInsertFinished(SqlCall *call, const RegistryRow *claim,
					   const RegistryAnswer *answer)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	RegistryAttempt none = {false, 0};
	RegistryRow row = *claim;

	registry_build();
	registry_row_end(&row, call, answer);
	PG_TRY();
	{
		registry_execute(&insert_finished_stmt, call, &row, none);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not finish idempotency key \"%s\" in scope \"%s\": a concurrent request with the same key finished first",
						TextDatumGetCString(claim->values[RC_key]),
						TextDatumGetCString(claim->values[RC_scope])),
				 errdetail("The claim's record is written by its finish, and the duplicate's was there first."),
				 errhint("Roll back and retry the transaction; the retry replays the other request's answer.")));
	}
	PG_END_TRY();
}

/*
 * RegistryCheckpoint
 *		Record the step the caller's live claim of that attempt has reached,
 *		and its state (NULL for none); false if there is no such claim.  One
 *		UPDATE of the record's unindexed columns, in the caller's
 *		transaction: it commits or rolls back with the step's own writes.
 */
bool
RegistryCheckpoint(SqlCall *call, Datum scope, Datum key, Datum point, Datum state,
				   RegistryAttempt attempt)
{
	RegistryRow row;

	registry_build();
	Assert(attempt.given);
	registry_row_empty(&row, call, scope, key);
	RegistryRowSet(&row, RC_recovery_point, point);
	RegistryRowSet(&row, RC_recovery_state, state);
	RegistryRowSet(&row, RC_updated_at, TimestampTzGetDatum(call->now));
	return registry_execute(&checkpoint_stmt, call, &row, attempt) == 1;
}

/*
 * RegistryRenew
 *		Extend the lease of the caller's live claim of that attempt to
 *		lease_until, or to the record's expiry if that comes first; false if
 *		there is no such claim.  *granted is the lease now held.
 */
bool
RegistryRenew(SqlCall *call, Datum scope, Datum key, TimestampTz lease_until,
			  RegistryAttempt attempt, TimestampTz *granted)
{
	RegistryRow row;
	bool		isnull;

	registry_build();
	Assert(attempt.given);
	registry_row_empty(&row, call, scope, key);
	RegistryRowSet(&row, RC_lease_until, TimestampTzGetDatum(lease_until));
	RegistryRowSet(&row, RC_updated_at, TimestampTzGetDatum(call->now));
	if (registry_execute(&renew_stmt, call, &row, attempt) == 0)
		return false;
	*granted = DatumGetTimestampTz(SqlResult(0, 1, &isnull));
	return true;
}

/*
 * RegistryClaimStalled
 *		Take over up to limit of the caller's stalled claims (in scope, or
 *		any scope if scope is 0): processing, their lease run out, not
 *		expired, and not among passed_over (a text[n][2] of scope and key,
 *		or 0).  Each gets a new attempt and a lease to lease_until, as a
 *		begin's take-over gives.  Returns how many; RegistryStalledRow reads
 *		each.
 */
uint64
RegistryClaimStalled(SqlCall *call, Datum scope, int32 limit, TimestampTz lease_until,
					 Datum passed_over)
{
	RegistryRow row;
	RegistryAttempt batch = {true, limit};

	registry_build();
	memset(row.values, 0, sizeof(row.values));
	memset(row.nulls, true, sizeof(row.nulls));
	RegistryRowSet(&row, RC_owner, call->owner);
	RegistryRowSet(&row, RC_scope, scope);
	RegistryRowSet(&row, RC_attempt, Int32GetDatum(RegistryFence()));
	RegistryRowSet(&row, RC_updated_at, TimestampTzGetDatum(call->now));
	RegistryRowSet(&row, RC_lease_until, TimestampTzGetDatum(lease_until));
	return registry_execute_all(&stalled_stmt, call, &row, batch, (Datum) 0, passed_over);
}

/*
 * RegistryStalledRow
 *		The i-th claim RegistryClaimStalled took: the record as it is now,
 *		and the attempt it had before.
 */
void
RegistryStalledRow(uint64 i, RegistryRow *claim, int32 *previous_attempt)
{
	bool		isnull;

	registry_row_read(claim, SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
					  SPI_tuptable->tupdesc->natts - 1);
	*previous_attempt = DatumGetInt32(SqlResult(i, SPI_tuptable->tupdesc->natts, &isnull));
}
