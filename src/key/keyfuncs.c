/*-------------------------------------------------------------------------
 *
 * keyfuncs.c
 *	  Structured keys: make_key() and parse_key().
 *
 * A structured key is prefix:business_id:operation:version:checksum, where
 * checksum is the first 8 hex digits of SHA-256 over the first four parts
 * joined by ':'.  The checksum makes a hand-edited key detectable.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/key/keyfuncs.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "base/compat.h"
#include "base/sha256.h"
#include "key/args.h"
#include "key/key.h"
#include "objects/extension.h"

/* Number of hex digits of SHA-256 kept as a structured key's checksum. */
#define KEY_CHECKSUM_HEXLEN 8

/* Parts of a structured key before the checksum. */
#define KEY_NPARTS 4

/*
 * keyfuncs_checksum
 *		The first KEY_CHECKSUM_HEXLEN hex digits of SHA-256(raw), in out
 *		(which must hold KEY_CHECKSUM_HEXLEN + 1 bytes).
 */
static void
keyfuncs_checksum(const char *raw, size_t len, char *out)
{
	uint8		digest[IDEMPOTENCY_SHA256_LEN];

	IdempotencySha256(raw, len, digest);
	hex_encode((const char *) digest, KEY_CHECKSUM_HEXLEN / 2, out);
	out[KEY_CHECKSUM_HEXLEN] = '\0';
}

PG_FUNCTION_INFO_V1(idempotency_make_key);

/*
 * idempotency_make_key
 *		make_key(prefix, business_id, operation, version): a
 *		structured key.  Every part must be non-empty and free of ':', so that
 *		parse_key() can always split the result back into the same parts.
 */
Datum
idempotency_make_key(PG_FUNCTION_ARGS)
{
	static const char *const part_names[KEY_NPARTS] =
	{"prefix", "business_id", "operation", "version"};
	StringInfoData raw;
	char		checksum[KEY_CHECKSUM_HEXLEN + 1];

	IdempotencyCheckNargs(fcinfo, KEY_NPARTS);
	initStringInfo(&raw);
	for (int i = 0; i < KEY_NPARTS; i++)
	{
		text	   *part = PG_GETARG_TEXT_PP(i);
		int			len = VARSIZE_ANY_EXHDR(part);
		const char *data = VARDATA_ANY(part);

		if (len == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s of an idempotency key must not be empty",
							part_names[i])));
		if (memchr(data, ':', len) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s of an idempotency key must not contain \":\": \"%s\"",
							part_names[i], IdempotencyDisplayValue(data, len)),
					 errhint("The parts of a structured key are separated by \":\".")));
		if (i > 0)
			appendStringInfoChar(&raw, ':');
		appendBinaryStringInfo(&raw, data, len);
	}

	keyfuncs_checksum(raw.data, raw.len, checksum);
	appendStringInfoChar(&raw, ':');
	appendStringInfoString(&raw, checksum);

	PG_RETURN_TEXT_P(IdempotencyKeyFromBytes(raw.data, raw.len));
}

PG_FUNCTION_INFO_V1(idempotency_parse_key);

/*
 * idempotency_parse_key
 *		parse_key(key): the four parts, the checksum, and whether the
 *		checksum matches.  The key is text, checked as every function's key
 *		argument is (IdempotencyKeyArg).  A key that does not have the structured shape (five
 *		non-empty parts, the last of them 8 hex digits) is opaque: no row.
 */
Datum
idempotency_parse_key(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *key;
	const char *data;
	int			len;
	int			starts[KEY_NPARTS + 1];
	int			ends[KEY_NPARTS + 1];
	int			nparts = 0;
	int			start = 0;
	Datum		values[KEY_NPARTS + 2];
	bool		nulls[KEY_NPARTS + 2] = {0};
	char		expected[KEY_CHECKSUM_HEXLEN + 1];
	const char *checksum;

	IdempotencyCheckNargs(fcinfo, 1);
	key = DatumGetTextPP(IdempotencyKeyArg(fcinfo, 0));
	data = VARDATA_ANY(key);
	len = VARSIZE_ANY_EXHDR(key);
	InitMaterializedSRF(fcinfo, 0);

	for (int i = 0; i <= len; i++)
	{
		if (i < len && data[i] != ':')
			continue;
		if (nparts == KEY_NPARTS + 1 || i == start)
			PG_RETURN_NULL();	/* too many parts, or an empty one: opaque */
		starts[nparts] = start;
		ends[nparts] = i;
		nparts++;
		start = i + 1;
	}
	if (nparts != KEY_NPARTS + 1)
		PG_RETURN_NULL();

	checksum = data + starts[KEY_NPARTS];
	if (ends[KEY_NPARTS] - starts[KEY_NPARTS] != KEY_CHECKSUM_HEXLEN)
		PG_RETURN_NULL();
	for (int i = 0; i < KEY_CHECKSUM_HEXLEN; i++)
		if (!isxdigit((unsigned char) checksum[i]))
			PG_RETURN_NULL();

	for (int i = 0; i <= KEY_NPARTS; i++)
		values[i] = PointerGetDatum(cstring_to_text_with_len(data + starts[i],
															 ends[i] - starts[i]));

	/* the checksum covers everything before its own ':' */
	keyfuncs_checksum(data, starts[KEY_NPARTS] - 1, expected);
	values[KEY_NPARTS + 1] =
		BoolGetDatum(memcmp(expected, checksum, KEY_CHECKSUM_HEXLEN) == 0);

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	PG_RETURN_NULL();
}
