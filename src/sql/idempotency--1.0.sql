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
											 require_token pg_catalog.bool DEFAULT false,
											 OUT outcome pg_catalog.text,
											 OUT status pg_catalog.text,
											 OUT response pg_catalog.jsonb,
											 OUT attempt pg_catalog.int4,
											 OUT expires_at pg_catalog.timestamptz,
											 OUT lease_until pg_catalog.timestamptz)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_idempotent_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_begin(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool) IS
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

REVOKE ALL ON FUNCTION idempotency.idempotent_begin(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool) FROM PUBLIC;
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

CREATE TRIGGER state_machines_changed
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.state_machines
	FOR EACH STATEMENT EXECUTE FUNCTION idempotency.state_machines_changed();

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
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	user_trigger record;
BEGIN
	IF name IS NULL THEN
		RAISE EXCEPTION 'state machine name must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT t.tgname, t.tgrelid::regclass AS rel INTO user_trigger
	  FROM pg_trigger AS t
	 WHERE t.tgfoid = 'idempotency.check_transition()'::regprocedure
	   AND t.tgparentid = 0
	   AND t.tgnargs > 0
	   AND convert_from(substring(t.tgargs FROM 1 FOR position('\x00'::bytea IN t.tgargs) - 1),
						getdatabaseencoding()) = drop_state_machine.name
	 LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'cannot drop state machine "%" because trigger "%" on table % uses it',
			name, user_trigger.tgname, user_trigger.rel
			USING ERRCODE = 'dependent_objects_still_exist',
				  HINT = 'Drop the trigger first.';
	END IF;
	DELETE FROM idempotency.state_machines AS m WHERE m.name = drop_state_machine.name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'state machine "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
END;
$$;

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
 * level security shows a row only to roles that may read the table it
 * describes.  No primary key: history has no natural one (SCALE_OUT.md
 * rule 7 forbids inventing one with a serial).
 */
CREATE TABLE idempotency.state_history (
	table_name	pg_catalog.text NOT NULL,
	row_key		pg_catalog.jsonb NOT NULL,
	from_state	pg_catalog.text,
	to_state	pg_catalog.text NOT NULL,
	changed_at	pg_catalog.timestamptz NOT NULL,
	xid			pg_catalog.xid8 NOT NULL,
	role		pg_catalog.text NOT NULL,
	expires_at	pg_catalog.timestamptz NOT NULL
);

CREATE INDEX state_history_row_idx ON idempotency.state_history (table_name, row_key);
CREATE INDEX state_history_expires_at_idx ON idempotency.state_history (expires_at);

COMMENT ON TABLE idempotency.state_history IS
'state changes recorded by record_transition triggers; kept for idempotency.history_ttl';

SELECT pg_catalog.pg_extension_config_dump('idempotency.state_history', '');
ALTER TABLE idempotency.state_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY state_history_readers ON idempotency.state_history FOR SELECT
	USING (pg_catalog.has_table_privilege(pg_catalog.to_regclass(table_name), 'SELECT'));
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
 * One entry per (owner, consumer, message id), kept for its ttl.  The
 * primary key leads with the message id for the same reason as the
 * registry's leads with the key.
 */
CREATE TABLE idempotency.inbox (
	owner		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	consumer	pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	message_id	pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	received_at pg_catalog.timestamptz NOT NULL,
	expires_at	pg_catalog.timestamptz NOT NULL,
	CONSTRAINT inbox_pkey PRIMARY KEY (message_id, consumer, owner)
) WITH (fillfactor = 90);

CREATE INDEX inbox_expires_at_idx ON idempotency.inbox (expires_at);

COMMENT ON TABLE idempotency.inbox IS
'message ids seen by each consumer; written by inbox_receive and inbox_receive_batch';

SELECT pg_catalog.pg_extension_config_dump('idempotency.inbox', '');
REVOKE ALL ON TABLE idempotency.inbox FROM PUBLIC;

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

CREATE FUNCTION idempotency.lock(key idempotency.key, scope pg_catalog.text DEFAULT '')
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.lock(idempotency.key, pg_catalog.text) IS
'wait for a transaction-scoped lock on a key (node-local advisory lock)';

CREATE FUNCTION idempotency.try_lock(key idempotency.key, scope pg_catalog.text DEFAULT '')
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_try_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.try_lock(idempotency.key, pg_catalog.text) IS
'take a transaction-scoped lock on a key if it is free (node-local advisory lock)';

REVOKE ALL ON FUNCTION idempotency.lock(idempotency.key, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.try_lock(idempotency.key, pg_catalog.text) FROM PUBLIC;

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

/* a role's own tokens, and why one was refused */
CREATE VIEW idempotency.my_tokens WITH (security_barrier) AS
	SELECT t.token, t.scope, t.issued_at, t.expires_at, t.consumed_at,
		   CASE WHEN t.consumed_at IS NOT NULL THEN 'used'
				WHEN t.expires_at OPERATOR(pg_catalog.<=) pg_catalog.now() THEN 'expired'
				ELSE 'unused' END AS state
	  FROM idempotency.tokens AS t
	 WHERE t.owner OPERATOR(pg_catalog.=) CURRENT_USER::pg_catalog.text;

REVOKE ALL ON TABLE idempotency.my_tokens FROM PUBLIC;

CREATE FUNCTION idempotency.issue_token(scope pg_catalog.text DEFAULT '',
										ttl pg_catalog.interval DEFAULT '10 minutes')
RETURNS idempotency.key
AS 'MODULE_PATHNAME', 'idempotency_issue_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.issue_token(pg_catalog.text, pg_catalog.interval) IS
'a new one-time token (128 random bits) for the calling role';

CREATE FUNCTION idempotency.consume_token(token idempotency.key, scope pg_catalog.text DEFAULT '')
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_consume_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.consume_token(idempotency.key, pg_catalog.text) IS
'true exactly once for an unexpired token; false for used, expired or unknown tokens alike';

REVOKE ALL ON FUNCTION idempotency.issue_token(pg_catalog.text, pg_catalog.interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.consume_token(idempotency.key, pg_catalog.text) FROM PUBLIC;

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
	IF role IS NULL THEN
		RAISE EXCEPTION 'role must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	EXECUTE format('GRANT EXECUTE ON FUNCTION idempotency.idempotent_begin(idempotency.key, text, jsonb, interval, interval, boolean, boolean), '
				   'idempotency.idempotent_finish(idempotency.key, jsonb, text, integer, boolean), '
				   'idempotency.idempotent_abandon(idempotency.key, text, integer) TO %s', role);
	EXECUTE format('GRANT SELECT ON idempotency.my_records TO %s', role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION idempotency.inbox_receive(text, text, interval), '
				   'idempotency.inbox_receive_batch(text, text[], interval), '
				   'idempotency.lock(idempotency.key, text), '
				   'idempotency.try_lock(idempotency.key, text), '
				   'idempotency.issue_token(text, interval), '
				   'idempotency.consume_token(idempotency.key, text) TO %s', role);
	EXECUTE format('GRANT SELECT ON idempotency.my_tokens TO %s', role);
END;
$$;

COMMENT ON FUNCTION idempotency.grant_usage(pg_catalog.regrole) IS
'let a role claim, finish and abandon its own idempotency keys';

REVOKE ALL ON FUNCTION idempotency.grant_usage(pg_catalog.regrole) FROM PUBLIC;

GRANT USAGE ON SCHEMA idempotency TO PUBLIC;
