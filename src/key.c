/*-------------------------------------------------------------------------
 *
 * key.c
 *	  The idempotency.key base type: input/output, binary send/receive
 *	  and the cast from text (comparison and hashing are in keycmp.c).
 *
 * A key is 1 to 255 bytes of printable characters in the database encoding,
 * with no leading or trailing space.  It is stored like text (a varlena),
 * but it is not collatable: comparison is bytewise (keycmp.c).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/key.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "idempotency.h"

/* How many bytes of an offending value an error message shows. */
#define KEY_DISPLAY_MAXLEN	64

/*
 * IdempotencyDisplayValue
 *		Render a (possibly invalid) value for an error message.
 *
 * Control characters and backslashes are shown as \xNN, so that a message
 * never carries control characters to the client; so is every byte above
 * 0x7f when the value is not valid in the database encoding.  Long values
 * are cut on a character boundary and end in "...".
 */
char *
IdempotencyDisplayValue(const char *str, int len)
{
	StringInfoData buf;
	bool		valid = pg_verifymbstr(str, len, true);
	int			shown = len;

	if (len > KEY_DISPLAY_MAXLEN)
		shown = valid ? pg_mbcliplen(str, len, KEY_DISPLAY_MAXLEN) : KEY_DISPLAY_MAXLEN;

	initStringInfo(&buf);
	for (int i = 0; i < shown; i++)
	{
		unsigned char c = (unsigned char) str[i];

		if (c < 0x20 || c == 0x7f || c == '\\' || (c > 0x7f && !valid))
			appendStringInfo(&buf, "\\x%02x", c);
		else
			appendStringInfoChar(&buf, (char) c);
	}
	if (shown < len)
		appendStringInfoString(&buf, "...");
	return buf.data;
}

/*
 * key_reject
 *		Report invalid input for the key type, with the reason as detail.
 */
static void
key_reject(const char *str, int len, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type idempotency.key: \"%s\"",
					IdempotencyDisplayValue(str, len)),
			 errdetail_internal("%s", detail)));
}

/*
 * key_validate
 *		Check every rule a key must follow; error out on the first broken one.
 *
 * Every way in (text input, binary receive, casts, make_key) goes through
 * here, so the rules cannot differ between them.
 */
static void
key_validate(const char *str, int len)
{
	if (len == 0)
		key_reject(str, len, _("An idempotency key must not be empty."));
	if (len > IDEMPOTENCY_KEY_MAXLEN)
		key_reject(str, len, psprintf(_("An idempotency key must be at most %d bytes long, but this one is %d bytes long."),
									  IDEMPOTENCY_KEY_MAXLEN, len));
	for (int i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) str[i];

		if (c < 0x20 || c == 0x7f)
			key_reject(str, len, _("An idempotency key must not contain control characters."));
	}
	/* C1 controls (U+0080 to U+009F) are control characters too */
	if (GetDatabaseEncoding() == PG_UTF8)
	{
		for (int i = 0; i + 1 < len; i++)
		{
			if ((unsigned char) str[i] == 0xc2 &&
				(unsigned char) str[i + 1] >= 0x80 &&
				(unsigned char) str[i + 1] <= 0x9f)
				key_reject(str, len, _("An idempotency key must not contain control characters."));
		}
	}
	if (str[0] == ' ' || str[len - 1] == ' ')
		key_reject(str, len, _("An idempotency key must not begin or end with white space."));
	if (!pg_verifymbstr(str, len, true))
		key_reject(str, len, psprintf(_("The value is not valid in encoding \"%s\"."),
									  GetDatabaseEncodingName()));
}

/*
 * IdempotencyKeyFromBytes
 *		Validate a byte string and return it as a key datum.
 */
text *
IdempotencyKeyFromBytes(const char *str, int len)
{
	key_validate(str, len);
	return cstring_to_text_with_len(str, len);
}

PG_FUNCTION_INFO_V1(key_in);
Datum
key_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);

	PG_RETURN_TEXT_P(IdempotencyKeyFromBytes(str, strlen(str)));
}

PG_FUNCTION_INFO_V1(key_out);
Datum
key_out(PG_FUNCTION_ARGS)
{
	text	   *key = PG_GETARG_TEXT_PP(0);

	PG_RETURN_CSTRING(text_to_cstring(key));
}

/*
 * key_recv
 *		Binary input: the key's text in the client encoding, checked exactly
 *		as key_in checks it.
 */
PG_FUNCTION_INFO_V1(key_recv);
Datum
key_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	char	   *str;
	int			nbytes;
	text	   *result;

	str = pq_getmsgtext(buf, buf->len - buf->cursor, &nbytes);
	result = IdempotencyKeyFromBytes(str, nbytes);
	pfree(str);
	PG_RETURN_TEXT_P(result);
}

PG_FUNCTION_INFO_V1(key_send);
Datum
key_send(PG_FUNCTION_ARGS)
{
	text	   *key = PG_GETARG_TEXT_PP(0);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendtext(&buf, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

/*
 * key_from_text
 *		The cast from text (and, binary-coercibly, from varchar).
 */
PG_FUNCTION_INFO_V1(key_from_text);
Datum
key_from_text(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);

	PG_RETURN_TEXT_P(IdempotencyKeyFromBytes(VARDATA_ANY(t),
											 VARSIZE_ANY_EXHDR(t)));
}

/*
 * key_to_text
 *		The cast to text.  A key is already a valid text, so this returns
 *		its argument; it exists because a cast WITHOUT FUNCTION makes
 *		"key::text" a relabelling that the planner matches to an index on
 *		the key column, and PostgreSQL 18 then fails to plan LIKE or
 *		starts_with() on it ("cache lookup failed for collation 0"): the
 *		key type has no collation.
 */
PG_FUNCTION_INFO_V1(key_to_text);
Datum
key_to_text(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}
