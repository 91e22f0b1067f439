/* src/sql/idempotency--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION idempotency" to load this file. \quit

/*
 * The extension owns its schema: it creates it here, so that the schema is a
 * member of the extension (DROP EXTENSION drops it) and belongs to the
 * superuser who runs CREATE EXTENSION.  A schema of that name created
 * earlier by anyone else would stay theirs, and with it the power to rename
 * our objects and put look-alikes in their place: refuse it.  The control
 * file names pg_catalog as the extension's schema, as pg_cron's does, so
 * that CREATE EXTENSION does not create "idempotency" itself; nothing below
 * uses @extschema@.  The C functions check at run time that the schema named
 * idempotency is still this one (src/extension.c), and so do the PL/pgSQL
 * functions that name idempotency.state_machines, first thing.
 */
DO $$
DECLARE
	planted_by pg_catalog.name;
BEGIN
	SELECT pg_catalog.pg_get_userbyid(n.nspowner) INTO planted_by
	  FROM pg_catalog.pg_namespace AS n
	 WHERE n.nspname OPERATOR(pg_catalog.=) 'idempotency';
	IF FOUND THEN
		RAISE EXCEPTION 'schema "idempotency" already exists'
			USING ERRCODE = 'duplicate_schema',
				  DETAIL = pg_catalog.format('It is owned by role "%s", not by extension "idempotency".', planted_by),
				  HINT = 'Drop or rename it; the extension must create its own schema.';
	END IF;
END
$$;

CREATE SCHEMA idempotency;

COMMENT ON SCHEMA idempotency IS
'objects of extension idempotency; created and dropped with it';

/*
 * Every reference below is schema-qualified (pg_catalog or idempotency), so
 * that objects planted in other schemas before CREATE EXTENSION are never
 * picked up.  Nothing here uses CREATE OR REPLACE or IF NOT EXISTS
 * (CVE-2022-2625).
 *
 * Privileges: the pure functions of the key type (I/O, comparison, hashing,
 * make_key, parse_key) are callable by everyone, as core types' are.  Every
 * function that reads or writes the registry is revoked from PUBLIC; an
 * administrator grants it to application roles (README, "Installation").
 */

--
-- The key type
--

CREATE TYPE idempotency.key;

CREATE FUNCTION idempotency.key_in(pg_catalog.cstring)
RETURNS idempotency.key
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION idempotency.key_out(idempotency.key)
RETURNS pg_catalog.cstring
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION idempotency.key_recv(pg_catalog.internal)
RETURNS idempotency.key
AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION idempotency.key_send(idempotency.key)
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE TYPE idempotency.key (
	INPUT = idempotency.key_in,
	OUTPUT = idempotency.key_out,
	RECEIVE = idempotency.key_recv,
	SEND = idempotency.key_send,
	INTERNALLENGTH = VARIABLE,
	STORAGE = extended,
	CATEGORY = 'S'
);

COMMENT ON TYPE idempotency.key IS
'idempotency key: 1 to 255 printable bytes, compared bytewise';

-- casts: from text and varchar on assignment (checked), to text implicitly
CREATE FUNCTION idempotency.key(pg_catalog.text)
RETURNS idempotency.key
AS 'MODULE_PATHNAME', 'key_from_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE CAST (pg_catalog.text AS idempotency.key)
	WITH FUNCTION idempotency.key(pg_catalog.text) AS ASSIGNMENT;
CREATE CAST (pg_catalog.varchar AS idempotency.key)
	WITH FUNCTION idempotency.key(pg_catalog.text) AS ASSIGNMENT;
-- a function, not WITHOUT FUNCTION: see key_to_text in src/key.c
CREATE FUNCTION idempotency.text(idempotency.key)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'key_to_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE CAST (idempotency.key AS pg_catalog.text)
	WITH FUNCTION idempotency.text(idempotency.key) AS IMPLICIT;

/*
 * Comparison.  The operators live in pg_catalog, because that is the one
 * schema operator lookup always searches, whatever the search_path: with
 * them anywhere else, "k = 'x'" under the default search_path ("$user",
 * public) finds no key operator, resolves to text = text through the
 * implicit cast to text and scans the whole table.  Taking pg_catalog's
 * operator names for our own type hides nothing: every operator below has
 * an idempotency.key operand, a type that exists only with the extension.
 *
 * Besides key with key, the same bytewise comparison is declared for key
 * with text and text with key, as members of the key's btree and hash
 * operator families: a PL/pgSQL text variable, a driver's $1::text or a
 * join to a text column is compared as a key and can use the key's btree
 * or hash index, and no comparison involving a key is ever a
 * collation-dependent text comparison.  A text that is not a valid key
 * equals no key.  The exact match (key, text) beats text = text, which
 * needs a cast on one side, so no call is ambiguous; sql/key_operators.sql
 * shows what each form resolves to.
 *
 * The cross-type "=" HASHES but does not MERGES: a merge join would sort
 * the text side in a bytewise text order, which only a full set of (text,
 * text) operators in the family could give, and those would shadow core's
 * for anyone with this schema early in the search_path.  The hash family
 * is complete instead, with idempotency.~=~ as its (text, text) member.
 * A text under a nondeterministic collation is refused (keycmp.c says why).
 */
-- a key with a key
CREATE FUNCTION idempotency.key_cmp(idempotency.key, idempotency.key)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_cmp(idempotency.key, idempotency.key) IS
'bytewise comparison of a key with a key: -1, 0 or 1';

CREATE FUNCTION idempotency.key_eq(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_eq(idempotency.key, idempotency.key) IS
'implementation of = for a key with a key';

CREATE FUNCTION idempotency.key_ne(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_ne(idempotency.key, idempotency.key) IS
'implementation of <> for a key with a key';

CREATE FUNCTION idempotency.key_lt(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_lt(idempotency.key, idempotency.key) IS
'implementation of < for a key with a key';

CREATE FUNCTION idempotency.key_le(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_le(idempotency.key, idempotency.key) IS
'implementation of <= for a key with a key';

CREATE FUNCTION idempotency.key_gt(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_gt(idempotency.key, idempotency.key) IS
'implementation of > for a key with a key';

CREATE FUNCTION idempotency.key_ge(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_ge(idempotency.key, idempotency.key) IS
'implementation of >= for a key with a key';

-- a key with text
CREATE FUNCTION idempotency.key_text_cmp(idempotency.key, pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_text_cmp(idempotency.key, pg_catalog.text) IS
'bytewise comparison of a key with text: -1, 0 or 1';

CREATE FUNCTION idempotency.key_text_eq(idempotency.key, pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_text_eq(idempotency.key, pg_catalog.text) IS
'implementation of = for a key with text';

CREATE FUNCTION idempotency.key_text_ne(idempotency.key, pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_text_ne(idempotency.key, pg_catalog.text) IS
'implementation of <> for a key with text';

CREATE FUNCTION idempotency.key_text_lt(idempotency.key, pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_text_lt(idempotency.key, pg_catalog.text) IS
'implementation of < for a key with text';

CREATE FUNCTION idempotency.key_text_le(idempotency.key, pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_text_le(idempotency.key, pg_catalog.text) IS
'implementation of <= for a key with text';

CREATE FUNCTION idempotency.key_text_gt(idempotency.key, pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_text_gt(idempotency.key, pg_catalog.text) IS
'implementation of > for a key with text';

CREATE FUNCTION idempotency.key_text_ge(idempotency.key, pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_text_ge(idempotency.key, pg_catalog.text) IS
'implementation of >= for a key with text';

-- text with a key
CREATE FUNCTION idempotency.text_key_cmp(pg_catalog.text, idempotency.key)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_key_cmp(pg_catalog.text, idempotency.key) IS
'bytewise comparison of text with a key: -1, 0 or 1';

CREATE FUNCTION idempotency.text_key_eq(pg_catalog.text, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_key_eq(pg_catalog.text, idempotency.key) IS
'implementation of = for text with a key';

CREATE FUNCTION idempotency.text_key_ne(pg_catalog.text, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_key_ne(pg_catalog.text, idempotency.key) IS
'implementation of <> for text with a key';

CREATE FUNCTION idempotency.text_key_lt(pg_catalog.text, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_key_lt(pg_catalog.text, idempotency.key) IS
'implementation of < for text with a key';

CREATE FUNCTION idempotency.text_key_le(pg_catalog.text, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_key_le(pg_catalog.text, idempotency.key) IS
'implementation of <= for text with a key';

CREATE FUNCTION idempotency.text_key_gt(pg_catalog.text, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_key_gt(pg_catalog.text, idempotency.key) IS
'implementation of > for text with a key';

CREATE FUNCTION idempotency.text_key_ge(pg_catalog.text, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_key_ge(pg_catalog.text, idempotency.key) IS
'implementation of >= for text with a key';

-- text with text in the order of keys: support only, not an operator
CREATE FUNCTION idempotency.text_bytewise_cmp(pg_catalog.text, pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_bytewise_cmp(pg_catalog.text, pg_catalog.text) IS
'bytewise comparison of two text values, as keys compare: -1, 0 or 1';

CREATE FUNCTION idempotency.text_bytewise_eq(pg_catalog.text, pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_bytewise_eq(pg_catalog.text, pg_catalog.text) IS
'implementation of ~=~: two text values equal byte for byte, as keys compare';

-- hashing: the bytes, for a key and for a text compared with one
CREATE FUNCTION idempotency.key_hash(idempotency.key)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_hash(idempotency.key) IS
'hash of a key: hash_any over its bytes';

CREATE FUNCTION idempotency.key_hash_extended(idempotency.key, pg_catalog.int8)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_hash_extended(idempotency.key, pg_catalog.int8) IS
'seeded 64-bit hash of a key: hash_any_extended over its bytes';

CREATE FUNCTION idempotency.key_hash_text(pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_hash_text(pg_catalog.text) IS
'hash of a text compared with a key: the hash a key with the same bytes has';

CREATE FUNCTION idempotency.key_hash_text_extended(pg_catalog.text, pg_catalog.int8)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_hash_text_extended(pg_catalog.text, pg_catalog.int8) IS
'seeded 64-bit hash of a text compared with a key';

CREATE OPERATOR pg_catalog.= (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_eq,
	COMMUTATOR = OPERATOR(pg_catalog.=), NEGATOR = OPERATOR(pg_catalog.<>),
	RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel,
	HASHES, MERGES
);

COMMENT ON OPERATOR pg_catalog.= (idempotency.key, idempotency.key) IS 'equal';

CREATE OPERATOR pg_catalog.<> (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_ne,
	COMMUTATOR = OPERATOR(pg_catalog.<>), NEGATOR = OPERATOR(pg_catalog.=),
	RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel
);

COMMENT ON OPERATOR pg_catalog.<> (idempotency.key, idempotency.key) IS 'not equal';

CREATE OPERATOR pg_catalog.< (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_lt,
	COMMUTATOR = OPERATOR(pg_catalog.>), NEGATOR = OPERATOR(pg_catalog.>=),
	RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel
);

COMMENT ON OPERATOR pg_catalog.< (idempotency.key, idempotency.key) IS 'less than';

CREATE OPERATOR pg_catalog.<= (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_le,
	COMMUTATOR = OPERATOR(pg_catalog.>=), NEGATOR = OPERATOR(pg_catalog.>),
	RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel
);

COMMENT ON OPERATOR pg_catalog.<= (idempotency.key, idempotency.key) IS 'less than or equal';

CREATE OPERATOR pg_catalog.> (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_gt,
	COMMUTATOR = OPERATOR(pg_catalog.<), NEGATOR = OPERATOR(pg_catalog.<=),
	RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel
);

COMMENT ON OPERATOR pg_catalog.> (idempotency.key, idempotency.key) IS 'greater than';

CREATE OPERATOR pg_catalog.>= (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_ge,
	COMMUTATOR = OPERATOR(pg_catalog.<=), NEGATOR = OPERATOR(pg_catalog.<),
	RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel
);

COMMENT ON OPERATOR pg_catalog.>= (idempotency.key, idempotency.key) IS 'greater than or equal';

CREATE OPERATOR pg_catalog.= (
	LEFTARG = idempotency.key, RIGHTARG = pg_catalog.text,
	FUNCTION = idempotency.key_text_eq,
	COMMUTATOR = OPERATOR(pg_catalog.=), NEGATOR = OPERATOR(pg_catalog.<>),
	RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel,
	HASHES
);

COMMENT ON OPERATOR pg_catalog.= (idempotency.key, pg_catalog.text) IS 'equal';

CREATE OPERATOR pg_catalog.<> (
	LEFTARG = idempotency.key, RIGHTARG = pg_catalog.text,
	FUNCTION = idempotency.key_text_ne,
	COMMUTATOR = OPERATOR(pg_catalog.<>), NEGATOR = OPERATOR(pg_catalog.=),
	RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel
);

COMMENT ON OPERATOR pg_catalog.<> (idempotency.key, pg_catalog.text) IS 'not equal';

CREATE OPERATOR pg_catalog.< (
	LEFTARG = idempotency.key, RIGHTARG = pg_catalog.text,
	FUNCTION = idempotency.key_text_lt,
	COMMUTATOR = OPERATOR(pg_catalog.>), NEGATOR = OPERATOR(pg_catalog.>=),
	RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel
);

COMMENT ON OPERATOR pg_catalog.< (idempotency.key, pg_catalog.text) IS 'less than';

CREATE OPERATOR pg_catalog.<= (
	LEFTARG = idempotency.key, RIGHTARG = pg_catalog.text,
	FUNCTION = idempotency.key_text_le,
	COMMUTATOR = OPERATOR(pg_catalog.>=), NEGATOR = OPERATOR(pg_catalog.>),
	RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel
);

COMMENT ON OPERATOR pg_catalog.<= (idempotency.key, pg_catalog.text) IS 'less than or equal';

CREATE OPERATOR pg_catalog.> (
	LEFTARG = idempotency.key, RIGHTARG = pg_catalog.text,
	FUNCTION = idempotency.key_text_gt,
	COMMUTATOR = OPERATOR(pg_catalog.<), NEGATOR = OPERATOR(pg_catalog.<=),
	RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel
);

COMMENT ON OPERATOR pg_catalog.> (idempotency.key, pg_catalog.text) IS 'greater than';

CREATE OPERATOR pg_catalog.>= (
	LEFTARG = idempotency.key, RIGHTARG = pg_catalog.text,
	FUNCTION = idempotency.key_text_ge,
	COMMUTATOR = OPERATOR(pg_catalog.<=), NEGATOR = OPERATOR(pg_catalog.<),
	RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel
);

COMMENT ON OPERATOR pg_catalog.>= (idempotency.key, pg_catalog.text) IS 'greater than or equal';

CREATE OPERATOR pg_catalog.= (
	LEFTARG = pg_catalog.text, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.text_key_eq,
	COMMUTATOR = OPERATOR(pg_catalog.=), NEGATOR = OPERATOR(pg_catalog.<>),
	RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel,
	HASHES
);

COMMENT ON OPERATOR pg_catalog.= (pg_catalog.text, idempotency.key) IS 'equal';

CREATE OPERATOR pg_catalog.<> (
	LEFTARG = pg_catalog.text, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.text_key_ne,
	COMMUTATOR = OPERATOR(pg_catalog.<>), NEGATOR = OPERATOR(pg_catalog.=),
	RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel
);

COMMENT ON OPERATOR pg_catalog.<> (pg_catalog.text, idempotency.key) IS 'not equal';

CREATE OPERATOR pg_catalog.< (
	LEFTARG = pg_catalog.text, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.text_key_lt,
	COMMUTATOR = OPERATOR(pg_catalog.>), NEGATOR = OPERATOR(pg_catalog.>=),
	RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel
);

COMMENT ON OPERATOR pg_catalog.< (pg_catalog.text, idempotency.key) IS 'less than';

CREATE OPERATOR pg_catalog.<= (
	LEFTARG = pg_catalog.text, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.text_key_le,
	COMMUTATOR = OPERATOR(pg_catalog.>=), NEGATOR = OPERATOR(pg_catalog.>),
	RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel
);

COMMENT ON OPERATOR pg_catalog.<= (pg_catalog.text, idempotency.key) IS 'less than or equal';

CREATE OPERATOR pg_catalog.> (
	LEFTARG = pg_catalog.text, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.text_key_gt,
	COMMUTATOR = OPERATOR(pg_catalog.<), NEGATOR = OPERATOR(pg_catalog.<=),
	RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel
);

COMMENT ON OPERATOR pg_catalog.> (pg_catalog.text, idempotency.key) IS 'greater than';

CREATE OPERATOR pg_catalog.>= (
	LEFTARG = pg_catalog.text, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.text_key_ge,
	COMMUTATOR = OPERATOR(pg_catalog.<=), NEGATOR = OPERATOR(pg_catalog.<),
	RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel
);

COMMENT ON OPERATOR pg_catalog.>= (pg_catalog.text, idempotency.key) IS 'greater than or equal';

/*
 * Text with text, byte for byte: the (text, text) member of the key's hash
 * family, which the planner needs to hash or de-duplicate the text side of
 * "key = text" (a hash semi-join, a hashed IN).  It is deliberately not
 * called "=" and not in pg_catalog: text = text stays core's, collation and
 * all, whatever the search_path.
 */
CREATE OPERATOR idempotency.~=~ (
	LEFTARG = pg_catalog.text, RIGHTARG = pg_catalog.text,
	FUNCTION = idempotency.text_bytewise_eq,
	COMMUTATOR = OPERATOR(idempotency.~=~),
	RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel,
	HASHES
);

COMMENT ON OPERATOR idempotency.~=~ (pg_catalog.text, pg_catalog.text) IS
'equal byte for byte, as keys compare';

CREATE OPERATOR FAMILY idempotency.key_ops USING btree;

COMMENT ON OPERATOR FAMILY idempotency.key_ops USING btree IS
'bytewise order of keys, and of text compared with a key';

CREATE OPERATOR CLASS idempotency.key_ops
	DEFAULT FOR TYPE idempotency.key USING btree FAMILY idempotency.key_ops AS
		OPERATOR 1 pg_catalog.< ,
		OPERATOR 2 pg_catalog.<= ,
		OPERATOR 3 pg_catalog.= ,
		OPERATOR 4 pg_catalog.>= ,
		OPERATOR 5 pg_catalog.> ,
		FUNCTION 1 idempotency.key_cmp(idempotency.key, idempotency.key);

COMMENT ON OPERATOR CLASS idempotency.key_ops USING btree IS
'default btree operator class for idempotency.key: bytewise';

ALTER OPERATOR FAMILY idempotency.key_ops USING btree ADD
	OPERATOR 1 pg_catalog.< (idempotency.key, pg_catalog.text),
	OPERATOR 2 pg_catalog.<= (idempotency.key, pg_catalog.text),
	OPERATOR 3 pg_catalog.= (idempotency.key, pg_catalog.text),
	OPERATOR 4 pg_catalog.>= (idempotency.key, pg_catalog.text),
	OPERATOR 5 pg_catalog.> (idempotency.key, pg_catalog.text),
	FUNCTION 1 (idempotency.key, pg_catalog.text)
		idempotency.key_text_cmp(idempotency.key, pg_catalog.text),
	OPERATOR 1 pg_catalog.< (pg_catalog.text, idempotency.key),
	OPERATOR 2 pg_catalog.<= (pg_catalog.text, idempotency.key),
	OPERATOR 3 pg_catalog.= (pg_catalog.text, idempotency.key),
	OPERATOR 4 pg_catalog.>= (pg_catalog.text, idempotency.key),
	OPERATOR 5 pg_catalog.> (pg_catalog.text, idempotency.key),
	FUNCTION 1 (pg_catalog.text, idempotency.key)
		idempotency.text_key_cmp(pg_catalog.text, idempotency.key),
	FUNCTION 1 (pg_catalog.text, pg_catalog.text)
		idempotency.text_bytewise_cmp(pg_catalog.text, pg_catalog.text);

CREATE OPERATOR FAMILY idempotency.key_hash_ops USING hash;

COMMENT ON OPERATOR FAMILY idempotency.key_hash_ops USING hash IS
'bytewise hashing of keys, and of text compared with a key';

CREATE OPERATOR CLASS idempotency.key_hash_ops
	DEFAULT FOR TYPE idempotency.key USING hash FAMILY idempotency.key_hash_ops AS
		OPERATOR 1 pg_catalog.= ,
		FUNCTION 1 idempotency.key_hash(idempotency.key),
		FUNCTION 2 idempotency.key_hash_extended(idempotency.key, pg_catalog.int8);

COMMENT ON OPERATOR CLASS idempotency.key_hash_ops USING hash IS
'default hash operator class for idempotency.key: hash_any over the bytes';

ALTER OPERATOR FAMILY idempotency.key_hash_ops USING hash ADD
	OPERATOR 1 pg_catalog.= (idempotency.key, pg_catalog.text),
	OPERATOR 1 pg_catalog.= (pg_catalog.text, idempotency.key),
	OPERATOR 1 idempotency.~=~ (pg_catalog.text, pg_catalog.text),
	FUNCTION 1 (pg_catalog.text) idempotency.key_hash_text(pg_catalog.text),
	FUNCTION 2 (pg_catalog.text) idempotency.key_hash_text_extended(pg_catalog.text, pg_catalog.int8);

--
-- Structured keys
--

CREATE FUNCTION idempotency.make_key(prefix pg_catalog.text,
									 business_id pg_catalog.text,
									 operation pg_catalog.text,
									 version pg_catalog.text DEFAULT 'v1')
RETURNS idempotency.key
AS 'MODULE_PATHNAME', 'idempotency_make_key'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.make_key(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
'build the structured key prefix:business_id:operation:version:checksum';

/*
 * parse_key takes text, as every function taking a key does: a text or
 * varchar value needs no cast, and an idempotency.key passes through its
 * implicit cast to text.  The key type's rules are applied to it.
 */
CREATE FUNCTION idempotency.parse_key(key pg_catalog.text,
									  OUT prefix pg_catalog.text,
									  OUT business_id pg_catalog.text,
									  OUT operation pg_catalog.text,
									  OUT version pg_catalog.text,
									  OUT checksum pg_catalog.text,
									  OUT checksum_ok pg_catalog.bool)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_parse_key'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 1;

COMMENT ON FUNCTION idempotency.parse_key(pg_catalog.text) IS
'split a structured key into its parts and check its checksum; no row for an opaque key';

--
-- The registry
--

/*
 * One record per (owner, scope, key).  The primary key is the final line of
 * defence: even a writer that bypasses the functions cannot store a second
 * record.  It leads with key, the column that tells records apart: owner and
 * scope are the same for most rows, so putting them first would make every
 * comparison in an index descent look at three columns instead of one.
 * There is no CHECK constraint on status: only this extension's functions
 * write the table, and a CHECK would be re-read from the catalog and
 * compiled by every INSERT and UPDATE statement.  owner is the role's name, not its OID (Citus rule 6);
 * owner and scope use the "C" collation so that their comparison is bytewise
 * and their index never depends on the platform's collation library.  Only
 * unindexed columns change after the claim, and the fill factor leaves room
 * on each page, so idempotent_finish is a HOT update.
 */
CREATE TABLE idempotency.registry (
	owner		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	scope		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	key			idempotency.key NOT NULL,
	status		pg_catalog.text NOT NULL,
	attempt		pg_catalog.int4 NOT NULL,
	fingerprint pg_catalog.bytea,
	response	pg_catalog.jsonb,
	status_code pg_catalog.int4,
	body		pg_catalog.bytea,
	headers		pg_catalog.jsonb,
	created_at	pg_catalog.timestamptz NOT NULL,
	updated_at	pg_catalog.timestamptz NOT NULL,
	lease_until pg_catalog.timestamptz,
	expires_at	pg_catalog.timestamptz NOT NULL,
	CONSTRAINT registry_pkey PRIMARY KEY (key, scope, owner)
) WITH (fillfactor = 80);

-- No index on expires_at: the cleanup finds expired records by sweeping the
-- heap in block ranges (src/sweep.c), so a claim maintains one btree, not two.

COMMENT ON TABLE idempotency.registry IS
'idempotency records; read your own through idempotency.my_records';

REVOKE ALL ON TABLE idempotency.registry FROM PUBLIC;

/*
 * pg_dump keeps the records.  The database's owner may read them (and the
 * inbox and tokens below), so that its pg_dump of the whole database works;
 * no other role may.
 */
SELECT pg_catalog.pg_extension_config_dump('idempotency.registry', '');
GRANT SELECT ON TABLE idempotency.registry TO pg_database_owner;

/*
 * owner_name(): the name the caller's records, inbox entries, tokens and
 * outbox messages are stored under: the role grant_usage() was given to,
 * which the caller is or is a member of (src/owner.c).  It tells the caller
 * nothing but that name, so it is left to PUBLIC.
 */
CREATE FUNCTION idempotency.owner_name()
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_owner_name'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.owner_name() IS
'the role name the caller''s records are stored under: the application role grant_usage was given to';

/*
 * A role's own records.  owner_name() is evaluated for the caller, and the
 * security barrier keeps a caller's leaky function from seeing other rows.
 */
CREATE VIEW idempotency.my_records WITH (security_barrier) AS
	SELECT r.key, r.scope, r.status, r.attempt, r.created_at, r.updated_at,
		   r.lease_until, r.expires_at,
		   (r.expires_at OPERATOR(pg_catalog.<=) pg_catalog.now()
			OR r.status OPERATOR(pg_catalog.=) 'abandoned') AS expired,
		   r.response, r.status_code, r.body, r.headers, r.fingerprint
	  FROM idempotency.registry AS r
	 WHERE r.owner OPERATOR(pg_catalog.=) idempotency.owner_name();

REVOKE ALL ON TABLE idempotency.my_records FROM PUBLIC;

/*
 * The functions take keys as text, so that a text or varchar value (a
 * PL/pgSQL variable, a driver's text parameter) needs no cast; they apply
 * the key type's rules to it, and an idempotency.key value passes through
 * its implicit cast to text.
 */
CREATE FUNCTION idempotency.idempotent_begin(key pg_catalog.text,
											 scope pg_catalog.text DEFAULT '',
											 request pg_catalog.jsonb DEFAULT NULL,
											 ttl pg_catalog.interval DEFAULT '24 hours',
											 lease pg_catalog.interval DEFAULT NULL,
											 wait pg_catalog.bool DEFAULT true,
											 require_token pg_catalog.bool DEFAULT false,
											 max_wait pg_catalog.interval DEFAULT NULL,
											 defer_claim pg_catalog.bool DEFAULT false,
											 OUT outcome pg_catalog.text,
											 OUT status pg_catalog.text,
											 OUT response pg_catalog.jsonb,
											 OUT attempt pg_catalog.int4,
											 OUT expires_at pg_catalog.timestamptz,
											 OUT lease_until pg_catalog.timestamptz,
											 OUT status_code pg_catalog.int4,
											 OUT body pg_catalog.bytea,
											 OUT headers pg_catalog.jsonb,
											 OUT previous_attempt pg_catalog.int4,
											 OUT previous_end pg_catalog.text,
											 OUT retry_after pg_catalog.int4)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_idempotent_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool) IS
'claim an idempotency key: outcome execute, replay or in_progress';

CREATE FUNCTION idempotency.idempotent_finish(key pg_catalog.text,
											  response pg_catalog.jsonb,
											  scope pg_catalog.text DEFAULT '',
											  attempt pg_catalog.int4 DEFAULT NULL,
											  failed pg_catalog.bool DEFAULT false,
											  status_code pg_catalog.int4 DEFAULT NULL,
											  body pg_catalog.bytea DEFAULT NULL,
											  ttl pg_catalog.interval DEFAULT NULL,
											  headers pg_catalog.jsonb DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_idempotent_finish'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_finish(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) IS
'store the response of a claimed key, to be replayed to every retry; returns the status stored, completed or failed';

CREATE FUNCTION idempotency.idempotent_abandon(key pg_catalog.text,
											   scope pg_catalog.text DEFAULT '',
											   attempt pg_catalog.int4 DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_idempotent_abandon'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_abandon(pg_catalog.text, pg_catalog.text, pg_catalog.int4) IS
'give up a claim so that the next idempotent_begin executes again';

CREATE FUNCTION idempotency.lookup(key pg_catalog.text,
								   scope pg_catalog.text DEFAULT '',
								   request pg_catalog.jsonb DEFAULT NULL,
								   OUT found pg_catalog.bool,
								   OUT status pg_catalog.text,
								   OUT response pg_catalog.jsonb,
								   OUT status_code pg_catalog.int4,
								   OUT body pg_catalog.bytea,
								   OUT headers pg_catalog.jsonb,
								   OUT attempt pg_catalog.int4,
								   OUT expires_at pg_catalog.timestamptz,
								   OUT lease_until pg_catalog.timestamptz,
								   OUT request_matches pg_catalog.bool)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_lookup'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb) IS
'read the caller''s live record of a key without claiming it';

REVOKE ALL ON FUNCTION idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.idempotent_finish(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.idempotent_abandon(pg_catalog.text, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb) FROM PUBLIC;

--
-- Expiry: the cleanup function and the background worker's status
--

CREATE FUNCTION idempotency.cleanup(batch_size pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'idempotency_cleanup'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.cleanup(pg_catalog.int4) IS
'delete one batch of expired records, oldest first; returns how many';

REVOKE ALL ON FUNCTION idempotency.cleanup(pg_catalog.int4) FROM PUBLIC;

CREATE FUNCTION idempotency.cleanup_status(OUT dbid pg_catalog.oid,
										   OUT last_start pg_catalog.timestamptz,
										   OUT last_end pg_catalog.timestamptz,
										   OUT last_deleted pg_catalog.int8,
										   OUT total_deleted pg_catalog.int8,
										   OUT failures pg_catalog.int4,
										   OUT next_run pg_catalog.timestamptz,
										   OUT last_error pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_cleanup_status'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

REVOKE ALL ON FUNCTION idempotency.cleanup_status() FROM PUBLIC;

CREATE VIEW idempotency.cleanup_status AS
	SELECT d.datname, s.last_start, s.last_end, s.last_deleted, s.total_deleted,
		   s.failures, s.next_run, s.last_error
	  FROM idempotency.cleanup_status() AS s
	  JOIN pg_catalog.pg_database AS d ON d.oid OPERATOR(pg_catalog.=) s.dbid;

COMMENT ON VIEW idempotency.cleanup_status IS
'the background cleanup, per database: last pass, rows deleted, last error';

REVOKE ALL ON TABLE idempotency.cleanup_status FROM PUBLIC;
GRANT SELECT ON TABLE idempotency.cleanup_status TO pg_monitor;
GRANT EXECUTE ON FUNCTION idempotency.cleanup_status() TO pg_monitor;

--
-- State machines: definitions, the transition checker and its history
--

/*
 * One row per machine.  Readable by everyone (definitions are rules, not
 * secrets, and every backend's trigger cache reads them as the user whose
 * write fires the trigger); written only through define_state_machine and
 * drop_state_machine.  A statement trigger tells every backend's cache when
 * a definition changes.
 */
CREATE TABLE idempotency.state_machines (
	name		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	transitions pg_catalog.jsonb NOT NULL,
	initial		pg_catalog.text[] NOT NULL,
	updated_at	pg_catalog.timestamptz NOT NULL,
	CONSTRAINT state_machines_pkey PRIMARY KEY (name)
);

COMMENT ON TABLE idempotency.state_machines IS
'state machine definitions; change them with define_state_machine and drop_state_machine';

SELECT pg_catalog.pg_extension_config_dump('idempotency.state_machines', '');
REVOKE ALL ON TABLE idempotency.state_machines FROM PUBLIC;
GRANT SELECT ON TABLE idempotency.state_machines TO PUBLIC;

CREATE FUNCTION idempotency.state_machines_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idempotency_state_machines_changed'
LANGUAGE C;

REVOKE ALL ON FUNCTION idempotency.state_machines_changed() FROM PUBLIC;

/*
 * Row triggers, because a subscription's apply worker fires row triggers
 * only (and TRUNCATE's statement triggers); ENABLE ALWAYS, because it runs
 * with session_replication_role = replica.  Without them a subscriber's
 * backends would keep enforcing a definition the publisher changed.
 */
CREATE TRIGGER state_machines_changed
	AFTER INSERT OR UPDATE OR DELETE ON idempotency.state_machines
	FOR EACH ROW EXECUTE FUNCTION idempotency.state_machines_changed();
CREATE TRIGGER state_machines_truncated
	AFTER TRUNCATE ON idempotency.state_machines
	FOR EACH STATEMENT EXECUTE FUNCTION idempotency.state_machines_changed();
ALTER TABLE idempotency.state_machines ENABLE ALWAYS TRIGGER state_machines_changed;
ALTER TABLE idempotency.state_machines ENABLE ALWAYS TRIGGER state_machines_truncated;

COMMENT ON TRIGGER state_machines_changed ON idempotency.state_machines IS
'tells every backend''s cache that a definition changed (fires in a subscription''s apply worker too)';
COMMENT ON TRIGGER state_machines_truncated ON idempotency.state_machines IS
'tells every backend''s cache that the definitions were truncated (fires in a subscription''s apply worker too)';

/*
 * define_state_machine(name, transitions, initial): check and store a
 * definition, replacing any earlier one in one statement.  In C (linear in
 * the size of the definition, and the same checks as the cache's loader).
 * SECURITY DEFINER so that a role granted this function needs no privilege
 * on the table, and cannot store a definition that has not been checked.
 * Limits: 10000 states, 100000 transitions, state names of 255 bytes.
 */
CREATE FUNCTION idempotency.define_state_machine(name pg_catalog.text,
												 transitions pg_catalog.jsonb,
												 initial pg_catalog.text[] DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_define_state_machine'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION idempotency.define_state_machine(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text[]) IS
'define or replace a state machine: each state mapped to the states it may move to (at most 10000 states and 100000 transitions)';

REVOKE ALL ON FUNCTION idempotency.define_state_machine(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text[]) FROM PUBLIC;

/*
 * drop_state_machine(name): refused while a check_transition trigger names
 * the machine, so that no table is left with a trigger that fails every row.
 */
CREATE FUNCTION idempotency.drop_state_machine(name pg_catalog.text)
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_drop_state_machine'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION idempotency.drop_state_machine(pg_catalog.text) FROM PUBLIC;

CREATE FUNCTION idempotency.transition_allowed(machine pg_catalog.text,
											   from_state pg_catalog.text,
											   to_state pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_transition_allowed'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION idempotency.transition_allowed(pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
'whether check_transition lets a row move from one state to another (staying is allowed)';

/* a machine's transitions, one row each; an error for an unknown machine */
CREATE FUNCTION idempotency.state_machine_transitions(machine pg_catalog.text,
													  OUT from_state pg_catalog.text,
													  OUT to_state pg_catalog.text,
													  OUT from_initial pg_catalog.bool)
RETURNS SETOF pg_catalog.record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_depend AS d JOIN pg_extension AS e ON e.oid = d.refobjid  -- our own schema?
					WHERE d.classid = 'pg_namespace'::regclass AND d.objid = to_regnamespace('idempotency')
					  AND d.deptype = 'e' AND e.extname = 'idempotency') THEN
		RAISE EXCEPTION 'schema "idempotency" does not belong to extension "idempotency"' USING ERRCODE = 'object_not_in_prerequisite_state';
	END IF;
	IF NOT EXISTS (SELECT FROM idempotency.state_machines AS m WHERE m.name = machine) THEN
		RAISE EXCEPTION 'state machine "%" does not exist', machine USING ERRCODE = 'undefined_object';
	END IF;
	RETURN QUERY
		SELECT f.key, t.value, f.key = ANY (m.initial)
		  FROM idempotency.state_machines AS m,
			   jsonb_each(m.transitions) AS f,
			   jsonb_array_elements_text(f.value) AS t
		 WHERE m.name = machine
		 ORDER BY 1, 2;
END;
$$;

CREATE FUNCTION idempotency.check_transition()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idempotency_check_transition'
LANGUAGE C;

COMMENT ON FUNCTION idempotency.check_transition() IS
'BEFORE INSERT OR UPDATE ... FOR EACH ROW trigger: check_transition(machine, state_column)';

/*
 * State history: who moved which row from where to where, and when.  Row-
 * level security shows a row only to roles that may read every row of the
 * table it describes, and only while that table is the one that was written
 * (table_oid still has the name table_name): state_history_visible.  No
 * primary key: history has no natural one (Citus rule 7 forbids inventing
 * one with a serial).
 */
CREATE TABLE idempotency.state_history (
	table_name	pg_catalog.text NOT NULL,
	row_key		pg_catalog.jsonb NOT NULL,
	from_state	pg_catalog.text,
	to_state	pg_catalog.text NOT NULL,
	changed_at	pg_catalog.timestamptz NOT NULL,
	xid			pg_catalog.xid8 NOT NULL,
	role		pg_catalog.text NOT NULL,
	expires_at	pg_catalog.timestamptz NOT NULL,
	table_oid	pg_catalog.oid NOT NULL
);

CREATE INDEX state_history_row_idx ON idempotency.state_history (table_name, row_key);
CREATE INDEX state_history_expires_at_idx ON idempotency.state_history (expires_at);

COMMENT ON TABLE idempotency.state_history IS
'state changes recorded by record_transition triggers; kept for idempotency.history_ttl';

SELECT pg_catalog.pg_extension_config_dump('idempotency.state_history', '');

/*
 * state_history_visible(table_oid, table_name): whether the current role may
 * read a history row about that table: the table still exists under that
 * name (a table dropped, renamed, or created again under the old name is
 * another table), the role may SELECT it, and no row-level security
 * applies to the role there (it sees every row the history describes).
 */
CREATE FUNCTION idempotency.state_history_visible(table_oid pg_catalog.oid,
												  table_name pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_state_history_visible'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.state_history_visible(pg_catalog.oid, pg_catalog.text) IS
'whether the current role may read state_history rows about a table: it is still that table, readable in full';

/*
 * The database's owner (pg_database_owner) owns the history, so that it can
 * read all of it past row-level security, which is what pg_dump needs (it
 * refuses a table that row-level security would filter).  The C code writes
 * and deletes history rows as the table's owner, never as the superuser who
 * installed the extension (src/history.c), so nothing that owner attaches to
 * the table runs with more than its own privileges.
 */
ALTER TABLE idempotency.state_history OWNER TO pg_database_owner;
ALTER TABLE idempotency.state_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY state_history_readers ON idempotency.state_history FOR SELECT
	USING (idempotency.state_history_visible(table_oid, table_name));
REVOKE ALL ON TABLE idempotency.state_history FROM PUBLIC;
GRANT SELECT ON TABLE idempotency.state_history TO PUBLIC;

CREATE FUNCTION idempotency.record_transition()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idempotency_record_transition'
LANGUAGE C;

COMMENT ON FUNCTION idempotency.record_transition() IS
'AFTER INSERT OR UPDATE ... FOR EACH ROW trigger: record_transition(state_column) writes state_history';

--
-- Message inbox, locks and the version guard
--

/*
 * The inbox's message ids: text, compared bytewise.  A type of its own so
 * that under Citus the inbox's co-location group belongs to this type only:
 * Citus puts a new table distributed by a column of some type into an
 * existing group of that type by default, and a user's table distributed by
 * a text column would land in the inbox's group (and then be refused, its
 * collation differing).
 */
CREATE DOMAIN idempotency.message_id AS pg_catalog.text COLLATE pg_catalog."C";

COMMENT ON DOMAIN idempotency.message_id IS
'a message id in the inbox: text compared bytewise';

/*
 * One entry per (owner, consumer, message id), kept for its ttl.  The
 * primary key leads with the message id for the same reason as the
 * registry's leads with the key.
 */
CREATE TABLE idempotency.inbox (
	owner		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	consumer	pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	message_id	idempotency.message_id NOT NULL,
	received_at pg_catalog.timestamptz NOT NULL,
	expires_at	pg_catalog.timestamptz NOT NULL,
	CONSTRAINT inbox_pkey PRIMARY KEY (message_id, consumer, owner)
) WITH (fillfactor = 90);

CREATE INDEX inbox_expires_at_idx ON idempotency.inbox (expires_at);

COMMENT ON TABLE idempotency.inbox IS
'message ids seen by each consumer; written by inbox_receive and inbox_receive_batch';

SELECT pg_catalog.pg_extension_config_dump('idempotency.inbox', '');
REVOKE ALL ON TABLE idempotency.inbox FROM PUBLIC;
GRANT SELECT ON TABLE idempotency.inbox TO pg_database_owner;

CREATE FUNCTION idempotency.inbox_receive(consumer pg_catalog.text,
										  message_id pg_catalog.text,
										  ttl pg_catalog.interval DEFAULT '7 days')
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_inbox_receive'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.inbox_receive(pg_catalog.text, pg_catalog.text, pg_catalog.interval) IS
'true the first time a consumer sees a message id, false for a redelivery';

CREATE FUNCTION idempotency.inbox_receive_batch(consumer pg_catalog.text,
												message_ids pg_catalog.text[],
												ttl pg_catalog.interval DEFAULT '7 days')
RETURNS SETOF pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_inbox_receive_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.inbox_receive_batch(pg_catalog.text, pg_catalog.text[], pg_catalog.interval) IS
'the message ids a consumer has not seen before, in input order, each once';

REVOKE ALL ON FUNCTION idempotency.inbox_receive(pg_catalog.text, pg_catalog.text, pg_catalog.interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.inbox_receive_batch(pg_catalog.text, pg_catalog.text[], pg_catalog.interval) FROM PUBLIC;

CREATE FUNCTION idempotency.lock(key pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.lock(pg_catalog.text, pg_catalog.text) IS
'wait for a transaction-scoped lock on a key (node-local advisory lock)';

CREATE FUNCTION idempotency.try_lock(key pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_try_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.try_lock(pg_catalog.text, pg_catalog.text) IS
'take a transaction-scoped lock on a key if it is free (node-local advisory lock)';

REVOKE ALL ON FUNCTION idempotency.lock(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.try_lock(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

CREATE FUNCTION idempotency.version_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idempotency_version_guard'
LANGUAGE C;

COMMENT ON FUNCTION idempotency.version_guard() IS
'BEFORE UPDATE ... FOR EACH ROW trigger: version_guard(column) bumps the version by one and refuses stale writes';

--
-- Checking our triggers when they are created
--

/*
 * A check_transition, record_transition or version_guard trigger that is
 * defined wrongly (unknown machine, missing column, wrong timing, level,
 * events, column type or number of arguments, no primary key) is refused by
 * CREATE TRIGGER, not at the first row written.  The function recognises our
 * trigger functions by OID, through the extension's own dependencies; the
 * trigger functions repeat the checks when they fire.
 */
CREATE FUNCTION idempotency.check_new_triggers()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'idempotency_check_new_triggers'
LANGUAGE C;

COMMENT ON FUNCTION idempotency.check_new_triggers() IS
'event trigger: refuse a check_transition, record_transition or version_guard trigger that is defined wrongly';

REVOKE ALL ON FUNCTION idempotency.check_new_triggers() FROM PUBLIC;

CREATE EVENT TRIGGER idempotency_check_new_triggers ON ddl_command_end
	WHEN TAG IN ('CREATE TRIGGER')
	EXECUTE FUNCTION idempotency.check_new_triggers();

COMMENT ON EVENT TRIGGER idempotency_check_new_triggers IS
'checks check_transition, record_transition and version_guard triggers when they are created';

--
-- One-time tokens
--

CREATE TABLE idempotency.tokens (
	owner		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	scope		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	token		idempotency.key NOT NULL,
	issued_at	pg_catalog.timestamptz NOT NULL,
	expires_at	pg_catalog.timestamptz NOT NULL,
	consumed_at pg_catalog.timestamptz,
	CONSTRAINT tokens_pkey PRIMARY KEY (token, scope, owner)
) WITH (fillfactor = 80);

CREATE INDEX tokens_expires_at_idx ON idempotency.tokens (expires_at);

COMMENT ON TABLE idempotency.tokens IS
'one-time tokens; written by issue_token and consume_token';

SELECT pg_catalog.pg_extension_config_dump('idempotency.tokens', '');
REVOKE ALL ON TABLE idempotency.tokens FROM PUBLIC;
GRANT SELECT ON TABLE idempotency.tokens TO pg_database_owner;

/* a role's own tokens, and why one was refused */
CREATE VIEW idempotency.my_tokens WITH (security_barrier) AS
	SELECT t.token, t.scope, t.issued_at, t.expires_at, t.consumed_at,
		   CASE WHEN t.consumed_at IS NOT NULL THEN 'used'
				WHEN t.expires_at OPERATOR(pg_catalog.<=) pg_catalog.now() THEN 'expired'
				ELSE 'unused' END AS state
	  FROM idempotency.tokens AS t
	 WHERE t.owner OPERATOR(pg_catalog.=) idempotency.owner_name();

REVOKE ALL ON TABLE idempotency.my_tokens FROM PUBLIC;

CREATE FUNCTION idempotency.issue_token(scope pg_catalog.text DEFAULT '',
										ttl pg_catalog.interval DEFAULT '10 minutes')
RETURNS idempotency.key
AS 'MODULE_PATHNAME', 'idempotency_issue_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.issue_token(pg_catalog.text, pg_catalog.interval) IS
'a new one-time token (128 random bits) for the calling role';

CREATE FUNCTION idempotency.consume_token(token pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_consume_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.consume_token(pg_catalog.text, pg_catalog.text) IS
'true exactly once for an unexpired token; false for used, expired or unknown tokens alike';

REVOKE ALL ON FUNCTION idempotency.issue_token(pg_catalog.text, pg_catalog.interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.consume_token(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

--
-- Statistics
--

CREATE FUNCTION idempotency.stats(OUT begins_execute pg_catalog.int8,
								  OUT begins_replay pg_catalog.int8,
								  OUT begins_in_progress pg_catalog.int8,
								  OUT takeovers pg_catalog.int8,
								  OUT request_mismatches pg_catalog.int8,
								  OUT finishes pg_catalog.int8,
								  OUT abandons pg_catalog.int8,
								  OUT inbox_new pg_catalog.int8,
								  OUT inbox_duplicates pg_catalog.int8,
								  OUT tokens_issued pg_catalog.int8,
								  OUT tokens_consumed pg_catalog.int8,
								  OUT transitions_checked pg_catalog.int8,
								  OUT transitions_rejected pg_catalog.int8,
								  OUT stale_writes pg_catalog.int8,
								  OUT rows_cleaned pg_catalog.int8,
								  OUT stats_reset pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

REVOKE ALL ON FUNCTION idempotency.stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idempotency.stats() TO pg_monitor;

CREATE VIEW idempotency.stats AS SELECT * FROM idempotency.stats();

COMMENT ON VIEW idempotency.stats IS
'what the extension has done since the last reset, across all databases (needs shared_preload_libraries)';

REVOKE ALL ON TABLE idempotency.stats FROM PUBLIC;
GRANT SELECT ON TABLE idempotency.stats TO pg_monitor;

CREATE FUNCTION idempotency.stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION idempotency.stats_reset() FROM PUBLIC;

--
-- Granting the API to application roles
--

/*
 * grant_usage(role): what an application role needs, and nothing else: the
 * registry's three functions and its own records, the inbox, tokens (and
 * its own tokens), the outbox (and its own messages) and key locks.  README
 * ("Installation" and "Reference") and the COMMENT below list the same
 * objects; test/t/010_readme.pl checks that they name everything granted
 * here.  The role is a regrole, printed
 * quoted by format('%s'), so its name cannot inject anything.
 */
CREATE FUNCTION idempotency.grant_usage(role pg_catalog.regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF role IS NULL THEN
		RAISE EXCEPTION 'role must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	EXECUTE format('GRANT EXECUTE ON FUNCTION idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean), '
				   'idempotency.idempotent_finish(text, jsonb, text, integer, boolean, integer, bytea, interval, jsonb), '
				   'idempotency.idempotent_abandon(text, text, integer), '
				   'idempotency.lookup(text, text, jsonb) TO %s', role);
	EXECUTE format('GRANT SELECT ON idempotency.my_records TO %s', role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION idempotency.inbox_receive(text, text, interval), '
				   'idempotency.inbox_receive_batch(text, text[], interval), '
				   'idempotency.lock(text, text), '
				   'idempotency.try_lock(text, text), '
				   'idempotency.issue_token(text, interval), '
				   'idempotency.consume_token(text, text), '
				   'idempotency.outbox_send(text, jsonb, text, jsonb, text), '
				   'idempotency.outbox_fetch(integer, interval), '
				   'idempotency.outbox_ack(bigint, text[], interval) TO %s', role);
	EXECUTE format('GRANT SELECT ON idempotency.my_tokens, idempotency.my_outbox TO %s', role);
END;
$$;

COMMENT ON FUNCTION idempotency.grant_usage(pg_catalog.regrole) IS
'grant a role the application API and nothing else: EXECUTE on idempotent_begin, idempotent_finish, idempotent_abandon, lookup, inbox_receive, inbox_receive_batch, issue_token, consume_token, outbox_send, outbox_fetch, outbox_ack, lock and try_lock, and SELECT on my_records, my_tokens and my_outbox';

REVOKE ALL ON FUNCTION idempotency.grant_usage(pg_catalog.regrole) FROM PUBLIC;

--
-- Records belong to a role name: what an administrator does after DROP ROLE
-- and ALTER ROLE ... RENAME (README, "Security")
--

CREATE FUNCTION idempotency.forget_role(role_name pg_catalog.text)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'idempotency_forget_role'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.forget_role(pg_catalog.text) IS
'delete every record, inbox entry, token and outbox message stored under a role name in this database; returns how many';

REVOKE ALL ON FUNCTION idempotency.forget_role(pg_catalog.text) FROM PUBLIC;

CREATE FUNCTION idempotency.rename_owner(old_name pg_catalog.text, new_name pg_catalog.text)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'idempotency_rename_owner'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.rename_owner(pg_catalog.text, pg_catalog.text) IS
'move every record, inbox entry, token and outbox message from one role name to another in this database; returns how many';

REVOKE ALL ON FUNCTION idempotency.rename_owner(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

GRANT USAGE ON SCHEMA idempotency TO PUBLIC;

--
-- Citus
--

/*
 * Scaling out with Citus (README, "Scaling out" and its "Citus rules").  Nothing
 * above calls Citus, whose hooks are off inside extension scripts: an
 * administrator runs citus_setup() on the coordinator after CREATE
 * EXTENSION, and the C code notices which tables Citus distributes
 * (src/citus.c).
 */

/*
 * The caller's records and tokens, read as the tables' owner, as every C
 * function reads them.  citus_setup() points my_records and my_tokens at
 * these: Citus checks shard privileges as the caller, who has none.  They
 * return only the caller's own rows, so, like the pure functions, they are
 * left to PUBLIC; reading the views still takes a grant.
 */
CREATE FUNCTION idempotency.citus_my_records(OUT key idempotency.key,
											 OUT scope pg_catalog.text,
											 OUT status pg_catalog.text,
											 OUT attempt pg_catalog.int4,
											 OUT created_at pg_catalog.timestamptz,
											 OUT updated_at pg_catalog.timestamptz,
											 OUT lease_until pg_catalog.timestamptz,
											 OUT expires_at pg_catalog.timestamptz,
											 OUT expired pg_catalog.bool,
											 OUT response pg_catalog.jsonb,
											 OUT status_code pg_catalog.int4,
											 OUT body pg_catalog.bytea,
											 OUT headers pg_catalog.jsonb,
											 OUT fingerprint pg_catalog.bytea)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_citus_my_records'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_my_records() IS
'the calling role''s records, read as the registry''s owner (my_records under Citus)';

CREATE FUNCTION idempotency.citus_my_tokens(OUT token idempotency.key,
											OUT scope pg_catalog.text,
											OUT issued_at pg_catalog.timestamptz,
											OUT expires_at pg_catalog.timestamptz,
											OUT consumed_at pg_catalog.timestamptz,
											OUT state pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_citus_my_tokens'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_my_tokens() IS
'the calling role''s tokens, read as the tokens table''s owner (my_tokens under Citus)';

/*
 * citus_require_coordinator(): refuse where Citus is not installed in this
 * database, or on a node that is not the coordinator (Citus group 0, which
 * holds even before any node is registered, unlike citus_is_coordinator()).
 */
CREATE FUNCTION idempotency.citus_require_coordinator()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	group_id int4;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_extension AS e WHERE e.extname = 'citus') THEN
		RAISE EXCEPTION 'extension "citus" is not installed in this database'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Put citus first in shared_preload_libraries, restart, and run CREATE EXTENSION citus.';
	END IF;
	SELECT g.groupid INTO group_id FROM pg_dist_local_group AS g;
	IF group_id IS DISTINCT FROM 0 THEN
		RAISE EXCEPTION 'this node is not the Citus coordinator'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = format('This node is in Citus group %s; the coordinator is group 0.', group_id),
				  HINT = 'Run it on the coordinator.';
	END IF;
END;
$$;

COMMENT ON FUNCTION idempotency.citus_require_coordinator() IS
'raise an error unless this is the Citus coordinator (citus_setup and citus_drop_tables)';

REVOKE ALL ON FUNCTION idempotency.citus_require_coordinator() FROM PUBLIC;

/*
 * citus_setup(): distribute the tables and the functions, once, on the
 * coordinator; running it again changes nothing but what was granted since.
 *
 * - registry by key, in a co-location group of its own, and tokens by token
 *   in the same group, so that idempotent_begin(..., require_token) finds
 *   both rows on one node; inbox by message_id; outbox by ordering_key, in
 *   a group of its own (src/outbox.c says how its statements reach the
 *   shards);
 * - state_machines becomes a reference table, copied to every node, with
 *   its invalidation trigger (which needs citus.enable_unsafe_triggers while
 *   the table is distributed); state_history stays node-local: a trigger on
 *   a shard may not write to another distributed table;
 * - idempotent_begin, idempotent_finish, idempotent_abandon and
 *   consume_token are distributed by their key, inbox_receive by its message
 *   id, so that Citus can run a call on the node holding the row;
 * - my_records, my_tokens and my_outbox read through owner-run functions
 *   (citus_my_outbox is defined with the outbox, below);
 * - the privileges granted on the extension's functions and views are
 *   copied to every other node (Citus does not copy them for an extension's
 *   objects), where delegated calls check them.
 *
 * Tables are distributed with their rows, which Citus copies into the
 * shards.  Replication factor 1: every shard has one placement, which the
 * cleanup deletes from.
 */
CREATE FUNCTION idempotency.citus_setup()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	saved_triggers text;
	saved_factor text;
	saved_ddl text;
	t record;
	f record;
	node record;
	views text;
	grants text;
BEGIN
	PERFORM idempotency.citus_require_coordinator();

	saved_triggers := current_setting('citus.enable_unsafe_triggers');
	saved_factor := current_setting('citus.shard_replication_factor');
	saved_ddl := current_setting('citus.enable_ddl_propagation');
	PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
	PERFORM set_config('citus.shard_replication_factor', '1', true);

	FOR t IN
		SELECT v.rel::regclass AS rel, v.col, v.colocate
		  FROM (VALUES (1, 'idempotency.registry', 'key', 'none'),
					   (2, 'idempotency.tokens', 'token', 'idempotency.registry'),
					   (3, 'idempotency.inbox', 'message_id', 'none'),
					   (4, 'idempotency.state_machines', NULL, NULL),
					   (5, 'idempotency.outbox', 'ordering_key', 'none')) AS v(ord, rel, col, colocate)
		 ORDER BY v.ord
	LOOP
		CONTINUE WHEN EXISTS (SELECT FROM pg_dist_partition AS p WHERE p.logicalrelid = t.rel);
		IF t.col IS NULL THEN
			PERFORM create_reference_table(t.rel);
		ELSE
			PERFORM create_distributed_table(t.rel, t.col, colocate_with => t.colocate);
		END IF;
		PERFORM truncate_local_data_after_distributing_table(t.rel);
	END LOOP;

	FOR f IN
		SELECT v.fn::regprocedure AS fn, v.arg, v.colocate
		  FROM (VALUES ('idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean)', '$1', 'idempotency.registry'),
					   ('idempotency.idempotent_finish(text, jsonb, text, integer, boolean, integer, bytea, interval, jsonb)', '$1', 'idempotency.registry'),
					   ('idempotency.idempotent_abandon(text, text, integer)', '$1', 'idempotency.registry'),
					   ('idempotency.lookup(text, text, jsonb)', '$1', 'idempotency.registry'),
					   ('idempotency.consume_token(text, text)', '$1', 'idempotency.tokens'),
					   ('idempotency.inbox_receive(text, text, interval)', '$2', 'idempotency.inbox')) AS v(fn, arg, colocate)
	LOOP
		CONTINUE WHEN EXISTS (SELECT FROM pg_dist_object AS o
							   WHERE o.classid = 'pg_proc'::regclass AND o.objid = f.fn
								 AND o.distribution_argument_index IS NOT NULL);
		PERFORM create_distributed_function(f.fn, f.arg, colocate_with => f.colocate);
	END LOOP;

	PERFORM set_config('citus.enable_unsafe_triggers', saved_triggers, true);
	PERFORM set_config('citus.shard_replication_factor', saved_factor, true);

	/*
	 * The views, here and on the other nodes; then, there, the privileges
	 * on the extension's functions and views: each grantee the coordinator
	 * knows of, and PUBLIC, gets exactly its privileges here (everything
	 * revoked, then granted again).  One statement per node.
	 */
	views := $views$
		CREATE OR REPLACE VIEW idempotency.my_records WITH (security_barrier) AS
			SELECT r.key, r.scope COLLATE pg_catalog."C" AS scope, r.status, r.attempt,
				   r.created_at, r.updated_at, r.lease_until, r.expires_at, r.expired, r.response,
				   r.status_code, r.body, r.headers, r.fingerprint
			  FROM idempotency.citus_my_records() AS r;
		CREATE OR REPLACE VIEW idempotency.my_tokens WITH (security_barrier) AS
			SELECT t.token, t.scope COLLATE pg_catalog."C" AS scope, t.issued_at, t.expires_at,
				   t.consumed_at, t.state
			  FROM idempotency.citus_my_tokens() AS t;
		CREATE OR REPLACE VIEW idempotency.my_outbox WITH (security_barrier) AS
			SELECT o.message_id COLLATE pg_catalog."C" AS message_id,
				   o.topic COLLATE pg_catalog."C" AS topic,
				   o.ordering_key COLLATE pg_catalog."C" AS ordering_key, o.seq, o.payload,
				   o.headers, o.sent_at, o.attempt, o.deliveries, o.lease_until,
				   o.delivered_at, o.expires_at,
				   CASE WHEN o.delivered_at IS NOT NULL THEN 'delivered'
						WHEN o.lease_until OPERATOR(pg_catalog.>) pg_catalog.now() THEN 'leased'
						ELSE 'pending' END AS state
			  FROM idempotency.citus_my_outbox() AS o;
	$views$;
	PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
	EXECUTE views;
	PERFORM set_config('citus.enable_ddl_propagation', saved_ddl, true);

	SELECT string_agg(g.cmd, E';\n' ORDER BY g.obj, g.grantee) INTO STRICT grants
	  FROM (SELECT o.obj, a.grantee,
				   format('REVOKE ALL ON %s %s FROM %s', o.kind, o.obj, a.grantee_name)
				   || coalesce('; GRANT ' || a.privs || format(' ON %s %s TO %s', o.kind, o.obj, a.grantee_name), '')
				   || coalesce('; GRANT ' || a.grantable
							   || format(' ON %s %s TO %s WITH GRANT OPTION', o.kind, o.obj, a.grantee_name), '') AS cmd
			  FROM (SELECT 'FUNCTION' AS kind, p.oid::regprocedure::text AS obj,
						   coalesce(p.proacl, acldefault('f', p.proowner)) AS acl, p.proowner AS owner
					  FROM pg_proc AS p
					  JOIN pg_depend AS d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
					 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
					   AND d.refobjid = (SELECT e.oid FROM pg_extension AS e WHERE e.extname = 'idempotency')
					UNION ALL
					SELECT 'TABLE', c.oid::regclass::text,
						   coalesce(c.relacl, acldefault('r', c.relowner)), c.relowner
					  FROM pg_class AS c
					 WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind = 'v') AS o,
				   LATERAL (SELECT x.grantee,
								   CASE WHEN x.grantee = 0 THEN 'PUBLIC'
										ELSE quote_ident(pg_get_userbyid(x.grantee)) END AS grantee_name,
								   string_agg(x.privilege_type, ', ') FILTER (WHERE NOT x.is_grantable) AS privs,
								   string_agg(x.privilege_type, ', ') FILTER (WHERE x.is_grantable) AS grantable
							  FROM aclexplode(o.acl) AS x
							 WHERE x.grantee <> o.owner
							 GROUP BY x.grantee
							UNION ALL
							SELECT 0, 'PUBLIC', NULL, NULL
							 WHERE NOT EXISTS (SELECT FROM aclexplode(o.acl) AS x WHERE x.grantee = 0)) AS a) AS g;

	FOR node IN
		SELECT * FROM run_command_on_workers(format('DO %L',
			format('BEGIN SET LOCAL citus.enable_ddl_propagation = off; %s %s; END', views, grants)))
	LOOP
		IF NOT node.success THEN
			RAISE EXCEPTION 'could not set up the views and privileges of extension "idempotency" on node %:%',
				node.nodename, node.nodeport
				USING ERRCODE = 'connection_exception', DETAIL = node.result;
		END IF;
	END LOOP;
END;
$$;

COMMENT ON FUNCTION idempotency.citus_setup() IS
'distribute the extension''s tables and functions with Citus; run on the coordinator, again after granting by hand';

REVOKE ALL ON FUNCTION idempotency.citus_setup() FROM PUBLIC;

/*
 * citus_drop_tables(): drop the extension's distributed tables, with their
 * rows, so that DROP EXTENSION can follow.  Citus cannot drop, in the same
 * DROP EXTENSION, a distributed table and the type it is distributed by
 * (idempotency.key): its shards would stay behind.  Each table leaves the
 * extension first, then goes with DROP TABLE, which Citus takes to every
 * shard.
 */
CREATE FUNCTION idempotency.citus_drop_tables()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	t regclass;
BEGIN
	PERFORM idempotency.citus_require_coordinator();
	FOR t IN
		SELECT p.logicalrelid
		  FROM pg_dist_partition AS p
		  JOIN pg_class AS c ON c.oid = p.logicalrelid
		 WHERE c.relnamespace = 'idempotency'::regnamespace
		 ORDER BY c.relname
	LOOP
		EXECUTE format('ALTER EXTENSION idempotency DROP TABLE %s', t);
		EXECUTE format('DROP TABLE %s', t);
	END LOOP;
END;
$$;

COMMENT ON FUNCTION idempotency.citus_drop_tables() IS
'drop the extension''s distributed tables and their rows, before DROP EXTENSION on a Citus cluster';

REVOKE ALL ON FUNCTION idempotency.citus_drop_tables() FROM PUBLIC;

/*
 * citus_status(): how each table, API function and view of the extension is
 * placed: distributed (by which column or argument, in which co-location
 * group, in how many shards), reference, owner-run (the views after
 * citus_setup()) or local.  Without Citus, everything is local.
 */
CREATE FUNCTION idempotency.citus_status(OUT object pg_catalog.text,
										 OUT kind pg_catalog.text,
										 OUT distribution pg_catalog.text,
										 OUT distributed_by pg_catalog.text,
										 OUT colocation_id pg_catalog.int4,
										 OUT shards pg_catalog.int4)
RETURNS SETOF pg_catalog.record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	RETURN QUERY
		SELECT v.oid::regclass::text, 'view',
			   CASE WHEN pg_get_viewdef(v.oid) LIKE '%citus_my_%' THEN 'owner-run' ELSE 'local' END,
			   NULL::text, NULL::int4, NULL::int4
		  FROM pg_class AS v
		 WHERE v.relnamespace = 'idempotency'::regnamespace AND v.relkind = 'v'
		   AND v.relname = ANY (ARRAY['my_records', 'my_tokens', 'my_outbox']);
	IF NOT EXISTS (SELECT FROM pg_extension AS e WHERE e.extname = 'citus') THEN
		RETURN QUERY
			SELECT c.oid::regclass::text, 'table', 'local', NULL::text, NULL::int4, NULL::int4
			  FROM pg_class AS c
			 WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind = 'r'
			 ORDER BY 1;
		RETURN;
	END IF;
	RETURN QUERY
		SELECT c.oid::regclass::text, 'table',
			   CASE WHEN p.partmethod = 'h' THEN 'distributed'
					WHEN p.partmethod = 'n' AND p.repmodel = 't' THEN 'reference'
					WHEN p.partmethod IS NOT NULL THEN 'citus local'
					ELSE 'local' END,
			   CASE WHEN p.partmethod = 'h' THEN column_to_column_name(p.logicalrelid, p.partkey) END,
			   p.colocationid,
			   CASE WHEN p.partmethod IS NOT NULL
					THEN (SELECT count(*)::int4 FROM pg_dist_shard AS s WHERE s.logicalrelid = c.oid) END
		  FROM pg_class AS c
		  LEFT JOIN pg_dist_partition AS p ON p.logicalrelid = c.oid
		 WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind = 'r'
		 ORDER BY 1;
	RETURN QUERY
		SELECT f.oid::regprocedure::text, 'function',
			   CASE WHEN o.distribution_argument_index IS NOT NULL THEN 'distributed' ELSE 'local' END,
			   f.proargnames[o.distribution_argument_index + 1],
			   o.colocationid, NULL::int4
		  FROM pg_proc AS f
		  LEFT JOIN pg_dist_object AS o ON o.classid = 'pg_proc'::regclass AND o.objid = f.oid
		 WHERE f.pronamespace = 'idempotency'::regnamespace
		   AND f.proname = ANY (ARRAY['idempotent_begin', 'idempotent_finish', 'idempotent_abandon',
									  'lookup', 'consume_token', 'inbox_receive', 'inbox_receive_batch',
									  'issue_token', 'outbox_send', 'outbox_fetch', 'outbox_ack'])
		 ORDER BY 1;
END;
$$;

COMMENT ON FUNCTION idempotency.citus_status() IS
'how Citus places each table, API function and view of the extension';

--
-- Descriptions of the objects not described where they are created
--

COMMENT ON FUNCTION idempotency.key_in(pg_catalog.cstring) IS 'text input of idempotency.key';
COMMENT ON FUNCTION idempotency.key_out(idempotency.key) IS 'text output of idempotency.key';
COMMENT ON FUNCTION idempotency.key_recv(pg_catalog.internal) IS 'binary input of idempotency.key, with the same checks as its text input';
COMMENT ON FUNCTION idempotency.key_send(idempotency.key) IS 'binary output of idempotency.key';
COMMENT ON FUNCTION idempotency.key(pg_catalog.text) IS 'a text as an idempotency key, checked';
COMMENT ON FUNCTION idempotency.text(idempotency.key) IS 'an idempotency key as text';
COMMENT ON CAST (pg_catalog.text AS idempotency.key) IS 'checked, on assignment';
COMMENT ON CAST (pg_catalog.varchar AS idempotency.key) IS 'checked, on assignment';
COMMENT ON CAST (idempotency.key AS pg_catalog.text) IS 'implicit: a key is a valid text';
COMMENT ON FUNCTION idempotency.cleanup_status() IS 'the background cleanup''s status per database, from shared memory (behind the cleanup_status view)';
COMMENT ON FUNCTION idempotency.stats() IS 'the counters behind the stats view';
COMMENT ON FUNCTION idempotency.stats_reset() IS 'set every counter of the stats view back to zero (needs shared_preload_libraries)';
COMMENT ON FUNCTION idempotency.drop_state_machine(pg_catalog.text) IS 'drop a state machine that no check_transition trigger uses';
COMMENT ON FUNCTION idempotency.state_machine_transitions(pg_catalog.text) IS 'a state machine''s transitions, one row each';
COMMENT ON FUNCTION idempotency.state_machines_changed() IS 'trigger on state_machines: tells every backend''s cache that a definition changed';
COMMENT ON VIEW idempotency.my_records IS 'the calling role''s idempotency records';
COMMENT ON VIEW idempotency.my_tokens IS 'the calling role''s one-time tokens, and whether each is unused, used or expired';

--
-- Transactional outbox
--

/*
 * The outbox's ordering keys: text, compared bytewise.  A type of its own,
 * as the inbox's message ids have, so that under Citus the outbox's
 * co-location group belongs to this type only: a user's table distributed
 * by a text column never lands in it.
 */
CREATE DOMAIN idempotency.ordering_key AS pg_catalog.text COLLATE pg_catalog."C";

COMMENT ON DOMAIN idempotency.ordering_key IS
'an ordering key in the outbox: text compared bytewise';

/*
 * One row per message sent with outbox_send, in the sender's transaction:
 * the message exists, and will be delivered, if and only if that
 * transaction commits.  A relay takes ready messages with outbox_fetch
 * under a lease and a fencing attempt, delivers them and acknowledges them
 * with outbox_ack; a delivered message stays for its ttl, so that its id is
 * refused if sent again, and the cleanup then deletes it (src/outbox.c).
 *
 * seq orders the undelivered messages of one (owner, ordering_key): the
 * partial unique index serialises two senders of one key (the second waits
 * for the first to commit, then takes the next number), so numbers follow
 * commit order.  A message sent without an ordering key uses its message
 * id as one.  Every unique index includes ordering_key, the column
 * citus_setup() distributes the table by (README, "Citus rules" 1).
 */
CREATE TABLE idempotency.outbox (
	owner		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	ordering_key idempotency.ordering_key NOT NULL,
	seq			pg_catalog.int8 NOT NULL,
	message_id	pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	topic		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	payload		pg_catalog.jsonb NOT NULL,
	headers		pg_catalog.jsonb,
	sent_at		pg_catalog.timestamptz NOT NULL,
	attempt		pg_catalog.int8 NOT NULL DEFAULT 0,
	deliveries	pg_catalog.int4 NOT NULL DEFAULT 0,
	lease_until pg_catalog.timestamptz,
	delivered_at pg_catalog.timestamptz,
	expires_at	pg_catalog.timestamptz,
	CONSTRAINT outbox_pkey PRIMARY KEY (message_id, ordering_key, owner)
) WITH (fillfactor = 80);

CREATE UNIQUE INDEX outbox_pending_idx ON idempotency.outbox (owner, ordering_key, seq)
	WHERE delivered_at IS NULL;

CREATE INDEX outbox_expires_at_idx ON idempotency.outbox (expires_at)
	WHERE expires_at IS NOT NULL;

COMMENT ON TABLE idempotency.outbox IS
'messages sent in a transaction, delivered once it commits; written by outbox_send, outbox_fetch and outbox_ack';

/* fencing attempts: one number per batch handed to a relay, never reused */
CREATE SEQUENCE idempotency.outbox_attempt_seq AS pg_catalog.int8;

COMMENT ON SEQUENCE idempotency.outbox_attempt_seq IS
'the fencing attempt of each batch outbox_fetch hands out';

SELECT pg_catalog.pg_extension_config_dump('idempotency.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.outbox_attempt_seq', '');
REVOKE ALL ON TABLE idempotency.outbox FROM PUBLIC;
REVOKE ALL ON SEQUENCE idempotency.outbox_attempt_seq FROM PUBLIC;
-- the database's owner may read them, so that its pg_dump of the whole
-- database works (as for the registry)
GRANT SELECT ON TABLE idempotency.outbox TO pg_database_owner;
GRANT SELECT ON SEQUENCE idempotency.outbox_attempt_seq TO pg_database_owner;

/* a role's own messages, and where each stands */
CREATE VIEW idempotency.my_outbox WITH (security_barrier) AS
	SELECT o.message_id, o.topic, o.ordering_key::pg_catalog.text AS ordering_key, o.seq,
		   o.payload, o.headers, o.sent_at,
		   o.attempt, o.deliveries, o.lease_until, o.delivered_at, o.expires_at,
		   CASE WHEN o.delivered_at IS NOT NULL THEN 'delivered'
				WHEN o.lease_until OPERATOR(pg_catalog.>) pg_catalog.now() THEN 'leased'
				ELSE 'pending' END AS state
	  FROM idempotency.outbox AS o
	 WHERE o.owner OPERATOR(pg_catalog.=) idempotency.owner_name();

COMMENT ON VIEW idempotency.my_outbox IS
'the calling role''s outbox messages, and whether each is pending, leased or delivered';

REVOKE ALL ON TABLE idempotency.my_outbox FROM PUBLIC;

/*
 * The caller's messages, read as the outbox's owner: citus_setup() points
 * my_outbox at this, as it points my_records and my_tokens at theirs (Citus
 * checks shard privileges as the caller).  Left to PUBLIC like them.
 */
CREATE FUNCTION idempotency.citus_my_outbox(OUT message_id pg_catalog.text,
											OUT topic pg_catalog.text,
											OUT ordering_key pg_catalog.text,
											OUT seq pg_catalog.int8,
											OUT payload pg_catalog.jsonb,
											OUT headers pg_catalog.jsonb,
											OUT sent_at pg_catalog.timestamptz,
											OUT attempt pg_catalog.int8,
											OUT deliveries pg_catalog.int4,
											OUT lease_until pg_catalog.timestamptz,
											OUT delivered_at pg_catalog.timestamptz,
											OUT expires_at pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_citus_my_outbox'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_my_outbox() IS
'the calling role''s outbox messages, read as the outbox''s owner (my_outbox under Citus)';

CREATE FUNCTION idempotency.outbox_send(topic pg_catalog.text,
										payload pg_catalog.jsonb,
										ordering_key pg_catalog.text DEFAULT NULL,
										headers pg_catalog.jsonb DEFAULT NULL,
										message_id pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_outbox_send'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.outbox_send(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text) IS
'record a message in the calling transaction, delivered if and only if it commits; returns the message id';

CREATE FUNCTION idempotency.outbox_fetch(batch_size pg_catalog.int4 DEFAULT 100,
										 lease pg_catalog.interval DEFAULT '1 minute',
										 OUT message_id pg_catalog.text,
										 OUT topic pg_catalog.text,
										 OUT ordering_key pg_catalog.text,
										 OUT payload pg_catalog.jsonb,
										 OUT headers pg_catalog.jsonb,
										 OUT sent_at pg_catalog.timestamptz,
										 OUT attempt pg_catalog.int8,
										 OUT deliveries pg_catalog.int4,
										 OUT lease_until pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_outbox_fetch'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.outbox_fetch(pg_catalog.int4, pg_catalog.interval) IS
'hand a relay a batch of ready messages under a lease: the oldest undelivered message of each ordering key';

CREATE FUNCTION idempotency.outbox_ack(attempt pg_catalog.int8,
									   message_ids pg_catalog.text[],
									   ttl pg_catalog.interval DEFAULT '7 days')
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'idempotency_outbox_ack'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.outbox_ack(pg_catalog.int8, pg_catalog.text[], pg_catalog.interval) IS
'mark messages of a batch delivered, if that batch still holds them; returns how many were newly marked';

REVOKE ALL ON FUNCTION idempotency.outbox_send(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.outbox_fetch(pg_catalog.int4, pg_catalog.interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.outbox_ack(pg_catalog.int8, pg_catalog.text[], pg_catalog.interval) FROM PUBLIC;
