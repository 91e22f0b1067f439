/*-------------------------------------------------------------------------
 *
 * fingerprint.c
 *	  A request's fingerprint: a hash of its canonical form, which
 *	  idempotent_begin stores and compares.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/fingerprint.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "base/sha256.h"
#include "base/stats.h"
#include "distributed/delegate.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "key/args.h"
#include "key/key.h"
#include "messages/tokens.h"
#include "objects/extension.h"
#include "registry/api.h"
#include "registry/http_headers.h"
#include "registry/registry.h"
#include "registry/xactclaims.h"



/* The fingerprint's version byte: a new canonical form gets a new one. */
#define FINGERPRINT_VERSION 2

/*
 * api_canonical_scalar
 *		Append one scalar of a request to its canonical form.
 */
static void
api_canonical_scalar(StringInfo buf, JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			appendStringInfoChar(buf, 'z');
			break;
		case jbvBool:
			appendStringInfoChar(buf, v->val.boolean ? 't' : 'f');
			break;
		case jbvString:
			appendStringInfoChar(buf, 's');
			escape_json(buf, pnstrdup(v->val.string.val, v->val.string.len));
			break;
		case jbvNumeric:
			/* 10, 10.0 and 1e1 are equal jsonb numbers: one text for all */
			appendStringInfoChar(buf, 'n');
			appendStringInfoString(buf, numeric_normalize(v->val.numeric));
			break;
		default:
			elog(ERROR, "unexpected jsonb scalar type %d", (int) v->type);
	}
}

/*
 * RegistryFingerprint
 *		The request's fingerprint: a version byte, then the SHA-256 of its
 *		canonical form.
 *
 * Two requests have the same fingerprint exactly when they are equal as
 * jsonb: jsonb already sorts object keys and keeps the last of duplicate
 * keys, and numbers are written in numeric_normalize's form (the one jsonb's
 * own hashing uses), without insignificant zeros or exponent.  Every token is
 * tagged, and strings are quoted, so no two different values give the same
 * text.
 */
Datum
RegistryFingerprint(Jsonb *request)
{
	JsonbIterator *it = JsonbIteratorInit(&request->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	StringInfoData buf;
	bytea	   *result = palloc(VARHDRSZ + 1 + IDEMPOTENCY_SHA256_LEN);

	initStringInfo(&buf);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		switch (tok)
		{
			case WJB_BEGIN_ARRAY:
				appendStringInfoChar(&buf, v.val.array.rawScalar ? '(' : '[');
				break;
			case WJB_END_ARRAY:
				appendStringInfoChar(&buf, ']');
				break;
			case WJB_BEGIN_OBJECT:
				appendStringInfoChar(&buf, '{');
				break;
			case WJB_END_OBJECT:
				appendStringInfoChar(&buf, '}');
				break;
			case WJB_KEY:
				appendStringInfoChar(&buf, 'k');
				escape_json(&buf, pnstrdup(v.val.string.val, v.val.string.len));
				break;
			case WJB_VALUE:
			case WJB_ELEM:
				api_canonical_scalar(&buf, &v);
				break;
			default:
				elog(ERROR, "unexpected jsonb iterator token %d", (int) tok);
		}
	}

	SET_VARSIZE(result, VARHDRSZ + 1 + IDEMPOTENCY_SHA256_LEN);
	((uint8 *) VARDATA(result))[0] = FINGERPRINT_VERSION;
	IdempotencySha256(buf.data, buf.len, (uint8 *) VARDATA(result) + 1);
	pfree(buf.data);
	return PointerGetDatum(result);
}

/*
 * RegistryByteaEqual
 *		Content equality of two bytea datums, whatever their header forms:
 *		whether a stored fingerprint is that of a request.
 */
bool
RegistryByteaEqual(Datum a, Datum b)
{
	bytea	   *x = DatumGetByteaPP(a);
	bytea	   *y = DatumGetByteaPP(b);

	return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
		memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}
