/*-------------------------------------------------------------------------
 *
 * args.c
 *	  Argument checks that the SQL-callable functions share: required
 *	  arguments, keys, scopes and positive intervals.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/key/args.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "key/args.h"
#include "key/key.h"

/*
 * IdempotencyRequireArg
 *		Reject a NULL argument that the function cannot do without.
 */
void
IdempotencyRequireArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

/*
 * IdempotencyKeyArg
 *		A key argument, checked: the functions take text (so that a text or
 *		varchar value needs no cast) and apply the key type's own rules.
 */
Datum
IdempotencyKeyArg(FunctionCallInfo fcinfo, int argno)
{
	text	   *t;

	IdempotencyRequireArg(fcinfo, argno, "idempotency key");
	t = PG_GETARG_TEXT_PP(argno);
	return PointerGetDatum(IdempotencyKeyFromBytes(VARDATA_ANY(t),
												   VARSIZE_ANY_EXHDR(t)));
}

/*
 * IdempotencyScopeArg
 *		A scope argument, checked.  The empty string is the default scope.
 */
Datum
IdempotencyScopeArg(FunctionCallInfo fcinfo, int argno)
{
	text	   *scope;

	IdempotencyRequireArg(fcinfo, argno, "scope");
	scope = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(scope) > IDEMPOTENCY_SCOPE_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scope must be at most %d bytes long",
						IDEMPOTENCY_SCOPE_MAXLEN)));
	return PointerGetDatum(scope);
}

/*
 * IdempotencyAddPositive
 *		now + interval, which must lie after now (ttl, lease).  An interval
 *		too long to add (which timestamptz would refuse with 22008, naming no
 *		argument) is refused first, compared as intervals compare (a month of
 *		30 days): longer than IDEMPOTENCY_INTERVAL_MAX_YEARS, or shorter than
 *		minus a thousand years, which no clock of this era can overflow.
 */
#define IDEMPOTENCY_INTERVAL_MAX_YEARS 100000

TimestampTz
IdempotencyAddPositive(TimestampTz now, Datum interval, const char *name)
{
	Interval	longest = {.month = IDEMPOTENCY_INTERVAL_MAX_YEARS * MONTHS_PER_YEAR};
	Interval	earliest = {.month = -1000 * MONTHS_PER_YEAR};
	TimestampTz result;

	if (DatumGetBool(DirectFunctionCall2(interval_gt, interval, IntervalPGetDatum(&longest))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is out of range", name),
				 errdetail("It may be at most %d years.", IDEMPOTENCY_INTERVAL_MAX_YEARS)));
	if (DatumGetBool(DirectFunctionCall2(interval_lt, interval, IntervalPGetDatum(&earliest))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a positive interval", name)));
	result = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													 TimestampTzGetDatum(now),
													 interval));
	if (result <= now)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a positive interval", name)));
	return result;
}

/*
 * IdempotencyTextArg
 *		A required text argument of 1 to IDEMPOTENCY_KEY_MAXLEN bytes (a
 *		consumer, a message id, a topic).
 */
Datum
IdempotencyTextArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	text	   *t;

	IdempotencyRequireArg(fcinfo, argno, name);
	t = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(t) == 0 || VARSIZE_ANY_EXHDR(t) > IDEMPOTENCY_KEY_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be 1 to %d bytes long", name, IDEMPOTENCY_KEY_MAXLEN)));
	return PointerGetDatum(t);
}
