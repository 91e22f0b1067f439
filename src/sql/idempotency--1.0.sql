/* src/sql/idempotency--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION idempotency" to load this file. \quit

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
CREATE CAST (idempotency.key AS pg_catalog.text)
	WITHOUT FUNCTION AS IMPLICIT;

-- comparison
CREATE FUNCTION idempotency.key_cmp(idempotency.key, idempotency.key)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE FUNCTION idempotency.key_eq(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE FUNCTION idempotency.key_ne(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE FUNCTION idempotency.key_lt(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE FUNCTION idempotency.key_le(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE FUNCTION idempotency.key_gt(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE FUNCTION idempotency.key_ge(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE FUNCTION idempotency.key_hash(idempotency.key)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE FUNCTION idempotency.key_hash_extended(idempotency.key, pg_catalog.int8)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE OPERATOR idempotency.= (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_eq,
	COMMUTATOR = OPERATOR(idempotency.=), NEGATOR = OPERATOR(idempotency.<>),
	RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel,
	HASHES, MERGES
);

CREATE OPERATOR idempotency.<> (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_ne,
	COMMUTATOR = OPERATOR(idempotency.<>), NEGATOR = OPERATOR(idempotency.=),
	RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel
);

CREATE OPERATOR idempotency.< (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_lt,
	COMMUTATOR = OPERATOR(idempotency.>), NEGATOR = OPERATOR(idempotency.>=),
	RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel
);

CREATE OPERATOR idempotency.<= (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_le,
	COMMUTATOR = OPERATOR(idempotency.>=), NEGATOR = OPERATOR(idempotency.>),
	RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel
);

CREATE OPERATOR idempotency.> (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_gt,
	COMMUTATOR = OPERATOR(idempotency.<), NEGATOR = OPERATOR(idempotency.<=),
	RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel
);

CREATE OPERATOR idempotency.>= (
	LEFTARG = idempotency.key, RIGHTARG = idempotency.key,
	FUNCTION = idempotency.key_ge,
	COMMUTATOR = OPERATOR(idempotency.<=), NEGATOR = OPERATOR(idempotency.<),
	RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel
);

CREATE OPERATOR CLASS idempotency.key_ops
	DEFAULT FOR TYPE idempotency.key USING btree AS
		OPERATOR 1 idempotency.< ,
		OPERATOR 2 idempotency.<= ,
		OPERATOR 3 idempotency.= ,
		OPERATOR 4 idempotency.>= ,
		OPERATOR 5 idempotency.> ,
		FUNCTION 1 idempotency.key_cmp(idempotency.key, idempotency.key);

CREATE OPERATOR CLASS idempotency.key_hash_ops
	DEFAULT FOR TYPE idempotency.key USING hash AS
		OPERATOR 1 idempotency.= ,
		FUNCTION 1 idempotency.key_hash(idempotency.key),
		FUNCTION 2 idempotency.key_hash_extended(idempotency.key, pg_catalog.int8);

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

CREATE FUNCTION idempotency.parse_key(key idempotency.key,
									  OUT prefix pg_catalog.text,
									  OUT business_id pg_catalog.text,
									  OUT operation pg_catalog.text,
									  OUT version pg_catalog.text,
									  OUT checksum pg_catalog.text,
									  OUT checksum_ok pg_catalog.bool)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_parse_key'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 1;

COMMENT ON FUNCTION idempotency.parse_key(idempotency.key) IS
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
 * compiled by every INSERT and UPDATE statement.  owner is the role's name, not its OID (SCALE_OUT.md rule 6);
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
	created_at	pg_catalog.timestamptz NOT NULL,
	updated_at	pg_catalog.timestamptz NOT NULL,
	lease_until pg_catalog.timestamptz,
	expires_at	pg_catalog.timestamptz NOT NULL,
	CONSTRAINT registry_pkey PRIMARY KEY (key, scope, owner)
) WITH (fillfactor = 80);

-- the cleanup's way to the oldest expired records
CREATE INDEX registry_expires_at_idx ON idempotency.registry (expires_at);

COMMENT ON TABLE idempotency.registry IS
'idempotency records; read your own through idempotency.my_records';

REVOKE ALL ON TABLE idempotency.registry FROM PUBLIC;

-- pg_dump keeps the records
SELECT pg_catalog.pg_extension_config_dump('idempotency.registry', '');

/*
 * A role's own records.  current_user is evaluated for the caller, and the
 * security barrier keeps a caller's leaky function from seeing other rows.
 */
CREATE VIEW idempotency.my_records WITH (security_barrier) AS
	SELECT r.key, r.scope, r.status, r.attempt, r.created_at, r.updated_at,
		   r.lease_until, r.expires_at,
		   r.expires_at OPERATOR(pg_catalog.<=) pg_catalog.now() AS expired,
		   r.response
	  FROM idempotency.registry AS r
	 WHERE r.owner OPERATOR(pg_catalog.=) CURRENT_USER::pg_catalog.text;

REVOKE ALL ON TABLE idempotency.my_records FROM PUBLIC;

CREATE FUNCTION idempotency.idempotent_begin(key idempotency.key,
											 scope pg_catalog.text DEFAULT '',
											 request pg_catalog.jsonb DEFAULT NULL,
											 ttl pg_catalog.interval DEFAULT '24 hours',
											 lease pg_catalog.interval DEFAULT '5 minutes',
											 wait pg_catalog.bool DEFAULT true,
											 OUT outcome pg_catalog.text,
											 OUT status pg_catalog.text,
											 OUT response pg_catalog.jsonb,
											 OUT attempt pg_catalog.int4,
											 OUT expires_at pg_catalog.timestamptz,
											 OUT lease_until pg_catalog.timestamptz)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_idempotent_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_begin(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool) IS
'claim an idempotency key: outcome execute, replay or in_progress';

CREATE FUNCTION idempotency.idempotent_finish(key idempotency.key,
											  response pg_catalog.jsonb,
											  scope pg_catalog.text DEFAULT '',
											  attempt pg_catalog.int4 DEFAULT NULL,
											  failed pg_catalog.bool DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_idempotent_finish'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_finish(idempotency.key, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool) IS
'store the response of a claimed key, to be replayed to every retry';

CREATE FUNCTION idempotency.idempotent_abandon(key idempotency.key,
											   scope pg_catalog.text DEFAULT '',
											   attempt pg_catalog.int4 DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_idempotent_abandon'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_abandon(idempotency.key, pg_catalog.text, pg_catalog.int4) IS
'drop a claim so that the next idempotent_begin executes again';

REVOKE ALL ON FUNCTION idempotency.idempotent_begin(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.idempotent_finish(idempotency.key, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.idempotent_abandon(idempotency.key, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;

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
-- Granting the API to application roles
--

/*
 * grant_usage(role): what an application role needs to use the registry:
 * the three functions and its own records.  Plain SQL with format('%I'), so
 * the role name cannot inject anything.
 */
CREATE FUNCTION idempotency.grant_usage(role pg_catalog.regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	EXECUTE format('GRANT EXECUTE ON FUNCTION idempotency.idempotent_begin(idempotency.key, text, jsonb, interval, interval, boolean), '
				   'idempotency.idempotent_finish(idempotency.key, jsonb, text, integer, boolean), '
				   'idempotency.idempotent_abandon(idempotency.key, text, integer) TO %s', role);
	EXECUTE format('GRANT SELECT ON idempotency.my_records TO %s', role);
END;
$$;

COMMENT ON FUNCTION idempotency.grant_usage(pg_catalog.regrole) IS
'let a role claim, finish and abandon its own idempotency keys';

REVOKE ALL ON FUNCTION idempotency.grant_usage(pg_catalog.regrole) FROM PUBLIC;

GRANT USAGE ON SCHEMA idempotency TO PUBLIC;
