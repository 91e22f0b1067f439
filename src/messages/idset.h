/*-------------------------------------------------------------------------
 *
 * idset.h
 *	  A batch of text ids, sorted and each once.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/messages/idset.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_IDSET_H
#define IDEMPOTENCY_IDSET_H

#include "fmgr.h"

extern int	IdSetArg(FunctionCallInfo fcinfo, int argno, const char *fn, int max,
					 Datum **ids);
extern int	IdSetCompare(const void *a, const void *b);
extern int	IdSetSortedUnique(Datum *ids, int n, Datum **sorted);
extern int	IdSetMark(Datum *sorted, int m, bool *marked, uint64 nrows);

#endif							/* IDEMPOTENCY_IDSET_H */
