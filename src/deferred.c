/*-------------------------------------------------------------------------
 *
 * deferred.c
 *	  Claims taken with idempotent_begin(..., defer_claim => true): the
 *	  transaction's list of them, and the check that none is left unfinished
 *	  at commit.
 *
 * A deferred claim writes nothing at begin: begin only reads, and the record
 * is written once, complete, by idempotent_finish in the same transaction
 * (registry_api.c).  Until then the claim lives only here, in the memory of
 * the transaction that took it.  So a transaction must not commit while one
 * is open: nothing would record that the work was done, and a retry would do
 * it again.  The pre-commit callback refuses such a commit with an error,
 * which aborts the transaction and everything it wrote.
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
 * finishes a million deferred claims holds none of them.
 *
 * Concurrency: none; the list is per backend and per transaction.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/deferred.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"

#include "deferred.h"
#include "idempotency.h"

/* The current transaction's deferred claims, in TopTransactionContext. */
static List *deferred_claims = NIL;
static bool deferred_callbacks_registered = false;

/*
 * deferred_text_equal
 *		Bytewise equality of two text datums.
 */
static bool
deferred_text_equal(Datum a, Datum b)
{
	text	   *s = DatumGetTextPP(a);
	text	   *t = DatumGetTextPP(b);

	return VARSIZE_ANY_EXHDR(s) == VARSIZE_ANY_EXHDR(t) &&
		memcmp(VARDATA_ANY(s), VARDATA_ANY(t), VARSIZE_ANY_EXHDR(s)) == 0;
}

/*
 * deferred_free
 *		Give back a claim's memory: its image's values and itself.
 */
static void
deferred_free(DeferredClaim *claim)
{
	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
		if (!claim->row.nulls[i] && RegistryColumnVarlena(i))
			pfree(DatumGetPointer(claim->row.values[i]));
	pfree(claim);
}

/*
 * deferred_xact_callback
 *		Refuse to commit (or prepare) a transaction with an open deferred
 *		claim; forget the list when the transaction ends either way (its
 *		memory goes with TopTransactionContext).
 */
static void
deferred_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			foreach(lc, deferred_claims)
			{
				DeferredClaim *claim = lfirst(lc);

				if (claim->ended_level != 0)
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
			deferred_claims = NIL;
			break;
	}
}

/*
 * deferred_subxact_callback
 *		A subtransaction's claims go with its abort, and the claims it ended
 *		are open again; with its commit both pass to its parent.
 */
static void
deferred_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (deferred_claims == NIL)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, deferred_claims)
		{
			DeferredClaim *claim = lfirst(lc);

			if (claim->nest_level >= level)
			{
				deferred_claims = foreach_delete_current(deferred_claims, lc);
				deferred_free(claim);
			}
			else if (claim->ended_level >= level)
				claim->ended_level = 0;
		}
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, deferred_claims)
		{
			DeferredClaim *claim = lfirst(lc);

			if (claim->nest_level >= level)
				claim->nest_level = level - 1;
			if (claim->ended_level >= level)
				claim->ended_level = level - 1;
			if (claim->ended_level == claim->nest_level)
			{
				deferred_claims = foreach_delete_current(deferred_claims, lc);
				deferred_free(claim);
			}
		}
	}
}

/*
 * DeferredClaimFind
 *		The current transaction's open deferred claim of (owner, scope, key),
 *		or NULL.
 */
DeferredClaim *
DeferredClaimFind(Datum owner, Datum scope, Datum key)
{
	ListCell   *lc;

	foreach(lc, deferred_claims)
	{
		DeferredClaim *claim = lfirst(lc);

		if (claim->ended_level == 0 &&
			deferred_text_equal(claim->row.values[RC_key], key) &&
			deferred_text_equal(claim->row.values[RC_scope], scope) &&
			deferred_text_equal(claim->row.values[RC_owner], owner))
			return claim;
	}
	return NULL;
}

/*
 * DeferredClaimAdd
 *		Remember a deferred claim, a copy of its image, until the
 *		transaction's finish writes it.
 */
DeferredClaim *
DeferredClaimAdd(const RegistryRow *row)
{
	MemoryContext oldcontext;
	DeferredClaim *claim;

	if (!deferred_callbacks_registered)
	{
		RegisterXactCallback(deferred_xact_callback, NULL);
		RegisterSubXactCallback(deferred_subxact_callback, NULL);
		deferred_callbacks_registered = true;
	}

	oldcontext = MemoryContextSwitchTo(TopTransactionContext);
	claim = palloc0(sizeof(DeferredClaim));
	claim->row = *row;
	for (int i = 0; i < REGISTRY_NCOLUMNS; i++)
		if (!row->nulls[i] && RegistryColumnVarlena(i))
			claim->row.values[i] = PointerGetDatum(PG_DETOAST_DATUM_COPY(row->values[i]));
	claim->nest_level = GetCurrentTransactionNestLevel();
	deferred_claims = lappend(deferred_claims, claim);
	MemoryContextSwitchTo(oldcontext);
	return claim;
}

/*
 * DeferredClaimEnd
 *		The claim was written (or abandoned): it no longer holds the commit.
 *		Ended in the subtransaction that took it, it is gone (a rollback
 *		there undoes the claim too); ended deeper, it stays, marked, until
 *		that subtransaction's fate is known.
 */
void
DeferredClaimEnd(DeferredClaim *claim)
{
	int			level = GetCurrentTransactionNestLevel();

	if (level <= claim->nest_level)
	{
		deferred_claims = list_delete_ptr(deferred_claims, claim);
		deferred_free(claim);
	}
	else
		claim->ended_level = level;
}
