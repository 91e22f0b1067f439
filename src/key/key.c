/*-------------------------------------------------------------------------
 *
 * key.c
 *	  The idempotency.key base type: input/output, binary send/receive
 *	  and the cast from text (comparison and hashing are in keycmp.c).
 *
 * A key is 1 to 255 bytes of printable characters in the database encoding,
 * with no white space at either end; key_validate says exactly what printable
 * means in each encoding.  It is stored like text (a varlena), but it is not
 * collatable: comparison is bytewise (keycmp.c), so a glibc or ICU upgrade can
 * never change which keys are equal or reorder a unique index.  Hash support
 * 1 and 2 hash the bytes, so that equal keys hash equally on every platform;
 * that is what hash partitioning and a sharded table's distribution column
 * rely on.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/key/key.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "base/compat.h"
#include "base/idempotency.h"
#include "key/key.h"
#include "key/key_charsets.h"

/* How many bytes of an offending value an error message shows. */
#define KEY_DISPLAY_MAXLEN	64

/*
 * What a character is, for the rule that a key is printable.  Every
 * character that is not KEY_CHAR_PRINTABLE or KEY_CHAR_SPACE is refused
 * anywhere in a key; KEY_CHAR_SPACE only at either end.
 */
typedef enum KeyCharClass
{
	KEY_CHAR_PRINTABLE,
	KEY_CHAR_SPACE,				/* white space (Unicode Zs) */
	KEY_CHAR_CONTROL,			/* C0 and C1 controls and DEL (Cc) */
	KEY_CHAR_FORMAT,			/* format characters (Cf) */
	KEY_CHAR_SEPARATOR,			/* line and paragraph separators (Zl, Zp) */
	KEY_CHAR_NONCHARACTER,		/* U+FDD0-U+FDEF, U+xFFFE and U+xFFFF */
	KEY_CHAR_UNMAPPED			/* a byte that stands for no character */
} KeyCharClass;

/*
 * The format characters (General_Category Cf) of Unicode 15.1, as ranges.
 * The list is fixed: a key that was accepted once must be accepted again
 * when a dump is restored, so it never grows within a major version.
 */
static const pg_wchar key_format_ranges[][2] = {
	{0x00AD, 0x00AD}, {0x0600, 0x0605}, {0x061C, 0x061C}, {0x06DD, 0x06DD},
	{0x070F, 0x070F}, {0x0890, 0x0891}, {0x08E2, 0x08E2}, {0x180E, 0x180E},
	{0x200B, 0x200F}, {0x202A, 0x202E}, {0x2060, 0x2064}, {0x2066, 0x206F},
	{0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB}, {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
	{0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001},
	{0xE0020, 0xE007F}
};

/*
 * key_unicode_class
 *		The class of a Unicode code point.
 */
static KeyCharClass
key_unicode_class(pg_wchar c)
{
	int			lo = 0;
	int			hi = lengthof(key_format_ranges) - 1;

	if (c < 0x20 || (c >= 0x7F && c <= 0x9F))
		return KEY_CHAR_CONTROL;
	if (c < 0x7F)
		return c == 0x20 ? KEY_CHAR_SPACE : KEY_CHAR_PRINTABLE;
	if (c == 0x00A0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
		c == 0x202F || c == 0x205F || c == 0x3000)
		return KEY_CHAR_SPACE;
	if (c == 0x2028 || c == 0x2029)
		return KEY_CHAR_SEPARATOR;
	if ((c >= 0xFDD0 && c <= 0xFDEF) || (c & 0xFFFE) == 0xFFFE)
		return KEY_CHAR_NONCHARACTER;
	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (c < key_format_ranges[mid][0])
			hi = mid - 1;
		else if (c > key_format_ranges[mid][1])
			lo = mid + 1;
		else
			return KEY_CHAR_FORMAT;
	}
	return KEY_CHAR_PRINTABLE;
}

/*
 * key_char_class
 *		The class of the character at str (which holds len > 0 bytes, valid
 *		in the database encoding), and its length in *chlen.
 *
 * UTF8: the Unicode rule.  The single-byte encodings: the Unicode rule for
 * the character each byte stands for in PostgreSQL's conversion to UTF8
 * (key_charsets.h).  SQL_ASCII has no character set: the ASCII rule, and any
 * byte above 0x7F is accepted as it is.  The EUC encodings: the ASCII rule,
 * and the ideographic space (0xA1A1, U+3000) is white space; MULE_INTERNAL:
 * the ASCII rule.
 */
static KeyCharClass
key_char_class(int encoding, const char *str, int len, int *chlen)
{
	unsigned char c = (unsigned char) str[0];

	*chlen = 1;
	if (c < 0x80)
		return key_unicode_class(c);
	if (encoding == PG_UTF8)
	{
		*chlen = Min(pg_utf_mblen((const unsigned char *) str), len);
		return key_unicode_class(utf8_to_unicode((const unsigned char *) str));
	}
	if (pg_encoding_max_length(encoding) == 1)
	{
		const char *classes = key_charset_classes[encoding];

		switch (classes == NULL ? '.' : classes[c - 0x80])
		{
			case 'S':
				return KEY_CHAR_SPACE;
			case 'C':
				return KEY_CHAR_CONTROL;
			case 'F':
				return KEY_CHAR_FORMAT;
			case 'L':
				return KEY_CHAR_SEPARATOR;
			case 'N':
				return KEY_CHAR_NONCHARACTER;
			case 'U':
				return KEY_CHAR_UNMAPPED;
			default:
				return KEY_CHAR_PRINTABLE;
		}
	}
	*chlen = Min(pg_encoding_mblen(encoding, str), len);
	if (*chlen == 2 && c == 0xA1 && (unsigned char) str[1] == 0xA1 &&
		(encoding == PG_EUC_JP || encoding == PG_EUC_CN || encoding == PG_EUC_KR ||
		 encoding == PG_EUC_TW || encoding == PG_EUC_JIS_2004))
		return KEY_CHAR_SPACE;
	return KEY_CHAR_PRINTABLE;
}

/*
 * key_char_name
 *		A character for a message: U+XXXX when its code point is known (in
 *		UTF8, and ASCII everywhere), else its bytes in the database encoding.
 */
static char *
key_char_name(int encoding, const char *str, int chlen)
{
	StringInfoData buf;

	if ((unsigned char) str[0] < 0x80)
		return psprintf("U+%04X", (unsigned char) str[0]);
	if (encoding == PG_UTF8)
		return psprintf("U+%04X", utf8_to_unicode((const unsigned char *) str));
	if (encoding == PG_EUC_JP || encoding == PG_EUC_CN || encoding == PG_EUC_KR ||
		encoding == PG_EUC_TW || encoding == PG_EUC_JIS_2004)
	{
		if (chlen == 2 && (unsigned char) str[0] == 0xA1 && (unsigned char) str[1] == 0xA1)
			return pstrdup("U+3000");
	}
	initStringInfo(&buf);
	appendStringInfoString(&buf, chlen == 1 ? "byte 0x" : "bytes 0x");
	for (int i = 0; i < chlen; i++)
		appendStringInfo(&buf, "%02X", (unsigned char) str[i]);
	return buf.data;
}

/*
 * IdempotencyDisplayValue
 *		Render a (possibly invalid) value for an error message.
 *
 * Characters that a key may not contain (controls, format characters,
 * separators, ...) and backslashes are shown as \xNN, byte by byte, so that
 * a message never carries control characters or bidirectional overrides to
 * the client; so is every byte above 0x7f when the value is not valid in the
 * database encoding.  Long values are cut on a character boundary and end
 * in "...".
 */
char *
IdempotencyDisplayValue(const char *str, int len)
{
	StringInfoData buf;
	int			encoding = GetDatabaseEncoding();
	bool		valid = pg_verifymbstr(str, len, true);
	int			shown = len;
	int			chlen;

	if (len > KEY_DISPLAY_MAXLEN)
		shown = valid ? pg_mbcliplen(str, len, KEY_DISPLAY_MAXLEN) : KEY_DISPLAY_MAXLEN;

	initStringInfo(&buf);
	for (int i = 0; i < shown; i += chlen)
	{
		KeyCharClass class;

		if (!valid)
		{
			unsigned char c = (unsigned char) str[i];

			chlen = 1;
			if (c < 0x20 || c >= 0x7f || c == '\\')
				appendStringInfo(&buf, "\\x%02x", c);
			else
				appendStringInfoChar(&buf, (char) c);
			continue;
		}
		class = key_char_class(encoding, str + i, shown - i, &chlen);
		if (str[i] == '\\' ||
			(class != KEY_CHAR_PRINTABLE && class != KEY_CHAR_SPACE))
		{
			for (int j = 0; j < chlen; j++)
				appendStringInfo(&buf, "\\x%02x", (unsigned char) str[i + j]);
		}
		else
			appendBinaryStringInfo(&buf, str + i, chlen);
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
 * key_reject_char
 *		Report a character that a key may not contain where it is.
 */
static void
key_reject_char(const char *str, int len, KeyCharClass class,
				int encoding, const char *ch, int chlen, int position)
{
	char	   *name = key_char_name(encoding, ch, chlen);

	switch (class)
	{
		case KEY_CHAR_SPACE:
			key_reject(str, len, psprintf(_("An idempotency key must not begin or end with white space: %s at position %d."),
										  name, position));
			break;
		case KEY_CHAR_CONTROL:
			key_reject(str, len, psprintf(_("An idempotency key must not contain control characters: %s at position %d."),
										  name, position));
			break;
		case KEY_CHAR_FORMAT:
			key_reject(str, len, psprintf(_("An idempotency key must not contain format characters: %s at position %d."),
										  name, position));
			break;
		case KEY_CHAR_SEPARATOR:
			key_reject(str, len, psprintf(_("An idempotency key must not contain line or paragraph separators: %s at position %d."),
										  name, position));
			break;
		case KEY_CHAR_NONCHARACTER:
			key_reject(str, len, psprintf(_("An idempotency key must not contain noncharacters: %s at position %d."),
										  name, position));
			break;
		case KEY_CHAR_UNMAPPED:
			key_reject(str, len, psprintf(_("An idempotency key must not contain bytes that stand for no character in encoding \"%s\": %s at position %d."),
										  GetDatabaseEncodingName(), name, position));
			break;
		case KEY_CHAR_PRINTABLE:
			break;
	}
}

/*
 * key_validate
 *		Check every rule a key must follow; error out on the first broken one.
 *
 * Every way in (text input, binary receive, casts, make_key) goes through
 * here, so the rules cannot differ between them.  A key is 1 to 255 bytes,
 * valid in the database encoding, of printable characters (key_char_class),
 * and neither begins nor ends with white space.  Positions in messages count
 * characters from 1.
 */
static void
key_validate(const char *str, int len)
{
	int			encoding = GetDatabaseEncoding();
	int			position = 0;
	int			chlen;

	if (len == 0)
		key_reject(str, len, _("An idempotency key must not be empty."));
	if (len > IDEMPOTENCY_KEY_MAXLEN)
		key_reject(str, len, psprintf(_("An idempotency key must be at most %d bytes long, but this one is %d bytes long."),
									  IDEMPOTENCY_KEY_MAXLEN, len));
	if (!pg_verifymbstr(str, len, true))
		key_reject(str, len, psprintf(_("The value is not valid in encoding \"%s\"."),
									  GetDatabaseEncodingName()));

	for (int i = 0; i < len; i += chlen)
	{
		unsigned char c = (unsigned char) str[i];
		KeyCharClass class;

		position++;
		/* the common case: printable ASCII inside the key */
		if (c > 0x20 && c < 0x7F)
		{
			chlen = 1;
			continue;
		}
		class = key_char_class(encoding, str + i, len - i, &chlen);
		if (class == KEY_CHAR_PRINTABLE ||
			(class == KEY_CHAR_SPACE && i > 0 && i + chlen < len))
			continue;
		key_reject_char(str, len, class, encoding, str + i, chlen, position);
	}
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

/*
 * IdempotencyKeyDisplay
 *		A key (a text datum) as a message shows it.
 */
char *
IdempotencyKeyDisplay(Datum key)
{
	text	   *t = DatumGetTextPP(key);

	return IdempotencyDisplayValue(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}
