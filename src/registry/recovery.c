/*-------------------------------------------------------------------------
 *
 * recovery.c
 *	  Work that spans several external calls: recovery points, lease
 *	  renewal, and the completer's batch of stalled claims.
 *
 * A claim is all or nothing until its finish.  A handler that makes several
 * external calls (create a customer at a provider, charge it, send a
 * receipt) and dies after the second leaves a claim whose new owner cannot
 * tell which calls happened.  Three calls, all on the claim's record:
 *
 * - idempotent_checkpoint records the step a claim has reached and a small
 *	 state, in the caller's transaction, so that it commits or rolls back
 *	 with the step's local writes.  A take-over (a begin after the lease ran
 *	 out, or the completer's batch) keeps them and returns them, and the new
 *	 attempt resumes after that step; any new claim of the record (after it
 *	 expired or was abandoned) resets them, as it resets the answer.
 * - idempotent_renew extends a running claim's lease, so that a long
 *	 external call is not taken over while its worker is alive.
 * - claim_stalled takes over a batch of the caller's claims whose lease ran
 *	 out and that no client retried, for a background completer: each gets
 *	 a new attempt, as a take-over gives, with its recovery point and state.
 *	 It passes over the claims its own transaction must finish (taken
 *	 without external, or deferred): taken over, they would become external
 *	 and let the transaction commit its work with the claim unfinished.
 *
 * The first two are fenced exactly as finish is: inside the transaction
 * that took the claim its attempt is implied; later, the attempt must be
 * named (IK006 otherwise), and an attempt that was taken over is refused
 * (IK004).  A claim taken with defer_claim is written whole by its finish
 * and has no steps: both refuse it.
 *
 * These need the 1.1 SQL objects (the registry's recovery columns); each
 * entry point asks for them first.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/recovery.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "base/stats.h"
#include "distributed/delegate.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "key/args.h"
#include "key/key.h"
#include "objects/citus_metadata.h"
#include "objects/extension.h"
#include "registry/registry.h"
#include "registry/xactclaims.h"

/* A completer's lease when it names none, as a begin's. */
#define STALLED_DEFAULT_LEASE_USECS (5 * 60 * USECS_PER_SEC)

/* The most claims one claim_stalled call takes. */
#define STALLED_MAX_BATCH 10000

/*
 * recovery_attempt_arg
 *		The optional attempt argument.
 */
static RegistryAttempt
recovery_attempt_arg(FunctionCallInfo fcinfo, int argno)
{
	RegistryAttempt attempt = {!PG_ARGISNULL(argno), 0};

	if (attempt.given)
		attempt.value = PG_GETARG_INT32(argno);
	return attempt;
}

/*
 * recovery_own_claim
 *		The attempt a call on (scope, key) is fenced by: this transaction's
 *		claim's, if it holds one (and the named one must be that), else the
 *		named one.  A claim held in memory is written first; a deferred one
 *		has nothing written to record on.
 */
static RegistryAttempt
recovery_own_claim(SqlCall *call, Datum scope, Datum key, RegistryAttempt attempt,
				   const char *what)
{
	XactClaim  *mine = XactClaimFind(call->owner, scope, key);

	if (mine == NULL)
		return attempt;
	RegistryOwnAttempt(mine, attempt);
	RegistryOwnWrite(call, mine, what);
	attempt.given = true;
	attempt.value = DatumGetInt32(mine->row.values[RC_attempt]);
	return attempt;
}

PG_FUNCTION_INFO_V1(idempotency_idempotent_checkpoint);

/*
 * idempotency_idempotent_checkpoint
 *		idempotent_checkpoint(key, recovery_point, recovery_state, scope,
 *		attempt): record the step the caller's claim has reached.  Returns
 *		the recovery point, so that PL/pgSQL can call it in an assignment
 *		(see idempotent_finish).
 */
Datum
idempotency_idempotent_checkpoint(PG_FUNCTION_ARGS)
{
	Datum		key;
	Datum		point;
	Datum		state = (Datum) 0;
	Datum		scope;
	RegistryAttempt attempt;
	SqlCall		call;
	Datum		delegated;

	IdempotencyCheckNargs(fcinfo, 5);
	IdempotencyRequireSqlVersion(IDEMPOTENCY_SQL_1_1, "recording a recovery point");
	IdempotencyCitusRequireSetup(IDEMPOTENCY_SQL_1_1, "recording a recovery point");
	key = IdempotencyKeyArg(fcinfo, 0);
	point = IdempotencyTextArg(fcinfo, 1, "recovery_point");
	if (!PG_ARGISNULL(2))
	{
		Jsonb	   *js = PG_GETARG_JSONB_P(2);

		if (VARSIZE(js) > (Size) idempotency_max_response_size * 1024)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("recovery state for idempotency key \"%s\" is too large to store",
							IdempotencyKeyDisplay(key)),
					 errdetail("It takes %zu bytes; \"idempotency.max_response_size\" allows %d kB.",
							   (Size) VARSIZE(js), idempotency_max_response_size)));
		state = JsonbPGetDatum(js);
	}
	scope = IdempotencyScopeArg(fcinfo, 3);
	attempt = recovery_attempt_arg(fcinfo, 4);
	if (IdempotencyCitusDelegate(fcinfo, CITUS_DELEGATE_CHECKPOINT, &delegated))
		return delegated;

	SqlCallBegin(&call);
	attempt = recovery_own_claim(&call, scope, key, attempt, "record a recovery point of");
	if (!attempt.given ||
		!RegistryCheckpoint(&call, scope, key, point, state, attempt))
		RegistryExplainMiss(&call, scope, key, attempt, "recording a recovery point of");
	SqlCallEnd(&call);
	PG_RETURN_DATUM(point);
}

PG_FUNCTION_INFO_V1(idempotency_idempotent_renew);

/*
 * idempotency_idempotent_renew
 *		idempotent_renew(key, lease, scope, attempt): the caller's claim's
 *		lease ends lease from now (no later than the record's expiry).
 *		Returns the new lease_until.
 */
Datum
idempotency_idempotent_renew(PG_FUNCTION_ARGS)
{
	Datum		key;
	Datum		scope;
	RegistryAttempt attempt;
	TimestampTz lease_until;
	TimestampTz granted = 0;
	SqlCall		call;
	Datum		delegated;

	IdempotencyCheckNargs(fcinfo, 4);
	IdempotencyRequireSqlVersion(IDEMPOTENCY_SQL_1_1, "renewing a lease");
	IdempotencyCitusRequireSetup(IDEMPOTENCY_SQL_1_1, "renewing a lease");
	key = IdempotencyKeyArg(fcinfo, 0);
	IdempotencyRequireArg(fcinfo, 1, "lease");
	scope = IdempotencyScopeArg(fcinfo, 2);
	attempt = recovery_attempt_arg(fcinfo, 3);
	if (IdempotencyCitusDelegate(fcinfo, CITUS_DELEGATE_RENEW, &delegated))
		return delegated;

	SqlCallBegin(&call);
	lease_until = IdempotencyAddPositive(call.now, PG_GETARG_DATUM(1), "lease");
	attempt = recovery_own_claim(&call, scope, key, attempt, "renew the lease of");
	if (!attempt.given ||
		!RegistryRenew(&call, scope, key, lease_until, attempt, &granted))
		RegistryExplainMiss(&call, scope, key, attempt, "renewing the lease of");
	SqlCallEnd(&call);
	PG_RETURN_TIMESTAMPTZ(granted);
}

PG_FUNCTION_INFO_V1(idempotency_claim_stalled);

/*
 * idempotency_claim_stalled
 *		claim_stalled(scope, batch_size, lease): take over up to batch_size
 *		of the caller's stalled claims (in scope, or in every scope if it is
 *		NULL), one row each: the claim as a begin's take-over answers it,
 *		and the attempt taken over.  The claims are this transaction's, as a
 *		begin's are: finished or checkpointed in it, they need no attempt.
 *		Each counts as a take-over in the statistics.  A claim the
 *		transaction itself took without external (or with defer_claim) is
 *		passed over, whatever its lease: it is not stalled but in progress
 *		here, and must be finished before this transaction commits.
 */
Datum
idempotency_claim_stalled(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		scope = (Datum) 0;
	int32		limit;
	TimestampTz lease_until;
	RegistryOutput *out;
	int			previous_col = -1;
	SqlCall		call;
	uint64		n;

	IdempotencyCheckNargs(fcinfo, 3);
	IdempotencyRequireSqlVersion(IDEMPOTENCY_SQL_1_1, "taking over stalled claims");
	IdempotencyCitusRequireSetup(IDEMPOTENCY_SQL_1_1, "taking over stalled claims");
	if (!PG_ARGISNULL(0))
		scope = IdempotencyScopeArg(fcinfo, 0);
	IdempotencyRequireArg(fcinfo, 1, "batch_size");
	limit = PG_GETARG_INT32(1);
	if (limit < 1 || limit > STALLED_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must be between 1 and %d", STALLED_MAX_BATCH),
				 errdetail("It is %d.", limit)));
	if (IdempotencyCitusPartMethod(CITUS_REGISTRY) != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot take over stalled claims in a batch on a distributed registry"),
				 errdetail("Citus refuses FOR UPDATE SKIP LOCKED on a distributed table."),
				 errhint("Take stalled claims over with idempotent_begin, by key.")));

	InitMaterializedSRF(fcinfo, 0);
	out = RegistryOutputMap(rsinfo->setDesc);
	for (int i = 0; i < rsinfo->setDesc->natts; i++)
		if (strcmp(NameStr(TupleDescAttr(rsinfo->setDesc, i)->attname), "previous_attempt") == 0)
			previous_col = i;

	SqlCallBegin(&call);
	if (PG_ARGISNULL(2))
		lease_until = call.now + STALLED_DEFAULT_LEASE_USECS;
	else
		lease_until = IdempotencyAddPositive(call.now, PG_GETARG_DATUM(2), "lease");
	n = RegistryClaimStalled(&call, scope, limit, lease_until,
							 XactClaimsInDatabase(call.owner));
	for (uint64 i = 0; i < n; i++)
	{
		RegistryRow claim;
		int32		previous;
		Datum	   *values = palloc0(rsinfo->setDesc->natts * sizeof(Datum));
		bool	   *nulls = palloc(rsinfo->setDesc->natts * sizeof(bool));
		XactClaim  *held;

		memset(nulls, true, rsinfo->setDesc->natts * sizeof(bool));
		RegistryStalledRow(i, &claim, &previous);

		/*
		 * An external claim of this transaction's own whose lease ran out:
		 * the new attempt supersedes it (undone with it by a rollback).  The
		 * transaction's other claims were passed over: they must end in it.
		 */
		held = XactClaimFind(claim.values[RC_owner], claim.values[RC_scope],
							 claim.values[RC_key]);
		if (held != NULL)
		{
			Assert(held->kind == XACT_CLAIM_EXTERNAL);
			XactClaimEnd(held);
		}
		/* a claim for a completer of work outside the database */
		XactClaimAdd(&claim, XACT_CLAIM_EXTERNAL, true);
		RegistryOutputFill(out, &claim, values, nulls);
		if (previous_col >= 0)
		{
			values[previous_col] = Int32GetDatum(previous);
			nulls[previous_col] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SqlCallEnd(&call);
	IdempotencyCount(STAT_TAKEOVER, n);
	return (Datum) 0;
}
