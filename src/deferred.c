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
 * subtransaction that commits passes to the parent.
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
#include "utils/memutils.h"

#include "deferred.h"
#include "idempotency.h"

/* The open deferred claims of the current transaction, in TopTransactionContext. */
static List *deferred_claims = NIL;
static bool deferred_callbacks_registered = false;

/*
 * deferred_text_equal
 *		Bytewise equality of two text datums.
 */
static bool
deferred_text_equal(text *a, Datum b)
{
	text	   *t = DatumGetTextPP(b);

	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(t) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(t), VARSIZE_ANY_EXHDR(a)) == 0;
}

/*
 * deferred_xact_callback
 *		Refuse to commit (or prepare) a transaction with an open deferred
 *		claim; forget the list when the transaction ends either way.
 */
static void
deferred_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			if (deferred_claims != NIL)
			{
				DeferredClaim *claim = linitial(deferred_claims);

				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
						 errmsg("idempotency key \"%s\" in scope \"%s\" was claimed with defer_claim but not finished",
								text_to_cstring(claim->key),
								text_to_cstring(claim->scope)),
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
 *		A subtransaction's claims go with its abort and pass to its parent
 *		with its commit.
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
				deferred_claims = foreach_delete_current(deferred_claims, lc);
		}
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, deferred_claims)
		{
			DeferredClaim *claim = lfirst(lc);

			if (claim->nest_level >= level)
				claim->nest_level = level - 1;
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

		if (deferred_text_equal(claim->key, key) &&
			deferred_text_equal(claim->scope, scope) &&
			deferred_text_equal(claim->owner, owner))
			return claim;
	}
	return NULL;
}

/*
 * DeferredClaimAdd
 *		Remember a deferred claim until the transaction's finish writes it.
 */
DeferredClaim *
DeferredClaimAdd(Datum owner, Datum scope, Datum key, Datum fingerprint)
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
	claim->owner = DatumGetTextPCopy(owner);
	claim->scope = DatumGetTextPCopy(scope);
	claim->key = DatumGetTextPCopy(key);
	claim->fingerprint = fingerprint == (Datum) 0 ? NULL : DatumGetByteaPCopy(fingerprint);
	claim->nest_level = GetCurrentTransactionNestLevel();
	deferred_claims = lappend(deferred_claims, claim);
	MemoryContextSwitchTo(oldcontext);
	return claim;
}

/*
 * DeferredClaimForget
 *		The claim was written (or abandoned): it no longer holds the commit.
 */
void
DeferredClaimForget(DeferredClaim *claim)
{
	deferred_claims = list_delete_ptr(deferred_claims, claim);
}
