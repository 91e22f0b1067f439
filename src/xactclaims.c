/*-------------------------------------------------------------------------
 *
 * xactclaims.c
 *	  The claims the current transaction took: what finish and abandon
 *	  without an attempt may end, and the deferred claims that must be
 *	  finished before the transaction commits.
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
 * A deferred claim (defer_claim => true) writes nothing at begin: the record
 * is written once, complete, by idempotent_finish in the same transaction
 * (registry_api.c).  Until then the claim lives only here.  So a transaction
 * must not commit while one is open: nothing would record that the work was
 * done, and a retry would do it again.  The pre-commit callback refuses such
 * a commit with an error, which aborts the transaction and everything it
 * wrote.
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
 * Concurrency: none; the list is per backend and per transaction.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/xactclaims.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"

#include "xactclaims.h"

/* The current transaction's claims, in TopTransactionContext. */
static List *xact_claims = NIL;
static bool xact_callbacks_registered = false;

/*
 * xact_text_equal
 *		Bytewise equality of two text datums.
 */
static bool
xact_text_equal(Datum a, Datum b)
{
	text	   *s = DatumGetTextPP(a);
	text	   *t = DatumGetTextPP(b);

	return VARSIZE_ANY_EXHDR(s) == VARSIZE_ANY_EXHDR(t) &&
		memcmp(VARDATA_ANY(s), VARDATA_ANY(t), VARSIZE_ANY_EXHDR(s)) == 0;
}

/*
 * xact_claim_free
 *		Give back a claim's memory: its image's values and itself.
 */
static void
xact_claim_free(XactClaim *claim)
{
	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
		if (!claim->row.nulls[i] && RegistryColumnVarlena(i))
			pfree(DatumGetPointer(claim->row.values[i]));
	pfree(claim);
}

/*
 * xact_claims_xact_callback
 *		Refuse to commit (or prepare) a transaction with an open deferred
 *		claim; forget the list when the transaction ends either way (its
 *		memory goes with TopTransactionContext).
 */
static void
xact_claims_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			foreach(lc, xact_claims)
			{
				XactClaim  *claim = lfirst(lc);

				if (claim->ended_level != 0 || !claim->deferred)
					continue;
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
						 errmsg("idempotency key \"%s\" in scope \"%s\" was claimed with defer_claim but not finished",
								TextDatumGetCString(claim->row.values[RC_key]),
								TextDatumGetCString(claim->row.values[RC_scope])),
						 errdetail("A deferred claim is written only by idempotent_finish, so this transaction cannot commit without it; nothing was committed."),
						 errhint("Call idempotent_finish (or idempotent_abandon) in the same transaction, or claim without defer_claim for work outside the database.")));
			}
			break;
		default:
			xact_claims = NIL;
			break;
	}
}

/*
 * xact_claims_subxact_callback
 *		A subtransaction's claims go with its abort, and the claims it ended
 *		are open again; with its commit both pass to its parent.
 */
static void
xact_claims_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (xact_claims == NIL)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, xact_claims)
		{
			XactClaim  *claim = lfirst(lc);

			if (claim->nest_level >= level)
			{
				xact_claims = foreach_delete_current(xact_claims, lc);
				xact_claim_free(claim);
			}
			else if (claim->ended_level >= level)
				claim->ended_level = 0;
		}
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, xact_claims)
		{
			XactClaim  *claim = lfirst(lc);

			if (claim->nest_level >= level)
				claim->nest_level = level - 1;
			if (claim->ended_level >= level)
				claim->ended_level = level - 1;
			if (claim->ended_level == claim->nest_level)
			{
				xact_claims = foreach_delete_current(xact_claims, lc);
				xact_claim_free(claim);
			}
		}
	}
}

/*
 * XactClaimFind
 *		The current transaction's open claim of (owner, scope, key), or NULL.
 */
XactClaim  *
XactClaimFind(Datum owner, Datum scope, Datum key)
{
	ListCell   *lc;

	foreach(lc, xact_claims)
	{
		XactClaim  *claim = lfirst(lc);

		if (claim->ended_level == 0 &&
			xact_text_equal(claim->row.values[RC_key], key) &&
			xact_text_equal(claim->row.values[RC_scope], scope) &&
			xact_text_equal(claim->row.values[RC_owner], owner))
			return claim;
	}
	return NULL;
}

/*
 * XactClaimAdd
 *		Remember a claim this transaction took, a copy of its image: until
 *		its finish writes it, if it is deferred.
 */
XactClaim  *
XactClaimAdd(const RegistryRow *row, bool deferred)
{
	MemoryContext oldcontext;
	XactClaim  *claim;

	if (!xact_callbacks_registered)
	{
		RegisterXactCallback(xact_claims_xact_callback, NULL);
		RegisterSubXactCallback(xact_claims_subxact_callback, NULL);
		xact_callbacks_registered = true;
	}

	oldcontext = MemoryContextSwitchTo(TopTransactionContext);
	claim = palloc0(sizeof(XactClaim));
	claim->row = *row;
	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
		if (!row->nulls[i] && RegistryColumnVarlena(i))
			claim->row.values[i] = PointerGetDatum(PG_DETOAST_DATUM_COPY(row->values[i]));
	claim->deferred = deferred;
	claim->nest_level = GetCurrentTransactionNestLevel();
	xact_claims = lappend(xact_claims, claim);
	MemoryContextSwitchTo(oldcontext);
	return claim;
}

/*
 * XactClaimEnd
 *		The claim was finished or abandoned: it is this transaction's no
 *		longer (and no longer holds the commit, if deferred).
 *		Ended in the subtransaction that took it, it is gone (a rollback
 *		there undoes the claim too); ended deeper, it stays, marked, until
 *		that subtransaction's fate is known.
 */
void
XactClaimEnd(XactClaim *claim)
{
	int			level = GetCurrentTransactionNestLevel();

	if (level <= claim->nest_level)
	{
		xact_claims = list_delete_ptr(xact_claims, claim);
		xact_claim_free(claim);
	}
	else
		claim->ended_level = level;
}
