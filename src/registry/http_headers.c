/*-------------------------------------------------------------------------
 *
 * http_headers.c
 *	  The response headers idempotent_finish stores for a replay: the forms
 *	  it accepts, checked before anything is stored.
 *
 * A replay must send exactly the header lines the first answer sent, in
 * their order, and some headers (Set-Cookie above all) cannot be joined into
 * one line with commas.  A jsonb object can hold neither: its keys are
 * sorted (shortest first) and a repeated key keeps only its last value, by
 * the time the function sees it.  So headers is one of
 *
 *	 {"Name": "value", ...}			one line per header, in jsonb's key order
 *	 {"Name": ["v1", "v2"], ...}	several lines of one header, in the array's
 *									order (mixed freely with strings)
 *	 [["Name", "value"], ...]		one line per pair, in the array's order;
 *									names may repeat
 *
 * stored as given: a jsonb array keeps its order, so a replay returns the
 * lines in the order they were stored.  Names must be HTTP field names (a
 * token, RFC 9110 section 5.1) and values must hold no control character
 * but tab: anything an HTTP layer could not send again is refused here, not
 * when a replay cannot send it.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/http_headers.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/jsonb.h"

#include "registry/http_headers.h"

/*
 * http_headers_tchar
 *		Whether a byte may appear in an HTTP field name: a tchar of RFC 9110,
 *		letters, digits and !#$%&'*+-.^_`|~.
 */
static bool
http_headers_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c >= '0' && c <= '9') || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/*
 * http_headers_name
 *		A header's name as a C string, refused unless it is an HTTP field
 *		name.
 */
static char *
http_headers_name(const JsonbValue *v)
{
	char	   *name = pnstrdup(v->val.string.val, v->val.string.len);

	if (v->val.string.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("header name must not be empty")));
	for (int i = 0; i < v->val.string.len; i++)
		if (!http_headers_tchar((unsigned char) v->val.string.val[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid header name \"%s\"", name),
					 errdetail("Byte 0x%02x at position %d is not allowed: a header name is made of letters, digits and the characters !#$%%&'*+-.^_`|~.",
							   (unsigned char) v->val.string.val[i], i + 1)));
	return name;
}

/*
 * http_headers_value
 *		Refuse a header value that is not a string, or that holds a control
 *		character other than tab (a line break would end the header line or
 *		start another).  ordinal, if not 0, is the value's place among its
 *		header's values (the object form's array), for the message.
 */
static void
http_headers_value(const char *name, JsonbValue *v, int ordinal)
{
	if (v->type != jbvString && ordinal > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("value %d of header \"%s\" must be a JSON string", ordinal, name),
				 errdetail("It is a JSON %s.", JsonbTypeName(v))));
	if (v->type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("value of header \"%s\" must be a JSON string", name),
				 errdetail("It is a JSON %s.", JsonbTypeName(v)),
				 errhint("Give each value of a header a [name, value] pair of its own.")));
	for (int i = 0; i < v->val.string.len; i++)
	{
		unsigned char c = (unsigned char) v->val.string.val[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("value of header \"%s\" contains a control character", name),
					 errdetail("Byte 0x%02x at position %d: a header value holds no control character but tab.",
							   c, i + 1)));
	}
}

/*
 * http_headers_object
 *		{"Name": "value" or ["value", ...], ...}
 */
static void
http_headers_object(Jsonb *headers)
{
	JsonbIterator *it = JsonbIteratorInit(&headers->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *name = NULL;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbContainer *values;
		int			n;

		if (tok == WJB_KEY)
		{
			name = http_headers_name(&v);
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		if (v.type == jbvString)
		{
			http_headers_value(name, &v, 0);
			continue;
		}
		if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("value of header \"%s\" must be a JSON string or an array of strings", name),
					 errdetail("It is a JSON %s.", JsonbTypeName(&v)),
					 errhint("Pass several values of one header as an array of strings, such as '{\"Set-Cookie\": [\"a=1\", \"b=2\"]}'.")));
		values = v.val.binary.data;
		n = JsonContainerSize(values);
		if (n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("values of header \"%s\" must not be an empty array", name),
					 errhint("Leave out a header that has no value.")));
		for (int i = 0; i < n; i++)
			http_headers_value(name, getIthJsonbValueFromContainer(values, i), i + 1);
	}
}

/*
 * http_headers_pairs
 *		[["Name", "value"], ...]
 */
static void
http_headers_pairs(Jsonb *headers)
{
	int			n = JsonContainerSize(&headers->root);

	for (int i = 0; i < n; i++)
	{
		JsonbValue *pair = getIthJsonbValueFromContainer(&headers->root, i);
		JsonbValue *name;
		int			size;

		if (pair->type != jbvBinary || !JsonContainerIsArray(pair->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("header %d of headers must be a [name, value] pair", i + 1),
					 errdetail("It is a JSON %s.", JsonbTypeName(pair)),
					 errhint("Pass an array of headers as pairs, such as '[[\"Set-Cookie\", \"a=1\"], [\"Set-Cookie\", \"b=2\"]]'.")));
		size = JsonContainerSize(pair->val.binary.data);
		if (size != 2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("header %d of headers must be a [name, value] pair", i + 1),
					 errdetail_plural("It is an array of %d element.",
									  "It is an array of %d elements.",
									  size, size),
					 errhint("Give each value of a header a [name, value] pair of its own.")));
		name = getIthJsonbValueFromContainer(pair->val.binary.data, 0);
		if (name->type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("name of header %d of headers must be a JSON string", i + 1),
					 errdetail("It is a JSON %s.", JsonbTypeName(name))));
		http_headers_value(http_headers_name(name),
						   getIthJsonbValueFromContainer(pair->val.binary.data, 1), 0);
	}
}

/*
 * IdempotencyHttpHeadersCheck
 *		Refuse headers that are not one of the forms the file header lists.
 */
void
IdempotencyHttpHeadersCheck(Jsonb *headers)
{
	JsonbValue	v;

	if (JB_ROOT_IS_SCALAR(headers))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must be a JSON object or array"),
				 errdetail("It is a JSON %s.",
						   JsonbExtractScalar(&headers->root, &v) ?
						   JsonbTypeName(&v) : "scalar"),
				 errhint("Pass the response headers as an object of header names and values, such as '{\"Location\": \"/charges/1\"}', or as an array of [name, value] pairs.")));
	if (JB_ROOT_IS_OBJECT(headers))
		http_headers_object(headers);
	else
		http_headers_pairs(headers);
}
