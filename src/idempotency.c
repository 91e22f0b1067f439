/*-------------------------------------------------------------------------
 *
 * idempotency.c
 *	  Module entry point: PG_MODULE_MAGIC, _PG_init and the GUCs.
 *
 * The library works both preloaded (shared_preload_libraries) and loaded on
 * first use.  Nothing in this file needs shared memory, so _PG_init returns
 * quietly when it is not preloaded; features that need shared memory check
 * for it themselves.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/idempotency.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "compat.h"
#include "idempotency.h"

PG_MODULE_MAGIC;

/* Largest response, in kilobytes, that idempotent_finish stores. */
int			idempotency_max_response_size = 1024;

void		_PG_init(void);

/*
 * _PG_init
 *		Define the GUCs.
 */
void
_PG_init(void)
{
	DefineCustomIntVariable("idempotency.max_response_size",
							"Sets the largest response that idempotent_finish stores.",
							"A larger response is rejected, so that a runaway "
							"result cannot bloat the registry.",
							&idempotency_max_response_size,
							1024,
							1,
							MAX_KILOBYTES,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	IdempotencyReserveGUCPrefix("idempotency");
}
