/*-------------------------------------------------------------------------
 *
 * keycmp.c
 *	  Comparison and hashing for the idempotency.key type: the support of
 *	  its btree and hash operator families, for a key with a key and for a
 *	  key with text.
 *
 * A key compares bytewise, whatever the collation, so a glibc or ICU
 * upgrade can never change which keys are equal or reorder a unique index.
 * A key and a text value compare the same way, byte by byte: a text that
 * is a valid key gives exactly the answer the key would, and a text that
 * is not one (empty, too long, with control characters) equals no key and
 * still sorts consistently among them.  That is what lets the cross-type
 * operators share the key's operator families, so that "k = $1::text" is
 * an index scan and never a silent text comparison.
 *
 * Both types are stored as a varlena of bytes, so one comparison serves
 * both argument orders and all three type pairs.  Hash support 1 and 2 hash
 * the bytes (hash_any, as text does under a deterministic collation), so
 * that equal values hash equally on every platform, whichever of the two
 * types they are; that is what hash joins between a key and a text column,
 * hash partitioning and a sharded table's distribution column rely on.
 *
 * The family has no text-with-text operators but two support members: a
 * bytewise (text, text) btree comparison, to sort "key = ANY (text[])", and
 * idempotency.~=~, the hash family's (text, text) equality, with which the
 * planner hashes or de-duplicates the text side of "key = text".  Text
 * compared with text stays core's.  A key compared with text under a
 * nondeterministic collation is refused (key_check_collation says why).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/key/keycmp.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "base/compat.h"


/*
 * key_cmp_internal
 *		Bytewise comparison; a proper prefix sorts first.
 */
static int
key_cmp_internal(text *a, text *b)
{
	int			alen = VARSIZE_ANY_EXHDR(a);
	int			blen = VARSIZE_ANY_EXHDR(b);
	int			cmp;

	cmp = memcmp(VARDATA_ANY(a), VARDATA_ANY(b), Min(alen, blen));
	if (cmp != 0)
		return cmp < 0 ? -1 : 1;
	if (alen != blen)
		return alen < blen ? -1 : 1;
	return 0;
}

/*
 * key_cmp_args
 *		Compare the two arguments (key or text, in either order) and free
 *		any detoasted copies.
 */
static int
key_cmp_args(FunctionCallInfo fcinfo)
{
	text	   *a = PG_GETARG_TEXT_PP(0);
	text	   *b = PG_GETARG_TEXT_PP(1);
	int			result = key_cmp_internal(a, b);

	PG_FREE_IF_COPY(a, 0);
	PG_FREE_IF_COPY(b, 1);
	return result;
}

/*
 * key_eq_args
 *		Equality of the two arguments; unequal lengths settle it without
 *		touching the bytes.
 */
static bool
key_eq_args(FunctionCallInfo fcinfo)
{
	text	   *a = PG_GETARG_TEXT_PP(0);
	text	   *b = PG_GETARG_TEXT_PP(1);
	bool		result;

	result = VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
	PG_FREE_IF_COPY(a, 0);
	PG_FREE_IF_COPY(b, 1);
	return result;
}

/*
 * key_check_collation
 *		Refuse a nondeterministic collation on the text side of a comparison
 *		with a key.
 *
 * A key compares bytewise, and so does a text compared with one, whatever
 * its collation.  But where the planner caches rows by the text value
 * (Memoize), it tells values apart with text's own equality under the
 * expression's collation; under a nondeterministic collation that equality
 * is coarser than ours ('a' = 'A'), and a cached inner result would be
 * reused for a text that no key matched.  Refusing such comparisons makes
 * the answer depend on nothing but the bytes.  The default and C collations
 * are deterministic and need no look-up; any other (POSIX too: 18 has no
 * symbol for its OID) is looked up once per call site.
 */
static void
key_check_collation(FunctionCallInfo fcinfo)
{
	Oid			collid = PG_GET_COLLATION();
	FmgrInfo   *flinfo = fcinfo->flinfo;

	if (collid == InvalidOid || collid == DEFAULT_COLLATION_OID ||
		collid == C_COLLATION_OID)
		return;
	if (flinfo != NULL && flinfo->fn_extra != NULL &&
		*(Oid *) flinfo->fn_extra == collid)
		return;
	if (!get_collation_isdeterministic(collid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("nondeterministic collations are not supported for comparisons with type idempotency.key"),
				 errhint("Compare with the text under COLLATE \"C\", or cast it to idempotency.key.")));
	if (flinfo != NULL)
	{
		if (flinfo->fn_extra == NULL)
			flinfo->fn_extra = MemoryContextAlloc(flinfo->fn_mcxt, sizeof(Oid));
		*(Oid *) flinfo->fn_extra = collid;
	}
}

/*
 * key_text_cmp_args, key_text_eq_args
 *		A key with text or text with a key: the same comparison, once the
 *		text's collation has been checked.
 */
static int
key_text_cmp_args(FunctionCallInfo fcinfo)
{
	key_check_collation(fcinfo);
	return key_cmp_args(fcinfo);
}

static bool
key_text_eq_args(FunctionCallInfo fcinfo)
{
	key_check_collation(fcinfo);
	return key_eq_args(fcinfo);
}

/* key with key */

PG_FUNCTION_INFO_V1(key_cmp);
Datum
key_cmp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(key_cmp_args(fcinfo));
}

PG_FUNCTION_INFO_V1(key_eq);
Datum
key_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_eq_args(fcinfo));
}

PG_FUNCTION_INFO_V1(key_ne);
Datum
key_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!key_eq_args(fcinfo));
}

PG_FUNCTION_INFO_V1(key_lt);
Datum
key_lt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_cmp_args(fcinfo) < 0);
}

PG_FUNCTION_INFO_V1(key_le);
Datum
key_le(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_cmp_args(fcinfo) <= 0);
}

PG_FUNCTION_INFO_V1(key_gt);
Datum
key_gt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_cmp_args(fcinfo) > 0);
}

PG_FUNCTION_INFO_V1(key_ge);
Datum
key_ge(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_cmp_args(fcinfo) >= 0);
}

/* key with text: the text's bytes, compared as a key's */

PG_FUNCTION_INFO_V1(key_text_cmp);
Datum
key_text_cmp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(key_text_cmp_args(fcinfo));
}

PG_FUNCTION_INFO_V1(key_text_eq);
Datum
key_text_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_text_eq_args(fcinfo));
}

PG_FUNCTION_INFO_V1(key_text_ne);
Datum
key_text_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!key_text_eq_args(fcinfo));
}

PG_FUNCTION_INFO_V1(key_text_lt);
Datum
key_text_lt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_text_cmp_args(fcinfo) < 0);
}

PG_FUNCTION_INFO_V1(key_text_le);
Datum
key_text_le(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_text_cmp_args(fcinfo) <= 0);
}

PG_FUNCTION_INFO_V1(key_text_gt);
Datum
key_text_gt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_text_cmp_args(fcinfo) > 0);
}

PG_FUNCTION_INFO_V1(key_text_ge);
Datum
key_text_ge(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_text_cmp_args(fcinfo) >= 0);
}

/* text with key */

PG_FUNCTION_INFO_V1(text_key_cmp);
Datum
text_key_cmp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(key_text_cmp_args(fcinfo));
}

PG_FUNCTION_INFO_V1(text_key_eq);
Datum
text_key_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_text_eq_args(fcinfo));
}

PG_FUNCTION_INFO_V1(text_key_ne);
Datum
text_key_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!key_text_eq_args(fcinfo));
}

PG_FUNCTION_INFO_V1(text_key_lt);
Datum
text_key_lt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_text_cmp_args(fcinfo) < 0);
}

PG_FUNCTION_INFO_V1(text_key_le);
Datum
text_key_le(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_text_cmp_args(fcinfo) <= 0);
}

PG_FUNCTION_INFO_V1(text_key_gt);
Datum
text_key_gt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_text_cmp_args(fcinfo) > 0);
}

PG_FUNCTION_INFO_V1(text_key_ge);
Datum
text_key_ge(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_text_cmp_args(fcinfo) >= 0);
}

/*
 * text_bytewise_cmp
 *		Two text values in the order of keys.  Btree support 1 for (text,
 *		text) in the key's family: an index scan on "key = ANY (text[])"
 *		sorts and de-duplicates the array with it.  It is not an operator:
 *		text compared with text stays core's, collation and all.
 */
PG_FUNCTION_INFO_V1(text_bytewise_cmp);
Datum
text_bytewise_cmp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(key_cmp_args(fcinfo));
}

/*
 * text_bytewise_eq
 *		Two text values equal as keys are: byte for byte.  The (text, text)
 *		member of the key's hash family, idempotency.~=~, which the planner
 *		needs to de-duplicate or hash the text side of "key = text" (a
 *		semi-join, a hashed IN); its hash is key_hash_text.
 */
PG_FUNCTION_INFO_V1(text_bytewise_eq);
Datum
text_bytewise_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(key_eq_args(fcinfo));
}

/*
 * key_hash_check_null
 *		Refuse a null key that reached a hash support function as a zero
 *		Datum.  The functions are strict, so the executor never calls them
 *		with a null; but Citus 13.2, routing a call of a function distributed
 *		by an idempotency.key argument (the API functions after citus_setup(),
 *		or an application's handler) that was given NULL, hashes the argument
 *		without looking at its null flag, and the coordinator would crash
 *		dereferencing it.  No non-null key is ever a zero pointer.
 */
static inline void
key_hash_check_null(FunctionCallInfo fcinfo)
{
	if (PG_GETARG_DATUM(0) == (Datum) 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("idempotency key must not be null")));
}

/*
 * key_hash
 *		Hash support 1.  hash_any over the bytes: stable across versions and
 *		independent of collation, as a distribution column needs.
 */
PG_FUNCTION_INFO_V1(key_hash);
Datum
key_hash(PG_FUNCTION_ARGS)
{
	text	   *key;
	Datum		result;

	key_hash_check_null(fcinfo);
	key = PG_GETARG_TEXT_PP(0);

	result = hash_any((unsigned char *) VARDATA_ANY(key),
					  VARSIZE_ANY_EXHDR(key));
	PG_FREE_IF_COPY(key, 0);
	return result;
}

/*
 * key_hash_extended
 *		Hash support 2: the 64-bit, seeded hash used by hash partitioning.
 */
PG_FUNCTION_INFO_V1(key_hash_extended);
Datum
key_hash_extended(PG_FUNCTION_ARGS)
{
	text	   *key;
	Datum		result;

	key_hash_check_null(fcinfo);
	key = PG_GETARG_TEXT_PP(0);

	result = hash_any_extended((unsigned char *) VARDATA_ANY(key),
							   VARSIZE_ANY_EXHDR(key),
							   PG_GETARG_INT64(1));
	PG_FREE_IF_COPY(key, 0);
	return result;
}

/*
 * key_hash_text
 *		Hash support 1 for text in the key's hash family: the same hash a key
 *		with these bytes has, whatever the text's collation, so that a hash
 *		join or a partition pruned on "key = text" finds the equal key.
 */
PG_FUNCTION_INFO_V1(key_hash_text);
Datum
key_hash_text(PG_FUNCTION_ARGS)
{
	return key_hash(fcinfo);
}

/*
 * key_hash_text_extended
 *		Hash support 2 for text in the key's hash family.
 */
PG_FUNCTION_INFO_V1(key_hash_text_extended);
Datum
key_hash_text_extended(PG_FUNCTION_ARGS)
{
	return key_hash_extended(fcinfo);
}
