/*-------------------------------------------------------------------------
 *
 * http_headers.h
 *	  The response headers idempotent_finish accepts.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/http_headers.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_HTTP_HEADERS_H
#define IDEMPOTENCY_HTTP_HEADERS_H

#include "utils/jsonb.h"

extern void IdempotencyHttpHeadersCheck(Jsonb *headers);

#endif							/* IDEMPOTENCY_HTTP_HEADERS_H */
