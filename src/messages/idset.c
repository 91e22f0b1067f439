/*-------------------------------------------------------------------------
 *
 * idset.c
 *	  A batch of text ids (message ids), sorted and each once, and which of
 *	  them a statement returned: what inbox_receive_batch and outbox_ack
 *	  share.
 *
 * A batch is written in this order, so that two batches sharing ids lock
 * them in the same order and cannot deadlock, and with no repeats.  Sorting
 * here costs far less than a Sort node.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/messages/idset.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"

#include "base/compat.h"
#include "frame/sqlcall.h"
#include "key/args.h"
#include "messages/idset.h"

/*
 * IdSetArg
 *		A function's array-of-ids argument: required, one-dimensional, at
 *		most max ids, none of them NULL.  Returns how many, in *ids.
 */
int
IdSetArg(FunctionCallInfo fcinfo, int argno, const char *fn, int max, Datum **ids)
{
	ArrayType  *array;
	bool	   *nulls;
	int			n;

	IdempotencyRequireArg(fcinfo, argno, "message_ids");
	array = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("message_ids must be a one-dimensional array")));
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, ids, &nulls, &n);
	if (n > max)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a batch of %d message ids is too large", n),
				 errdetail("%s takes at most %d ids at once.", fn, max)));
	for (int i = 0; i < n; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("message_ids must not contain nulls")));
	return n;
}

/*
 * IdSetCompare
 *		Bytewise order of two text datums, the order COLLATE "C" gives them
 *		(a qsort and bsearch comparator).
 */
int
IdSetCompare(const void *a, const void *b)
{
	Pointer		x = DatumGetPointer(*(const Datum *) a);
	Pointer		y = DatumGetPointer(*(const Datum *) b);
	int			xlen = VARSIZE_ANY_EXHDR(x);
	int			ylen = VARSIZE_ANY_EXHDR(y);
	int			c = memcmp(VARDATA_ANY(x), VARDATA_ANY(y), Min(xlen, ylen));

	return c != 0 ? c : (xlen > ylen) - (xlen < ylen);
}

/*
 * IdSetSortedUnique
 *		The ids sorted and each once; returns how many.
 */
int
IdSetSortedUnique(Datum *ids, int n, Datum **sorted)
{
	Datum	   *s = palloc(sizeof(Datum) * Max(n, 1));
	int			m = 0;

	memcpy(s, ids, sizeof(Datum) * n);
	qsort(s, n, sizeof(Datum), IdSetCompare);
	for (int i = 0; i < n; i++)
		if (m == 0 || IdSetCompare(&s[m - 1], &s[i]) != 0)
			s[m++] = s[i];
	*sorted = s;
	return m;
}

/*
 * IdSetMark
 *		Mark the ids the last statement returned (its first column) at their
 *		places among the sorted ids; returns how many it marked that were not
 *		marked before.
 */
int
IdSetMark(Datum *sorted, int m, bool *marked, uint64 nrows)
{
	int			count = 0;

	for (uint64 i = 0; i < nrows; i++)
	{
		bool		isnull;
		Datum		id = SqlResult(i, 1, &isnull);
		Datum	   *hit = bsearch(&id, sorted, m, sizeof(Datum), IdSetCompare);

		if (hit != NULL && !marked[hit - sorted])
		{
			marked[hit - sorted] = true;
			count++;
		}
	}
	return count;
}
