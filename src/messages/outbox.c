/*-------------------------------------------------------------------------
 *
 * outbox.c
 *	  The producer's half of exactly-once delivery: outbox_send(),
 *	  outbox_fetch() and outbox_ack().
 *
 * outbox_send records a message in idempotency.outbox in the caller's
 * transaction, so that it exists (and will be delivered) if and only if that
 * transaction commits.  A relay takes ready messages with outbox_fetch,
 * publishes them, and marks them delivered with outbox_ack; receivers
 * deduplicate by message id (inbox_receive), so a message published twice
 * (a relay that died between publishing and acknowledging) has one effect.
 *
 * Ordering.  Messages of one (owner, ordering key) are numbered by seq among
 * the key's undelivered messages, and the numbers must follow commit order.
 * The undelivered messages alone cannot serialise the senders: once the
 * key's last undelivered message is acknowledged, a second sender would
 * see none while a first one's message is still uncommitted, take number 1
 * and be handed out first.  So the senders of a key take the key's lock
 * (locks.c: a transaction-scoped advisory lock in the extension's own lock
 * space), and a second sender waits there until the first one's
 * transaction ends.  Then it reads the key's highest undelivered number with
 * a snapshot of the latest committed state, not the transaction's, so that
 * a REPEATABLE READ or SERIALIZABLE sender too numbers after a sender that
 * committed since its snapshot was taken (or takes the number of one that
 * rolled back).  The insert keeps ON CONFLICT on the partial unique index of
 * undelivered messages as a fallback, for a sender that does not take the
 * lock (a backend still running an older build of the library).  Numbers
 * thus follow commit order, and a relay never sees a message before an
 * earlier committed one of its key.  The lock is released with the
 * transaction, or with the subtransaction that took it if that rolls back
 * (its message goes with it); a prepared transaction keeps it until it is
 * committed or rolled back.  Two transactions that send on two keys in
 * opposite orders deadlock, and PostgreSQL's deadlock detector ends one
 * with 40P01, as for two writers of two rows.  A transaction holds one lock
 * per key it sent on, in the shared lock table (max_locks_per_transaction).
 * A message without an ordering key is ordered on its own: its message id
 * stands in as its key, and its first number needs neither the lock nor a
 * probe (an ordering key that equals another message's id is not ordered
 * against that message).  Under
 * idempotency.outbox_delivery = logical nothing is numbered and nobody
 * waits: consumers read the messages in commit order from the WAL.
 *
 * Handing out.  A message is ready when it is the key's undelivered message
 * with the lowest number and no relay holds an unexpired lease on it: one
 * message per key at a time, the next one only once the previous one was
 * acknowledged.  outbox_fetch finds the keys' first messages with a loose
 * scan of the undelivered index (one probe per key, however many messages
 * wait behind each), locks the ready ones with FOR UPDATE SKIP LOCKED (two
 * relays never get the same message; a message being acknowledged is passed
 * over), and gives them a lease and one fencing attempt for the whole batch,
 * from a sequence, so never issued twice.  The scan starts after the last
 * key this backend handed out and wraps around, so that keys with long
 * backlogs early in the order do not starve later ones.  A relay that dies
 * leaves its lease to run out; then the next fetch hands the messages out
 * again, under a new attempt.
 *
 * Acknowledging.  outbox_ack(attempt, ids) marks delivered the messages that
 * attempt still holds: a relay whose lease ran out is still heard until
 * another relay has taken the messages (like a claim's finish), and after
 * that is refused with IK004 and acknowledges nothing.  Acknowledging again
 * what the same attempt already acknowledged is accepted (the relay may have
 * lost the answer).  A delivered message stays for its ttl, so that its id
 * is refused if sent again, and the cleanup then deletes it (cleanup.c).
 *
 * Every statement is scoped by the caller's role name, as the inbox's are:
 * a role never reads, relays or acknowledges another role's messages.
 *
 * Under Citus.  citus_setup() distributes the outbox by ordering_key, so all
 * of a key's messages are on one shard and each key is numbered and handed
 * out there as on a single server.  Citus refuses a subquery inside INSERT
 * and row locks in a statement that is not routed to one shard
 * (doc/scaling-out.md, "Citus rules" 12), so three things change, only once the table is
 * distributed (the plain statements are untouched):
 * - outbox_send reads the key's highest number and inserts the next one in
 *	 two statements, each routed to the key's shard by its ordering key.  The
 *	 key's lock is taken on the node that runs outbox_send (advisory locks
 *	 are node-local): it serialises the senders that go through the
 *	 coordinator, and ON CONFLICT remains the fallback for any that do not;
 * - outbox_fetch finds the keys' first messages with one statement over
 *	 every shard, without locks (DISTINCT ON the distribution column, which
 *	 each shard answers for its own keys), then takes each message with a
 *	 statement routed to its key's shard that locks it with FOR UPDATE SKIP
 *	 LOCKED and leases it, in the caller's transaction.  The cost: a round
 *	 trip per message handed out, and no loose scan (a shard reads each
 *	 visited key's whole backlog to find its first message).  Running the
 *	 plain statement per shard placement, as the cleanup does (citus_cleanup.c),
 *	 would need connections of its own that commit by themselves, outside
 *	 the relay's transaction, and a share of the batch per shard;
 * - fencing attempts come from the coordinator's sequence, so a fetch on
 *	 another node is refused (its sequence would issue the same numbers);
 *	 outbox_ack runs one statement over every shard that finds the messages
 *	 by id in the UPDATE itself (an id does not name a shard, and a ctid
 *	 names a row of one shard only).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/messages/outbox.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "distributed/delegate.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "key/args.h"
#include "key/locks.h"
#include "messages/idset.h"
#include "messages/outbox.h"
#include "objects/citus_metadata.h"
#include "objects/extension.h"

/* A generated message id: a UUID of version 7 (time-ordered), as text. */
#define OUTBOX_UUID_LEN 36

/*
 * $1 owner, $2 ordering key, $3 message id, $4 topic, $5 payload, $6
 * headers, $7 now.  Run under the key's lock, with a snapshot of the latest
 * committed state (not the transaction's: a REPEATABLE READ sender must
 * number after a sender that committed since its snapshot was taken).
 * Inserts nothing when a sender that does not take the lock took the same
 * number and committed (the caller then tries again with the next one).
 * The key's highest number is read with ORDER BY ... LIMIT 1, one backward
 * probe of the index of undelivered messages: a max() may be planned as a
 * scan of all the key's undelivered messages.
 */
static SqlStatement send_stmt = {
	.sql = "INSERT INTO idempotency.outbox AS o"
	" (owner, ordering_key, seq, message_id, topic, payload, headers, sent_at)"
	" VALUES ($1, $2, COALESCE((SELECT p.seq FROM idempotency.outbox AS p"
	"   WHERE p.owner OPERATOR(pg_catalog.=) $1 AND p.ordering_key OPERATOR(pg_catalog.=) $2"
	"     AND p.delivered_at IS NULL"
	"   ORDER BY p.seq DESC LIMIT 1), 0) OPERATOR(pg_catalog.+) 1, $3, $4, $5, $6, $7)"
	" ON CONFLICT (owner, ordering_key, seq) WHERE delivered_at IS NULL DO NOTHING",
	.nargs = 7,
	.argtypes = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_INSERT,
	.snapshot = SQL_SNAPSHOT_NEW_LATEST,
};

/*
 * The first message of a key: a message without an ordering key (its id is
 * its key, new unless another message's ordering key is that id) needs no
 * lock and no probe for the key's highest number.  Inserts nothing if the
 * key has an undelivered message numbered 1 after all (send_stmt then
 * numbers it, under the key's lock).
 */
static SqlStatement send_first_stmt = {
	.sql = "INSERT INTO idempotency.outbox AS o"
	" (owner, ordering_key, seq, message_id, topic, payload, headers, sent_at)"
	" VALUES ($1, $2, 1, $3, $4, $5, $6, $7)"
	" ON CONFLICT (owner, ordering_key, seq) WHERE delivered_at IS NULL DO NOTHING",
	.nargs = 7,
	.argtypes = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_INSERT,
};

/*
 * Under Citus ($1 owner, $2 ordering key): the key's highest undelivered
 * number, read on the key's shard, under the key's lock.  The latest
 * snapshot reaches a shard of this node that Citus reads locally; a remote
 * shard is read with the snapshot of Citus's own transaction there.
 */
static SqlStatement citus_top_stmt = {
	.sql = "SELECT p.seq FROM idempotency.outbox AS p"
	" WHERE p.owner OPERATOR(pg_catalog.=) $1 AND p.ordering_key OPERATOR(pg_catalog.=) $2"
	"   AND p.delivered_at IS NULL"
	" ORDER BY p.seq DESC LIMIT 1",
	.nargs = 2,
	.argtypes = {TEXTOID, TEXTOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
	.snapshot = SQL_SNAPSHOT_NEW_LATEST,
};

/*
 * Under Citus: send_first_stmt with the number $8, one more than the key's
 * highest as citus_top_stmt read it; nothing if a concurrent sender took it
 * and committed.
 */
static SqlStatement citus_send_stmt = {
	.sql = "INSERT INTO idempotency.outbox AS o"
	" (owner, ordering_key, seq, message_id, topic, payload, headers, sent_at)"
	" VALUES ($1, $2, $8, $3, $4, $5, $6, $7)"
	" ON CONFLICT (owner, ordering_key, seq) WHERE delivered_at IS NULL DO NOTHING",
	.nargs = 8,
	.argtypes = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, TIMESTAMPTZOID, INT8OID},
	.expected_rc = SPI_OK_INSERT,
};

/*
 * With idempotency.outbox_delivery = logical: the message as a transactional
 * logical decoding message (parameters as send_stmt's), and its row, stored
 * delivered ($8 expires_at) so that its id stays taken and the owner sees it
 * in my_outbox, but never handed to a relay.
 */
#define OUTBOX_LOGICAL_PREFIX "idempotency.outbox"
#define OUTBOX_LOGICAL_KEEP (7 * USECS_PER_DAY)

static SqlStatement emit_stmt = {
	.sql = "SELECT pg_catalog.pg_logical_emit_message(true, '" OUTBOX_LOGICAL_PREFIX "',"
	" pg_catalog.jsonb_build_object('message_id', $3, 'topic', $4, 'ordering_key', $2,"
	"  'payload', $5, 'headers', $6, 'sent_at', $7, 'owner', $1)::pg_catalog.text)",
	.nargs = 7,
	.argtypes = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
};

static SqlStatement send_delivered_stmt = {
	.sql = "INSERT INTO idempotency.outbox AS o"
	" (owner, ordering_key, seq, message_id, topic, payload, headers, sent_at, delivered_at, expires_at)"
	" VALUES ($1, $2, 0, $3, $4, $5, $6, $7, $7, $8)",
	.nargs = 8,
	.argtypes = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID},
	.expected_rc = SPI_OK_INSERT,
};

/* whether a message id was sent before under this key ($1 owner, $2, $3) */
static SqlStatement sent_stmt = {
	.sql = "SELECT FROM idempotency.outbox AS o"
	" WHERE o.message_id OPERATOR(pg_catalog.=) $3"
	" AND o.ordering_key OPERATOR(pg_catalog.=) $2"
	" AND o.owner OPERATOR(pg_catalog.=) $1",
	.nargs = 3,
	.argtypes = {TEXTOID, TEXTOID, TEXTOID},
	.expected_rc = SPI_OK_SELECT,
};

/* a new fencing attempt */
static SqlStatement attempt_stmt = {
	.sql = "SELECT pg_catalog.nextval('idempotency.outbox_attempt_seq'::pg_catalog.regclass)",
	.nargs = 0,
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
};

/*
 * $1 owner, $2 the key to start after, $3 batch size, $4 now, $5 lease
 * until, $6 attempt; BOUND is a condition on the keys to visit.  heads is
 * the loose scan: the first undelivered message of each key after $2, key
 * by key, one index probe each; it runs only as far as the LIMIT pulls it.
 * Of those, the ones no live lease holds are locked, passing over any a
 * transaction holds (another relay's fetch, an acknowledgement), and handed
 * out.  A row that changed after the statement's snapshot is locked in its
 * new version and checked again; if it is still ready, its new version is
 * not visible to the UPDATE and it waits for the next fetch.
 *
 * The UPDATE finds its rows by the locked rows' ctids alone (a TID scan),
 * with no condition of its own on owner or delivered_at: the rows are locked
 * and were checked when they were, and any index such a condition matched
 * would be a plan.  On a table that has not been analyzed (a burst, a relay
 * that was down) the planner takes the default guesses that few rows are
 * undelivered and few are the owner's, and scanned all of the owner's
 * undelivered messages through the index of undelivered messages with a
 * bitmap, for every batch; with the ctids alone no plan depends on the
 * table's statistics.
 */
#define FETCH_SQL(BOUND) \
	"WITH RECURSIVE heads (ordering_key, seq) AS (" \
	"  (SELECT p.ordering_key, p.seq FROM idempotency.outbox AS p" \
	"    WHERE p.owner OPERATOR(pg_catalog.=) $1 AND p.ordering_key OPERATOR(pg_catalog.>) $2" \
	"      AND p.delivered_at IS NULL" BOUND \
	"    ORDER BY p.ordering_key, p.seq LIMIT 1)" \
	"  UNION ALL" \
	"  SELECT n.ordering_key, n.seq FROM heads AS h, LATERAL" \
	"   (SELECT p.ordering_key, p.seq FROM idempotency.outbox AS p" \
	"     WHERE p.owner OPERATOR(pg_catalog.=) $1 AND p.ordering_key OPERATOR(pg_catalog.>) h.ordering_key" \
	"       AND p.delivered_at IS NULL" BOUND \
	"     ORDER BY p.ordering_key, p.seq LIMIT 1) AS n)" \
	" UPDATE idempotency.outbox AS o" \
	"    SET attempt = $6, deliveries = o.deliveries OPERATOR(pg_catalog.+) 1, lease_until = $5" \
	"  WHERE o.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(" \
	"        SELECT r.ctid FROM heads AS h, LATERAL" \
	"         (SELECT c.ctid FROM idempotency.outbox AS c" \
	"           WHERE c.owner OPERATOR(pg_catalog.=) $1" \
	"             AND c.ordering_key OPERATOR(pg_catalog.=) h.ordering_key" \
	"             AND c.seq OPERATOR(pg_catalog.=) h.seq AND c.delivered_at IS NULL" \
	"             AND (c.lease_until IS NULL OR c.lease_until OPERATOR(pg_catalog.<=) $4)" \
	"           FOR UPDATE OF c SKIP LOCKED) AS r" \
	"        LIMIT $3))" \
	" RETURNING o.message_id, o.topic, o.ordering_key, o.payload, o.headers, o.sent_at," \
	"  o.attempt, o.deliveries, o.lease_until"

/* the keys after $2 */
static SqlStatement fetch_stmt = {
	.sql = FETCH_SQL(""),
	.nargs = 6,
	.argtypes = {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID},
	.expected_rc = SPI_OK_UPDATE_RETURNING,
	.natts = 9,
};

/* the keys after $2 up to $7: the scan wrapped around to the first key */
static SqlStatement fetch_wrapped_stmt = {
	.sql = FETCH_SQL(" AND p.ordering_key OPERATOR(pg_catalog.<=) $7"),
	.nargs = 7,
	.argtypes = {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TEXTOID},
	.expected_rc = SPI_OK_UPDATE_RETURNING,
	.natts = 9,
};

/*
 * Under Citus, $1 owner, $2 the key to start after, $3 how many, $4 now;
 * BOUND as in FETCH_SQL: the first undelivered message of each key that no
 * live lease holds, in key order, read without locks.  DISTINCT ON the
 * distribution column lets every shard answer for its own keys.
 */
#define CITUS_HEADS_SQL(BOUND) \
	"SELECT h.ordering_key, h.seq FROM" \
	" (SELECT DISTINCT ON (p.ordering_key) p.ordering_key, p.seq, p.lease_until" \
	"    FROM idempotency.outbox AS p" \
	"   WHERE p.owner OPERATOR(pg_catalog.=) $1 AND p.ordering_key OPERATOR(pg_catalog.>) $2" \
	"     AND p.delivered_at IS NULL" BOUND \
	"   ORDER BY p.ordering_key, p.seq) AS h" \
	" WHERE h.lease_until IS NULL OR h.lease_until OPERATOR(pg_catalog.<=) $4" \
	" ORDER BY h.ordering_key LIMIT $3"

static SqlStatement citus_heads_stmt = {
	.sql = CITUS_HEADS_SQL(""),
	.nargs = 4,
	.argtypes = {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 2,
};

static SqlStatement citus_heads_wrapped_stmt = {
	.sql = CITUS_HEADS_SQL(" AND p.ordering_key OPERATOR(pg_catalog.<=) $5"),
	.nargs = 5,
	.argtypes = {TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID, TEXTOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 2,
};

/*
 * Under Citus, $1 owner, $2 ordering key, $3 seq, $4 now, $5 lease until,
 * $6 attempt: the message, if it is still undelivered and unleased and no
 * transaction holds it, leased.  Routed to the key's shard, where FOR UPDATE
 * SKIP LOCKED is allowed; a row that changed since the statement's snapshot
 * is treated as in FETCH_SQL, and the UPDATE finds it by its ctid alone, as
 * there (the ordering key routes the statement).
 */
static SqlStatement citus_claim_stmt = {
	.sql = "UPDATE idempotency.outbox AS o"
	"    SET attempt = $6, deliveries = o.deliveries OPERATOR(pg_catalog.+) 1, lease_until = $5"
	"  WHERE o.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
	"        SELECT c.ctid FROM idempotency.outbox AS c"
	"         WHERE c.owner OPERATOR(pg_catalog.=) $1"
	"           AND c.ordering_key OPERATOR(pg_catalog.=) $2"
	"           AND c.seq OPERATOR(pg_catalog.=) $3 AND c.delivered_at IS NULL"
	"           AND (c.lease_until IS NULL OR c.lease_until OPERATOR(pg_catalog.<=) $4)"
	"         FOR UPDATE OF c SKIP LOCKED))"
	"    AND o.ordering_key OPERATOR(pg_catalog.=) $2"
	" RETURNING o.message_id, o.topic, o.ordering_key, o.payload, o.headers, o.sent_at,"
	"  o.attempt, o.deliveries, o.lease_until",
	.nargs = 6,
	.argtypes = {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID},
	.expected_rc = SPI_OK_UPDATE_RETURNING,
	.natts = 9,
};

/* $1 owner: the caller's messages, for my_outbox under Citus */
static SqlStatement own_stmt = {
	.sql = "SELECT o.message_id, o.topic, o.ordering_key, o.seq, o.payload, o.headers, o.sent_at,"
	" o.attempt, o.deliveries, o.lease_until, o.delivered_at, o.expires_at"
	" FROM idempotency.outbox AS o WHERE o.owner OPERATOR(pg_catalog.=) $1",
	.nargs = 1,
	.argtypes = {TEXTOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 12,
};

/*
 * $1 owner, $2 attempt, $3 message ids (sorted, each once), $4 now, $5
 * expires_at: the messages the attempt holds, marked delivered.  The owner's
 * messages of those ids are found by their ids in the primary key, one probe
 * each, and updated by ctid if the attempt still holds them; the check on
 * attempt and delivered_at is the UPDATE's, so that a message another
 * transaction changed meanwhile is checked again in its new version.  No
 * scan has both the owner and "undelivered" to match the index of
 * undelivered messages: without statistics the planner guesses that few
 * messages are either, and would scan all of the owner's undelivered
 * messages for each acknowledgement (see FETCH_SQL).
 */
#define ACK_SQL(FIND) \
	"UPDATE idempotency.outbox AS o SET delivered_at = $4, expires_at = $5, lease_until = NULL" \
	" WHERE " FIND \
	" AND o.attempt OPERATOR(pg_catalog.=) $2" \
	" AND o.delivered_at IS NULL" \
	" RETURNING o.message_id"

static SqlStatement ack_stmt = {
	.sql = ACK_SQL("o.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
				   "        SELECT c.ctid FROM idempotency.outbox AS c"
				   "         WHERE c.message_id OPERATOR(pg_catalog.=) ANY ($3)"
				   "           AND c.owner OPERATOR(pg_catalog.=) $1))"),
	.nargs = 5,
	.argtypes = {TEXTOID, INT8OID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_UPDATE_RETURNING,
	.natts = 1,
};

/*
 * ack_stmt on a distributed outbox, one statement over every shard: a ctid
 * names a row of one shard only, so the messages are found by id in the
 * UPDATE itself, and each shard plans it for itself.
 */
static SqlStatement citus_ack_stmt = {
	.sql = ACK_SQL("o.message_id OPERATOR(pg_catalog.=) ANY ($3)"
				   " AND o.owner OPERATOR(pg_catalog.=) $1"),
	.nargs = 5,
	.argtypes = {TEXTOID, INT8OID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
	.expected_rc = SPI_OK_UPDATE_RETURNING,
	.natts = 1,
};

/* the messages the attempt delivered already ($1, $2, $3 as above) */
static SqlStatement acked_stmt = {
	.sql = "SELECT o.message_id FROM idempotency.outbox AS o"
	" WHERE o.message_id OPERATOR(pg_catalog.=) ANY ($3)"
	" AND o.owner OPERATOR(pg_catalog.=) $1"
	" AND o.attempt OPERATOR(pg_catalog.=) $2"
	" AND o.delivered_at IS NOT NULL",
	.nargs = 3,
	.argtypes = {TEXTOID, INT8OID, TEXTARRAYOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 1,
};

/* $1 now, $2 batch size: the oldest expired delivered messages first */
static SqlStatement delete_expired_stmt = {
	.sql = "DELETE FROM idempotency.outbox AS o"
	" USING (SELECT e.message_id, e.ordering_key, e.owner FROM idempotency.outbox AS e"
	"        WHERE e.expires_at OPERATOR(pg_catalog.<=) $1"
	"        ORDER BY e.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS x"
	" WHERE o.message_id OPERATOR(pg_catalog.=) x.message_id"
	" AND o.ordering_key OPERATOR(pg_catalog.=) x.ordering_key"
	" AND o.owner OPERATOR(pg_catalog.=) x.owner",
	.nargs = 2,
	.argtypes = {TIMESTAMPTZOID, INT4OID},
	.expected_rc = SPI_OK_DELETE,
	.custom_plan = true,
};

/*
 * The key after which this backend's next fetch starts looking (empty: from
 * the first).  A hint for fairness only: it is not per role, and a lost or
 * stale one changes nothing but where the scan starts.
 */
static char outbox_cursor[IDEMPOTENCY_KEY_MAXLEN + 1];
static int	outbox_cursor_len = 0;

/*
 * outbox_text_arg
 *		A text argument of 1 to IDEMPOTENCY_KEY_MAXLEN bytes; required unless
 *		optional, when NULL gives (Datum) 0.
 */
static Datum
outbox_text_arg(FunctionCallInfo fcinfo, int argno, const char *name, bool optional)
{
	if (optional && PG_ARGISNULL(argno))
		return (Datum) 0;
	return IdempotencyTextArg(fcinfo, argno, name);
}

/*
 * outbox_new_message_id
 *		A new message id: a version 7 UUID (RFC 9562), 48 bits of Unix time in
 *		milliseconds and 74 random bits, so ids sent one after another sort
 *		close together in the primary key.
 */
static Datum
outbox_new_message_id(TimestampTz now)
{
	uint8		raw[16];
	char		str[OUTBOX_UUID_LEN + 1];
	uint64		ms;
	char	   *p = str;

	if (!pg_strong_random(raw + 6, sizeof(raw) - 6))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random message id")));
	ms = (uint64) (now / 1000 +
				   (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000);
	for (int i = 0; i < 6; i++)
		raw[i] = (uint8) (ms >> (8 * (5 - i)));
	raw[6] = 0x70 | (raw[6] & 0x0F);	/* version 7 */
	raw[8] = 0x80 | (raw[8] & 0x3F);	/* variant 10 */

	for (int i = 0; i < 16; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		p += hex_encode((const char *) &raw[i], 1, p);
	}
	*p = '\0';
	return CStringGetTextDatum(str);
}

/*
 * outbox_send_citus
 *		Send on a distributed outbox (values and nulls as send_stmt's, with
 *		room for $8): the key's next number, read and inserted in two
 *		statements routed to its shard, until the insert takes.
 */
static void
outbox_send_citus(Datum *values, char *nulls)
{
	for (;;)
	{
		bool		isnull;
		int64		top = 0;

		if (SqlExecute(&citus_top_stmt, values, NULL) == 1)
			top = DatumGetInt64(SqlResult(0, 1, &isnull));
		values[7] = Int64GetDatum(top + 1);
		nulls[7] = ' ';
		if (SqlExecute(&citus_send_stmt, values, nulls) == 1)
			return;
		CHECK_FOR_INTERRUPTS();
	}
}

PG_FUNCTION_INFO_V1(idempotency_outbox_send);

/*
 * idempotency_outbox_send
 *		outbox_send(topic, payload, ordering_key, headers, message_id): record
 *		a message in the caller's transaction; returns its id.
 */
Datum
idempotency_outbox_send(PG_FUNCTION_ARGS)
{
	SqlCall		call;
	Datum		values[8];
	char		nulls[8];
	bool		explicit_id;
	bool		own_key;
	bool		sent = false;

	IdempotencyCheckNargs(fcinfo, 5);
	memset(nulls, ' ', sizeof(nulls));

	values[3] = outbox_text_arg(fcinfo, 0, "topic", false);
	IdempotencyRequireArg(fcinfo, 1, "payload");
	values[4] = PG_GETARG_DATUM(1);
	values[1] = outbox_text_arg(fcinfo, 2, "ordering_key", true);
	if (PG_ARGISNULL(3))
	{
		values[5] = (Datum) 0;
		nulls[5] = 'n';
	}
	else
	{
		Jsonb	   *headers = PG_GETARG_JSONB_P(3);

		if (!JB_ROOT_IS_OBJECT(headers))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("headers must be a JSON object")));
		values[5] = PointerGetDatum(headers);
	}
	values[2] = outbox_text_arg(fcinfo, 4, "message_id", true);
	explicit_id = values[2] != (Datum) 0;

	SqlCallBegin(&call);
	values[0] = call.owner;
	values[6] = TimestampTzGetDatum(call.now);
	if (!explicit_id)			/* returned: out of SPI's memory */
		values[2] = SqlKeep(&call, outbox_new_message_id(call.now));
	own_key = values[1] == (Datum) 0;
	if (own_key)
		values[1] = values[2];	/* ordered on its own */

	/*
	 * An id chosen by the caller may have been sent before: say so plainly (a
	 * concurrent send of the same id still fails on the primary key, with the
	 * same SQLSTATE).
	 */
	if (explicit_id && SqlExecute(&sent_stmt, values, NULL) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("message \"%s\" was already sent with ordering key \"%s\"",
						TextDatumGetCString(values[2]), TextDatumGetCString(values[1])),
				 errdetail("A message id is kept until the message's delivery has expired."),
				 errhint("Give every message its own id, or let outbox_send generate one.")));

	if (idempotency_outbox_delivery == OUTBOX_DELIVERY_LOGICAL)
	{
		/*
		 * Consumers read the messages in commit order from the WAL: no
		 * numbering, no relay.
		 */
		if (!XLogLogicalInfoActive())
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot send outbox messages through logical decoding while \"wal_level\" is \"%s\"",
							GetConfigOption("wal_level", false, false)),
					 errhint("Set \"wal_level\" to \"logical\" and restart, or set \"idempotency.outbox_delivery\" to \"relay\".")));
		values[7] = TimestampTzGetDatum(call.now + OUTBOX_LOGICAL_KEEP);
		(void) SqlExecute(&send_delivered_stmt, values, nulls);
		if (SqlExecute(&emit_stmt, values, nulls) != 1)
			elog(ERROR, "could not write an outbox message to the WAL");
		SqlCallEnd(&call);
		PG_RETURN_DATUM(values[2]);
	}

	/*
	 * A key of its own is new: its first number needs no lock and no probe,
	 * so that sending many messages without an ordering key in one
	 * transaction takes no lock per message.  Any other key's senders are
	 * serialised by its lock, held to the end of the transaction: a second
	 * sender waits here until the first commits (then numbers after its
	 * message, which the latest snapshot shows) or rolls back (then takes its
	 * number).  Zero rows: something that does not take the lock took the
	 * number and committed meanwhile; the next try sees it.
	 */
	if (own_key && SqlExecute(&send_first_stmt, values, nulls) == 1)
		sent = true;
	if (!sent)
		LockOutboxOrderingKey(values[0], values[1]);
	if (!sent && IdempotencyCitusPartMethod(CITUS_OUTBOX) == 'h')
		outbox_send_citus(values, nulls);
	else
	{
		while (!sent)
		{
			sent = SqlExecute(&send_stmt, values, nulls) == 1;
			CHECK_FOR_INTERRUPTS();
		}
	}
	SqlCallEnd(&call);

	PG_RETURN_DATUM(values[2]);
}

/*
 * outbox_put_row
 *		Add row i of what the last statement handed out to the result; *last
 *		gets its key if it is the greatest yet.
 */
static inline void
outbox_put_row(SqlCall *call, ReturnSetInfo *rsinfo, uint64 i, Datum *last)
{
	Datum		row[9];
	bool		isnull[9];

	for (int col = 0; col < 9; col++)
	{
		row[col] = SqlResult(i, col + 1, &isnull[col]);
		/* varlena columns, detoasted and out of SPI's memory */
		if (col <= 4 && !isnull[col])
			row[col] = SqlKeep(call, row[col]);
	}
	if (*last == (Datum) 0 || IdSetCompare(&row[2], last) > 0)
		*last = row[2];
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, isnull);
}

/*
 * outbox_fetch_pass
 *		Hand out up to limit ready messages with stmt (fetch_stmt or
 *		fetch_wrapped_stmt, and their parameters); put them into the result
 *		and return how many.  *last gets the greatest key handed out, if any.
 */
static int
outbox_fetch_pass(SqlCall *call, SqlStatement *stmt, ReturnSetInfo *rsinfo,
				  Datum *values, Datum *last)
{
	uint64		n = SqlExecute(stmt, values, NULL);

	for (uint64 i = 0; i < n; i++)
		outbox_put_row(call, rsinfo, i, last);
	return (int) n;
}

/*
 * outbox_fetch_citus_pass
 *		outbox_fetch_pass on a distributed outbox: find up to limit keys'
 *		first messages after values[1] (up to bound, if not 0) over every
 *		shard, and take each with a statement routed to its shard; those
 *		another relay took meanwhile are passed over, and more keys are
 *		looked for after them, until limit messages were handed out or no
 *		key is left.  values as fetch_stmt's.
 */
static int
outbox_fetch_citus_pass(SqlCall *call, ReturnSetInfo *rsinfo, Datum *values,
						int limit, Datum bound, Datum *last)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "idempotency outbox fetch context",
											  ALLOCSET_DEFAULT_SIZES);
	Datum		heads[5] = {values[0], values[1], (Datum) 0, values[3], bound};
	Datum		claim[6] = {values[0], (Datum) 0, (Datum) 0, values[3], values[4], values[5]};
	int			handed = 0;

	while (handed < limit)
	{
		MemoryContext oldcontext;
		int			want = limit - handed;
		int			n;
		Datum	   *keys;
		Datum	   *seqs;

		heads[2] = Int32GetDatum(want);
		n = (int) SqlExecute(bound != (Datum) 0 ? &citus_heads_wrapped_stmt : &citus_heads_stmt,
							 heads, NULL);
		MemoryContextReset(cxt);
		oldcontext = MemoryContextSwitchTo(cxt);
		keys = palloc(sizeof(Datum) * Max(n, 1));
		seqs = palloc(sizeof(Datum) * Max(n, 1));
		for (int i = 0; i < n; i++)
		{
			bool		isnull;

			keys[i] = PointerGetDatum(PG_DETOAST_DATUM_COPY(SqlResult(i, 1, &isnull)));
			seqs[i] = SqlResult(i, 2, &isnull);
		}
		MemoryContextSwitchTo(oldcontext);

		for (int i = 0; i < n && handed < limit; i++)
		{
			claim[1] = keys[i];
			claim[2] = seqs[i];
			if (SqlExecute(&citus_claim_stmt, claim, NULL) == 1)
			{
				outbox_put_row(call, rsinfo, 0, last);
				handed++;
			}
			CHECK_FOR_INTERRUPTS();
		}
		if (n < want)
			break;				/* no key is left */
		heads[1] = keys[n - 1];
	}
	MemoryContextDelete(cxt);
	return handed;
}

PG_FUNCTION_INFO_V1(idempotency_outbox_fetch);

/*
 * idempotency_outbox_fetch
 *		outbox_fetch(batch_size, lease): up to batch_size ready messages, each
 *		the oldest undelivered message of its key, leased to the caller until
 *		now + lease under one new fencing attempt.
 */
Datum
idempotency_outbox_fetch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SqlCall		call;
	Datum		values[7];
	int32		batch_size;
	int			handed;
	Datum		last = (Datum) 0;
	bool		isnull;
	bool		citus;

	IdempotencyCheckNargs(fcinfo, 2);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	IdempotencyRequireArg(fcinfo, 0, "batch_size");
	batch_size = PG_GETARG_INT32(0);
	if (batch_size <= 0 || batch_size > IDEMPOTENCY_OUTBOX_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must be between 1 and %d", IDEMPOTENCY_OUTBOX_MAX_BATCH)));
	IdempotencyRequireArg(fcinfo, 1, "lease");

	SqlCallBegin(&call);
	values[0] = call.owner;
	values[1] = PointerGetDatum(cstring_to_text_with_len(outbox_cursor, outbox_cursor_len));
	values[2] = Int32GetDatum(batch_size);
	values[3] = TimestampTzGetDatum(call.now);
	values[4] = TimestampTzGetDatum(IdempotencyAddPositive(call.now, PG_GETARG_DATUM(1), "lease"));
	citus = IdempotencyCitusPartMethod(CITUS_OUTBOX) == 'h';
	if (citus)
	{
		if (IdempotencyCitusLocalGroup() != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot fetch outbox messages on a node that is not the Citus coordinator"),
					 errdetail("Fencing attempts are drawn from the coordinator's sequence."),
					 errhint("Connect relays to the coordinator.")));
	}
	if (SqlExecute(&attempt_stmt, NULL, NULL) != 1)
		elog(ERROR, "could not draw an outbox attempt");
	values[5] = SqlResult(0, 1, &isnull);

	if (citus)
		handed = outbox_fetch_citus_pass(&call, rsinfo, values, batch_size, (Datum) 0, &last);
	else
		handed = outbox_fetch_pass(&call, &fetch_stmt, rsinfo, values, &last);

	/*
	 * Short of a full batch after the cursor: wrap around to the first key,
	 * up to the cursor.  The keys handed out just now are leased, so this
	 * pass passes over them.
	 */
	if (handed < batch_size && outbox_cursor_len > 0)
	{
		Datum		wrapped = (Datum) 0;

		values[6] = values[1];
		values[1] = CStringGetTextDatum("");
		values[2] = Int32GetDatum(batch_size - handed);
		if (citus)
			handed += outbox_fetch_citus_pass(&call, rsinfo, values, batch_size - handed,
											  values[6], &wrapped);
		else
			handed += outbox_fetch_pass(&call, &fetch_wrapped_stmt, rsinfo, values, &wrapped);
		if (wrapped != (Datum) 0)
			last = wrapped;
	}
	SqlCallEnd(&call);

	if (last != (Datum) 0)
	{
		text	   *t = DatumGetTextPP(last);

		outbox_cursor_len = VARSIZE_ANY_EXHDR(t);
		Assert(outbox_cursor_len <= IDEMPOTENCY_KEY_MAXLEN);
		memcpy(outbox_cursor, VARDATA_ANY(t), outbox_cursor_len);
	}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(idempotency_outbox_ack);

/*
 * idempotency_outbox_ack
 *		outbox_ack(attempt, message_ids, ttl): mark delivered the messages
 *		that attempt holds; returns how many were newly marked.  Refused with
 *		IK004, marking nothing, if the attempt does not hold one of them (any
 *		more): another relay took it after the lease ran out, or it was never
 *		handed to this attempt or this role.
 */
Datum
idempotency_outbox_ack(PG_FUNCTION_ARGS)
{
	SqlCall		call;
	Datum		values[5];
	Datum	   *elems;
	int			n;
	Datum	   *sorted;
	int			m;
	bool	   *marked;
	int			newly;
	int			held;

	IdempotencyCheckNargs(fcinfo, 3);
	IdempotencyRequireArg(fcinfo, 0, "attempt");
	n = IdSetArg(fcinfo, 1, "outbox_ack", IDEMPOTENCY_OUTBOX_MAX_BATCH, &elems);
	IdempotencyRequireArg(fcinfo, 2, "ttl");
	if (n == 0)
		PG_RETURN_INT64(0);

	m = IdSetSortedUnique(elems, n, &sorted);
	marked = palloc0(sizeof(bool) * m);

	SqlCallBegin(&call);
	values[0] = call.owner;
	values[1] = PG_GETARG_DATUM(0);
	values[2] = PointerGetDatum(construct_array(sorted, m, TEXTOID, -1, false, TYPALIGN_INT));
	values[3] = TimestampTzGetDatum(call.now);
	values[4] = TimestampTzGetDatum(IdempotencyAddPositive(call.now, PG_GETARG_DATUM(2), "ttl"));

	newly = IdSetMark(sorted, m, marked,
					  SqlExecute(IdempotencyCitusPartMethod(CITUS_OUTBOX) == 'h' ?
								 &citus_ack_stmt : &ack_stmt, values, NULL));
	held = newly;
	if (held < m)
		held += IdSetMark(sorted, m, marked, SqlExecute(&acked_stmt, values, NULL));
	if (held < m)
	{
		int			i = 0;

		while (marked[i])
			i++;
		ereport(ERROR,
				(errcode(ERRCODE_IDEMPOTENCY_STALE_ATTEMPT),
				 errmsg("attempt %lld does not hold message \"%s\"",
						(long long) DatumGetInt64(values[1]), TextDatumGetCString(sorted[i])),
				 errdetail("Its lease ran out and it was handed to a later attempt, or it was never handed to this attempt."),
				 errhint("Nothing was acknowledged; acknowledge the other messages of the batch again without it.")));
	}
	SqlCallEnd(&call);

	PG_RETURN_INT64((int64) newly);
}

PG_FUNCTION_INFO_V1(idempotency_citus_my_outbox);

/*
 * idempotency_citus_my_outbox
 *		The caller's messages, read as the outbox's owner: what my_outbox
 *		shows once citus_setup() has distributed the outbox (only for a
 *		caller who may read my_outbox).
 */
Datum
idempotency_citus_my_outbox(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SqlCall		call;
	Datum		values[1];
	uint64		n;

	IdempotencyRequireViewPrivilege("my_outbox");
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	SqlCallBegin(&call);
	values[0] = call.owner;
	n = SqlExecute(&own_stmt, values, NULL);
	for (uint64 i = 0; i < n; i++)
	{
		Datum		row[12];
		bool		isnull[12];

		for (int col = 0; col < 12; col++)
			row[col] = SqlResult(i, col + 1, &isnull[col]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, isnull);
	}
	SqlCallEnd(&call);
	return (Datum) 0;
}

/*
 * OutboxDeleteExpired
 *		Delete up to limit delivered messages past their expiry, in the
 *		caller's frame.  Undelivered messages never expire.
 */
uint64
OutboxDeleteExpired(SqlCall *call, int32 limit)
{
	Datum		values[2] = {TimestampTzGetDatum(call->now), Int32GetDatum(limit)};

	return SqlExecute(&delete_expired_stmt, values, NULL);
}
