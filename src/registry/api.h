/*-------------------------------------------------------------------------
 *
 * api.h
 *	  What the registry's API functions share (begin.c, finish.c,
 *	  lookup.c): the request's fingerprint, their result rows, and the
 *	  finish that idempotent_call runs.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/api.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_REGISTRY_API_H
#define IDEMPOTENCY_REGISTRY_API_H

#include "fmgr.h"
#include "utils/jsonb.h"

#include "registry/registry.h"

/*
 * ApiResult
 *		A function's result row: its descriptor, built and blessed once per
 *		backend, which columns are the registry's, and where its own column
 *		is.  fn_extra would not keep it: PL/pgSQL evaluates a call such as
 *		"b := idempotency.idempotent_begin(...)" with a new FmgrInfo in every
 *		transaction, and building the descriptor showed in profiles of the
 *		replay path.
 */
typedef struct ApiResult
{
	Oid			fn;
	RegistryOutput *out;
	int			own;			/* the function's own column: outcome, found */
	int			previous_attempt;	/* begin's other own columns, or -1 */
	int			previous_end;
	int			retry_after;
} ApiResult;

/* result.c */
extern ApiResult *RegistryApiResult(FunctionCallInfo fcinfo, ApiResult *cache, const char *own);
extern int	RegistryApiColumn(TupleDesc desc, const char *name);
extern int	RegistryApiColumnFind(TupleDesc desc, const char *name);

/* finish.c */
extern void RegistryApiFinish(Datum key, Datum scope, Jsonb *response);

/* fingerprint.c */
extern Datum RegistryFingerprint(Jsonb *request);
extern bool RegistryByteaEqual(Datum a, Datum b);

#endif							/* IDEMPOTENCY_REGISTRY_API_H */
