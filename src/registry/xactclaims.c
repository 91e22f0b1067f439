/*-------------------------------------------------------------------------
 *
 * xactclaims.c
 *	  The claims the current transaction took: what finish and abandon
 *	  without an attempt may end, and the claims that must be finished
 *	  before the transaction commits.
 *
 * A claim that idempotent_begin answered "execute" is remembered here until
 * the transaction ends or the claim is ended.  Two things follow from it.
 *
 * Fencing is implied inside the claim's own transaction: a finish or abandon
 * that names no attempt ends this transaction's claim of the key, fenced by
 * the attempt remembered here.  A claim committed in an earlier transaction
 * is not here, and ending it takes its attempt: otherwise a worker whose
 * lease ran out, and whose claim was taken over, would overwrite the new
 * owner's answer.
 *
 * A claim must end in the transaction that took it unless it was taken for
 * work outside the database (external => true, or handed out by
 * claim_stalled).  A claim whose work is in the database commits with that
 * work: committed open, the business write would be done while the record
 * still says processing, and once the lease ran out a retry would do it
 * again.  Most such claims are not even written before their finish: a
 * transactional claim of a key nobody had is held by its key's lock
 * (begin.c) and lives only here until idempotent_finish writes its record
 * once, complete, in the same transaction (finish.c), or until a call that
 * needs the record written (a recovery point, a renewal) writes it; a
 * deferred claim (defer_claim => true) is never written before its finish.
 * So a transaction must not commit (or prepare) while such a claim is open:
 * the pre-commit callback refuses it with an error, which aborts the
 * transaction and everything it wrote.
 * Claims of the 1.0 SQL objects' idempotent_begin are external, as 1.0's
 * were, and so are the written claims of a session that keeps 1.0's rule
 * (idempotency.commit_rule = lease_is_external) while its clients move from
 * 1.0 to 1.1.  And the completer (claim_stalled) passes over the transaction's
 * own open claims that are not external (XactClaimsInDatabase): taking one
 * over would make it external, and the transaction would commit its
 * business write with the claim unfinished, for a retry after the lease to
 * do again.
 *
 * Subtransactions: a claim taken in a subtransaction that rolls back is
 * forgotten with it (its business write is gone too); one taken in a
 * subtransaction that commits passes to the parent.  Ending a claim (its
 * finish or abandon) follows subtransactions the same way: a claim ended in
 * a subtransaction that rolls back is open again, because the finish's
 * record went with the rollback while the business write of the claim's own
 * level stays; so the claim is kept, marked ended, until the subtransaction
 * that ended it has committed into the one that took it.  Only then, or at
 * once when both are the same, is its memory given back: a transaction that
 * finishes a million claims holds none of them.
 *
 * Cost: a transaction may hold many claims at once (a batch job that claims
 * its keys first and finishes them later).  The claims are a list in the
 * order they were taken, which is also the order of their subtransaction
 * levels, so a subtransaction's end visits only its own claims at the list's
 * tail; a claim ended deeper than it was taken is counted, so that the rare
 * whole-list pass for those is made only when there are some; and once a
 * transaction holds more than a few claims they are also indexed by
 * identity, so that finding one does not walk them all.
 *
 * Concurrency: none; the list is per backend and per transaction.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/xactclaims.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "lib/ilist.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "base/compat.h"
#include "registry/xactclaims.h"

/* Claims held before they are also indexed by identity. */
#define XACT_CLAIMS_UNINDEXED 16

/*
 * The current transaction's claims, in the order they were taken, in
 * TopTransactionContext, and how many of them were ended deeper than they
 * were taken.
 */
static dlist_head xact_claims = DLIST_STATIC_INIT(xact_claims);
static int	xact_nclaims = 0;

/* the keys' locks the transaction's claims took (begin.c), never fewer */
static int	xact_nlocks = 0;
static int	xact_nended = 0;
static int	xact_nwritten_deeper = 0;	/* written deeper than taken */
static bool xact_callbacks_registered = false;

/* A claim's identity: (owner, scope, key), pointing into its image. */
typedef struct XactClaimIdentity
{
	text	   *owner;
	text	   *scope;
	text	   *key;
} XactClaimIdentity;

typedef struct XactClaimEntry
{
	XactClaimIdentity id;		/* hash key */
	XactClaim  *claim;
} XactClaimEntry;

/* The claims by identity, once there are more than a few; else NULL. */
static HTAB *xact_index = NULL;

/*
 * xact_text_equal
 *		Bytewise equality of two text values.
 */
static bool
xact_text_equal(text *s, text *t)
{
	return VARSIZE_ANY_EXHDR(s) == VARSIZE_ANY_EXHDR(t) &&
		memcmp(VARDATA_ANY(s), VARDATA_ANY(t), VARSIZE_ANY_EXHDR(s)) == 0;
}

/*
 * xact_identity_hash, xact_identity_match
 *		The index's hash and equality: the three values' bytes.
 */
static uint32
xact_identity_hash(const void *key, Size keysize)
{
	const XactClaimIdentity *id = key;
	uint32		h;

	h = hash_bytes((const unsigned char *) VARDATA_ANY(id->key), VARSIZE_ANY_EXHDR(id->key));
	h = hash_combine(h, hash_bytes((const unsigned char *) VARDATA_ANY(id->scope),
								   VARSIZE_ANY_EXHDR(id->scope)));
	return hash_combine(h, hash_bytes((const unsigned char *) VARDATA_ANY(id->owner),
									  VARSIZE_ANY_EXHDR(id->owner)));
}

static int
xact_identity_match(const void *key1, const void *key2, Size keysize)
{
	const XactClaimIdentity *a = key1;
	const XactClaimIdentity *b = key2;

	return xact_text_equal(a->key, b->key) && xact_text_equal(a->scope, b->scope) &&
		xact_text_equal(a->owner, b->owner) ? 0 : 1;
}

/*
 * xact_claim_identity
 *		A claim's identity.
 */
static XactClaimIdentity
xact_claim_identity(XactClaim *claim)
{
	XactClaimIdentity id;

	id.owner = DatumGetTextPP(claim->row.values[RC_owner]);
	id.scope = DatumGetTextPP(claim->row.values[RC_scope]);
	id.key = DatumGetTextPP(claim->row.values[RC_key]);
	return id;
}

/*
 * xact_index_add
 *		Index one claim.  There is at most one open claim per identity; an
 *		ended one may be shadowed by a later claim of its key.
 */
static void
xact_index_add(XactClaim *claim)
{
	XactClaimIdentity id = xact_claim_identity(claim);
	XactClaimEntry *entry;
	bool		found;

	entry = hash_search(xact_index, &id, HASH_ENTER, &found);
	entry->claim = claim;
}

/*
 * xact_index_build
 *		Index every claim, once the transaction holds more than a few.
 */
static void
xact_index_build(void)
{
	HASHCTL		ctl;
	dlist_iter	iter;

	ctl.keysize = sizeof(XactClaimIdentity);
	ctl.entrysize = sizeof(XactClaimEntry);
	ctl.hash = xact_identity_hash;
	ctl.match = xact_identity_match;
	ctl.hcxt = TopTransactionContext;
	xact_index = hash_create("idempotency claims of the transaction", 256, &ctl,
							 HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	dlist_foreach(iter, &xact_claims)
		xact_index_add(dlist_container(XactClaim, node, iter.cur));
}

/*
 * xact_claim_free
 *		Forget a claim and give back its memory: its image's values and
 *		itself.
 */
static void
xact_claim_free(XactClaim *claim)
{
	if (xact_index != NULL)
	{
		XactClaimIdentity id = xact_claim_identity(claim);
		XactClaimEntry *entry = hash_search(xact_index, &id, HASH_FIND, NULL);

		/* an ended claim's key may have been claimed again since */
		if (entry != NULL && entry->claim == claim)
			hash_search(xact_index, &id, HASH_REMOVE, NULL);
	}
	if (claim->ended_level != 0)
		xact_nended--;
	if (claim->written_level != 0 && claim->written_level != claim->nest_level)
		xact_nwritten_deeper--;
	dlist_delete(&claim->node);
	xact_nclaims--;
	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
		if (!claim->row.nulls[i] && RegistryColumnVarlena(i))
			pfree(DatumGetPointer(claim->row.values[i]));
	pfree(claim);
}

/*
 * xact_claims_xact_callback
 *		Refuse to commit (or prepare) a transaction with an open claim that
 *		is not for work outside the database; forget the claims when the transaction ends either way (their
 *		memory goes with TopTransactionContext).
 */
static void
xact_claims_xact_callback(XactEvent event, void *arg)
{
	dlist_iter	iter;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			dlist_foreach(iter, &xact_claims)
			{
				XactClaim  *claim = dlist_container(XactClaim, node, iter.cur);

				if (claim->ended_level != 0 || claim->kind == XACT_CLAIM_EXTERNAL)
					continue;
				if (claim->kind == XACT_CLAIM_DEFERRED)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
							 errmsg("idempotency key \"%s\" in scope \"%s\" was claimed with defer_claim but not finished",
									TextDatumGetCString(claim->row.values[RC_key]),
									TextDatumGetCString(claim->row.values[RC_scope])),
							 errdetail("A deferred claim is written only by idempotent_finish, so this transaction cannot commit without it; nothing was committed."),
							 errhint("Call idempotent_finish (or idempotent_abandon) in the same transaction; for work outside the database, claim with external => true and without defer_claim.")));
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
						 errmsg("idempotency key \"%s\" in scope \"%s\" was claimed but not finished",
								TextDatumGetCString(claim->row.values[RC_key]),
								TextDatumGetCString(claim->row.values[RC_scope])),
						 errdetail("A claim taken without external => true must be finished or abandoned in the transaction that took it, so that the work and its answer commit together; nothing was committed."),
						 errhint("Call idempotent_finish (or idempotent_abandon) before the transaction commits; for work outside the database, claim with external => true and finish with attempt => in a later transaction.")));
			}
			break;
		default:
			dlist_init(&xact_claims);
			xact_nclaims = 0;
			xact_nlocks = 0;
			xact_nended = 0;
			xact_nwritten_deeper = 0;
			xact_index = NULL;
			break;
	}
}

/*
 * xact_claims_subxact_callback
 *		A subtransaction's claims go with its abort, and the claims it ended
 *		are open again; with its commit both pass to its parent.  The claims
 *		taken at or below a level are the list's tail.
 */
static void
xact_claims_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	dlist_node *cur;
	dlist_iter	iter;
	dlist_mutable_iter miter;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;

	cur = dlist_is_empty(&xact_claims) ? NULL : dlist_tail_node(&xact_claims);
	while (cur != NULL)
	{
		XactClaim  *claim = dlist_container(XactClaim, node, cur);
		dlist_node *prev = dlist_has_prev(&xact_claims, cur) ?
		dlist_prev_node(&xact_claims, cur) : NULL;

		if (claim->nest_level < level)
			break;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			xact_claim_free(claim);
		else
		{
			claim->nest_level = level - 1;
			if (claim->written_level >= level)
				claim->written_level = level - 1;
		}
		cur = prev;
	}

	/*
	 * A claim taken above and written here: a rollback takes the record away
	 * and leaves the claim in memory only, as it was.
	 */
	if (xact_nwritten_deeper > 0)
	{
		dlist_foreach(iter, &xact_claims)
		{
			XactClaim  *claim = dlist_container(XactClaim, node, iter.cur);

			if (claim->written_level < level || claim->written_level == claim->nest_level)
				continue;
			if (event == SUBXACT_EVENT_ABORT_SUB)
				claim->written_level = 0;
			else
				claim->written_level = level - 1;
			if (claim->written_level == 0 || claim->written_level == claim->nest_level)
				xact_nwritten_deeper--;
		}
	}

	if (xact_nended == 0)
		return;
	dlist_foreach_modify(miter, &xact_claims)
	{
		XactClaim  *claim = dlist_container(XactClaim, node, miter.cur);

		if (claim->ended_level < level)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
		{
			/* open again; a claim of its key taken since went above */
			claim->ended_level = 0;
			xact_nended--;
			if (xact_index != NULL)
				xact_index_add(claim);
		}
		else if (level - 1 <= claim->nest_level)
			xact_claim_free(claim);
		else
			claim->ended_level = level - 1;
	}
}

/*
 * XactClaimFind
 *		The current transaction's open claim of (owner, scope, key), or NULL.
 */
XactClaim  *
XactClaimFind(Datum owner, Datum scope, Datum key)
{
	XactClaimIdentity id;
	dlist_iter	iter;
	XactClaim  *claim = NULL;

	if (xact_nclaims == 0)
		return NULL;
	id.owner = DatumGetTextPP(owner);
	id.scope = DatumGetTextPP(scope);
	id.key = DatumGetTextPP(key);
	if (xact_index != NULL)
	{
		XactClaimEntry *entry = hash_search(xact_index, &id, HASH_FIND, NULL);

		claim = entry != NULL ? entry->claim : NULL;
	}
	else
	{
		dlist_foreach(iter, &xact_claims)
		{
			XactClaim  *c = dlist_container(XactClaim, node, iter.cur);
			XactClaimIdentity cid = xact_claim_identity(c);

			if (c->ended_level == 0 && xact_identity_match(&id, &cid, sizeof(id)) == 0)
			{
				claim = c;
				break;
			}
		}
	}
	return claim != NULL && claim->ended_level == 0 ? claim : NULL;
}

/*
 * xact_claims_register
 *		The callbacks that follow the transaction's claims, once per backend.
 */
static void
xact_claims_register(void)
{
	if (!xact_callbacks_registered)
	{
		RegisterXactCallback(xact_claims_xact_callback, NULL);
		RegisterSubXactCallback(xact_claims_subxact_callback, NULL);
		xact_callbacks_registered = true;
	}
}

/*
 * XactClaimAdd
 *		Remember a claim this transaction took, a copy of its image: until
 *		its finish writes it, if it is deferred; until it ends, unless it is
 *		external.
 */
XactClaim  *
XactClaimAdd(const RegistryRow *row, XactClaimKind kind, bool written)
{
	MemoryContext oldcontext;
	XactClaim  *claim;

	xact_claims_register();

	oldcontext = MemoryContextSwitchTo(TopTransactionContext);
	claim = palloc0(sizeof(XactClaim));
	claim->row = *row;
	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
		if (!row->nulls[i] && RegistryColumnVarlena(i))
			claim->row.values[i] = PointerGetDatum(PG_DETOAST_DATUM_COPY(row->values[i]));
	claim->kind = kind;
	claim->nest_level = GetCurrentTransactionNestLevel();
	claim->written_level = written ? claim->nest_level : 0;
	dlist_push_tail(&xact_claims, &claim->node);
	xact_nclaims++;
	if (xact_index != NULL)
		xact_index_add(claim);
	else if (xact_nclaims > XACT_CLAIMS_UNINDEXED)
		xact_index_build();
	MemoryContextSwitchTo(oldcontext);
	return claim;
}

/*
 * XactClaimLocked
 *		A claim took its key's lock, held to the end of the transaction.
 */
void
XactClaimLocked(void)
{
	xact_claims_register();
	xact_nlocks++;
}

/*
 * XactClaimUnlocked
 *		A begin gave back the key's lock it took (begin.c).
 */
void
XactClaimUnlocked(void)
{
	Assert(xact_nlocks > 0);
	xact_nlocks--;
}

/*
 * XactClaimLocks
 *		How many keys' locks the transaction's claims hold: those a
 *		subtransaction's rollback released stay counted, so the count is
 *		never fewer.
 */
int
XactClaimLocks(void)
{
	return xact_nlocks;
}

/*
 * XactClaimWritten
 *		The claim's record was written now, in the current subtransaction:
 *		if that rolls back, the claim is in memory only again.
 */
void
XactClaimWritten(XactClaim *claim)
{
	Assert(claim->written_level == 0);
	claim->written_level = GetCurrentTransactionNestLevel();
	if (claim->written_level != claim->nest_level)
		xact_nwritten_deeper++;
}

/*
 * XactClaimEnd
 *		The claim was finished or abandoned: it is this transaction's no
 *		longer (and no longer holds the commit, unless external).  Ended in the
 *		subtransaction that took it, it is gone (a rollback there undoes the
 *		claim too); ended deeper, it stays, marked, until that
 *		subtransaction's fate is known.
 */
void
XactClaimEnd(XactClaim *claim)
{
	int			level = GetCurrentTransactionNestLevel();

	if (level <= claim->nest_level)
		xact_claim_free(claim);
	else
	{
		claim->ended_level = level;
		xact_nended++;
	}
}

/*
 * XactClaimsInDatabase
 *		The scope and key of each of owner's open claims in this transaction
 *		that must end in it (transactional or deferred), as a text[n][2] (a
 *		key's bytes are a text's), for the completer to pass over; (Datum) 0
 *		if there are none.  In the caller's memory.
 */
Datum
XactClaimsInDatabase(Datum owner)
{
	dlist_iter	iter;
	Datum	   *elems;
	int			n = 0;
	int			dims[2];
	int			lbs[2] = {1, 1};
	text	   *own = DatumGetTextPP(owner);

	if (xact_nclaims == 0)
		return (Datum) 0;
	elems = palloc(2 * xact_nclaims * sizeof(Datum));
	dlist_foreach(iter, &xact_claims)
	{
		XactClaim  *claim = dlist_container(XactClaim, node, iter.cur);

		if (claim->ended_level != 0 || claim->kind == XACT_CLAIM_EXTERNAL ||
			!xact_text_equal(DatumGetTextPP(claim->row.values[RC_owner]), own))
			continue;
		elems[2 * n] = claim->row.values[RC_scope];
		elems[2 * n + 1] = claim->row.values[RC_key];
		n++;
	}
	if (n == 0)
		return (Datum) 0;
	dims[0] = n;
	dims[1] = 2;
	return PointerGetDatum(construct_md_array(elems, NULL, 2, dims, lbs, TEXTOID, -1,
											  false, TYPALIGN_INT));
}
