/* src/sql/idempotency--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idempotency UPDATE TO '1.1'" to load this file. \quit

/*
 * How an update script changes the extension's SQL objects.  CREATE
 * EXTENSION at the newest version runs the 1.0 install script and then each
 * update script in turn, so these scripts are the only definition of what
 * changed, for new installations and updated ones alike
 * (test/t/027_update.pl compares the two).
 *
 * 1. An installation's grants survive.  grant_usage() gave application
 *    roles EXECUTE and SELECT on the objects in idempotency.application_api,
 *    and the grantees of idempotent_begin are the application roles that
 *    records belong to (src/owner.c): a grant lost by an update would leave
 *    an application unable to call the API, or its records without an owner.
 *    - A function whose body or defaults change, with the same arguments and
 *      result, is changed with CREATE OR REPLACE FUNCTION, which keeps its
 *      privileges (PostgreSQL refuses it for an object that is not the
 *      extension's member).
 *    - A function whose arguments or result change is renamed, created
 *      anew, given the old one's grants by carry_privileges(), and the old
 *      one dropped, in that order.
 *    - A view gains columns at its end with CREATE OR REPLACE VIEW, which
 *      keeps its privileges; a table gains columns with ALTER TABLE.
 *    A grant made in an extension script is recorded as the object's initial
 *    privilege, which pg_dump leaves out; carry_privileges() puts the initial
 *    privileges back as they were, so that a dump made after the update
 *    still restores the installation's grants.
 * 2. A new application function or view is added to application_api, which
 *    is what grant_usage() grants; the roles grant_usage() was given to
 *    before the update are given the new objects too.
 * 3. The library of the new version also serves the SQL objects of the
 *    previous ones (between a package upgrade and ALTER EXTENSION ... UPDATE;
 *    src/extension.c lists the versions it serves): a registry column is
 *    added with the version that introduces it (REGISTRY_COLUMNS), and an
 *    entry point whose declaration changed accepts the old one.
 * 4. As in the install script: every name schema-qualified, no IF NOT
 *    EXISTS, CREATE OR REPLACE only for objects the extension already has.
 */

--
-- Keeping grants across a replaced function
--

/*
 * carry_privileges(old, new): give new the privileges that were granted on
 * old after the extension was installed, and take from it those that were
 * revoked from old, so that new has old's ACL; then record new's initial
 * privileges as old's, so that pg_dump dumps the same grants for new as it
 * did for old.  Runs as the superuser running the update script.
 */
CREATE FUNCTION idempotency.carry_privileges(old_fn pg_catalog.regprocedure,
											 new_fn pg_catalog.regprocedure)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	change record;
BEGIN
	FOR change IN
		WITH now_acl AS (
			SELECT a.grantee, a.privilege_type, a.is_grantable
			  FROM pg_catalog.pg_proc AS p,
				   pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) AS a
			 WHERE p.oid OPERATOR(pg_catalog.=) old_fn),
		new_acl AS (
			SELECT a.grantee, a.privilege_type, a.is_grantable
			  FROM pg_catalog.pg_proc AS p,
				   pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) AS a
			 WHERE p.oid OPERATOR(pg_catalog.=) new_fn)
		SELECT 'GRANT' AS verb, g.* FROM (TABLE now_acl EXCEPT TABLE new_acl) AS g
		UNION ALL
		SELECT 'REVOKE', r.* FROM (TABLE new_acl EXCEPT TABLE now_acl) AS r
	LOOP
		EXECUTE pg_catalog.format('%s %s ON FUNCTION %s %s %s%s',
								  change.verb, change.privilege_type, new_fn,
								  CASE change.verb WHEN 'GRANT' THEN 'TO' ELSE 'FROM' END,
								  CASE change.grantee WHEN 0 THEN 'PUBLIC'
								  ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(change.grantee)) END,
								  CASE WHEN change.verb OPERATOR(pg_catalog.=) 'GRANT' AND change.is_grantable
								  THEN ' WITH GRANT OPTION' ELSE '' END);
	END LOOP;

	DELETE FROM pg_catalog.pg_init_privs
	 WHERE objoid OPERATOR(pg_catalog.=) new_fn
	   AND classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
	   AND objsubid OPERATOR(pg_catalog.=) 0;
	INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
	SELECT new_fn, i.classoid, i.objsubid, i.privtype, i.initprivs
	  FROM pg_catalog.pg_init_privs AS i
	 WHERE i.objoid OPERATOR(pg_catalog.=) old_fn
	   AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
	   AND i.objsubid OPERATOR(pg_catalog.=) 0;
END;
$$;

COMMENT ON FUNCTION idempotency.carry_privileges(pg_catalog.regprocedure, pg_catalog.regprocedure) IS
'for update scripts: give a function that replaces another the other''s privileges, as an installation granted them';

REVOKE ALL ON FUNCTION idempotency.carry_privileges(pg_catalog.regprocedure, pg_catalog.regprocedure) FROM PUBLIC;

--
-- Granting the application API
--

/*
 * grant_usage(role) grants what application_api lists, and nothing else.
 * The role is a regrole, printed quoted by format('%s'); the object names
 * come from the list above and are quoted by %I.
 */
CREATE OR REPLACE FUNCTION idempotency.grant_usage(role pg_catalog.regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	api record;
BEGIN
	IF role IS NULL THEN
		RAISE EXCEPTION 'role must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	FOR api IN SELECT a.object_type, a.object_name, a.privilege
				 FROM idempotency.application_api AS a
	LOOP
		EXECUTE pg_catalog.format('GRANT %s ON %s idempotency.%I TO %s',
								  api.privilege,
								  CASE api.object_type WHEN 'function' THEN 'FUNCTION' ELSE 'TABLE' END,
								  api.object_name, role);
	END LOOP;
END;
$$;

COMMENT ON FUNCTION idempotency.grant_usage(pg_catalog.regrole) IS
'grant a role the application API and nothing else: the functions and views listed in idempotency.application_api';

/*
 * extend_usage(object_type, object_name): an object added to
 * application_api by an update script is granted to every role that
 * grant_usage() was given to (the grantees of idempotent_begin, less its
 * initial privileges), and its initial privileges are put back as they were
 * before, for pg_dump's sake (see carry_privileges).
 */
CREATE FUNCTION idempotency.extend_usage(object_type pg_catalog.text,
										 object_name pg_catalog.text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	target pg_catalog.oid;
	target_class pg_catalog.regclass;
	app record;
	saved pg_catalog.pg_init_privs;
BEGIN
	IF object_type OPERATOR(pg_catalog.=) 'function' THEN
		target := pg_catalog.to_regproc('idempotency.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(object_name));
		target_class := 'pg_catalog.pg_proc';
	ELSE
		target := pg_catalog.to_regclass('idempotency.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(object_name));
		target_class := 'pg_catalog.pg_class';
	END IF;
	IF target IS NULL THEN
		RAISE EXCEPTION 'extension object idempotency.% does not exist', object_name
			USING ERRCODE = 'undefined_object';
	END IF;

	SELECT i.* INTO saved FROM pg_catalog.pg_init_privs AS i
	 WHERE i.objoid OPERATOR(pg_catalog.=) target
	   AND i.classoid OPERATOR(pg_catalog.=) target_class
	   AND i.objsubid OPERATOR(pg_catalog.=) 0;

	FOR app IN
		SELECT a.grantee
		  FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
		 WHERE p.oid OPERATOR(pg_catalog.=) 'idempotency.idempotent_begin'::pg_catalog.regproc
		   AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
		   AND a.grantee OPERATOR(pg_catalog.<>) 0
		EXCEPT
		SELECT a.grantee
		  FROM pg_catalog.pg_init_privs AS i, pg_catalog.aclexplode(i.initprivs) AS a
		 WHERE i.objoid OPERATOR(pg_catalog.=) 'idempotency.idempotent_begin'::pg_catalog.regproc
		   AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
		   AND i.objsubid OPERATOR(pg_catalog.=) 0
	LOOP
		EXECUTE pg_catalog.format('GRANT %s ON %s idempotency.%I TO %I',
								  (SELECT l.privilege FROM idempotency.application_api AS l
									WHERE l.object_type OPERATOR(pg_catalog.=) extend_usage.object_type
									  AND l.object_name OPERATOR(pg_catalog.=) extend_usage.object_name),
								  CASE object_type WHEN 'function' THEN 'FUNCTION' ELSE 'TABLE' END,
								  object_name, pg_catalog.pg_get_userbyid(app.grantee));
	END LOOP;

	DELETE FROM pg_catalog.pg_init_privs
	 WHERE objoid OPERATOR(pg_catalog.=) target
	   AND classoid OPERATOR(pg_catalog.=) target_class
	   AND objsubid OPERATOR(pg_catalog.=) 0;
	IF saved.objoid IS NOT NULL THEN
		INSERT INTO pg_catalog.pg_init_privs SELECT saved.*;
	END IF;
END;
$$;

COMMENT ON FUNCTION idempotency.extend_usage(pg_catalog.text, pg_catalog.text) IS
'for update scripts: grant an object added to the application API to the roles grant_usage was given to';

REVOKE ALL ON FUNCTION idempotency.extend_usage(pg_catalog.text, pg_catalog.text) FROM PUBLIC;


--
-- Objects of the installation that depend on what this update replaces
--

/*
 * The update replaces idempotent_begin, lookup, citus_my_records and
 * citus_setup (their results or arguments change).  An object of the
 * installation that depends on one of them (a view over lookup(), a
 * function with a BEGIN ATOMIC body that calls idempotent_begin) would stop
 * the DROP with PostgreSQL's hint to drop it with CASCADE: name them, and
 * say what to do, before anything is changed.
 */
DO $$
DECLARE
	dependents pg_catalog.text;
BEGIN
	SELECT pg_catalog.string_agg(pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), ', '
								 ORDER BY pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid))
	  INTO dependents
	  FROM pg_catalog.pg_depend AS d
	 WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
	   AND d.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY[
			'idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool)'::pg_catalog.regprocedure,
			'idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb)'::pg_catalog.regprocedure,
			'idempotency.citus_my_records()'::pg_catalog.regprocedure,
			'idempotency.citus_setup()'::pg_catalog.regprocedure]::pg_catalog.oid[])
	   AND d.deptype OPERATOR(pg_catalog.=) ANY (ARRAY['n', 'a']::"char"[])
	   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend AS e
						WHERE e.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
						  AND e.deptype OPERATOR(pg_catalog.=) 'e'
						  AND ((e.classid OPERATOR(pg_catalog.=) d.classid AND e.objid OPERATOR(pg_catalog.=) d.objid)
							   OR (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
								   AND e.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
								   AND e.objid OPERATOR(pg_catalog.=) (SELECT r.ev_class FROM pg_catalog.pg_rewrite AS r
																		 WHERE r.oid OPERATOR(pg_catalog.=) d.objid))));
	IF dependents IS NOT NULL THEN
		RAISE EXCEPTION 'cannot update extension "idempotency": objects depend on functions the update replaces'
			USING ERRCODE = 'dependent_objects_still_exist',
				  DETAIL = pg_catalog.format('Objects: %s.  The update replaces idempotent_begin, lookup, citus_my_records and citus_setup, whose results or arguments change.', dependents),
				  HINT = 'Drop these objects, run ALTER EXTENSION idempotency UPDATE, and create them again; nothing else changes until then.';
	END IF;
END
$$;

--
-- Work that spans several external calls: recovery points, lease renewal
-- and the completer (src/recovery.c, doc/long-running-work.md)
--

/*
 * The step a claim has reached and its state, recorded by
 * idempotent_checkpoint: kept by a take-over, reset by any new claim of the
 * record.  Added at the table's end, as src/registry.h lists them; both are
 * unindexed, so that recording a step is a HOT update.  Under Citus the
 * ALTER TABLE changes this node's table only (Citus would send the whole
 * script to the workers as the command, and fail): every node runs this
 * script, and citus_setup() adds the columns to the registry's shards.
 */
SELECT pg_catalog.set_config('idempotency_update.citus_ddl',
							 pg_catalog.current_setting('citus.enable_ddl_propagation', true), true),
	   pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true)
 WHERE pg_catalog.current_setting('citus.enable_ddl_propagation', true) IS NOT NULL;

ALTER TABLE idempotency.registry
	ADD COLUMN recovery_point pg_catalog.text,
	ADD COLUMN recovery_state pg_catalog.jsonb;

SELECT pg_catalog.set_config('citus.enable_ddl_propagation',
							 pg_catalog.current_setting('idempotency_update.citus_ddl'), true)
 WHERE pg_catalog.current_setting('idempotency_update.citus_ddl', true) IS NOT NULL;

/*
 * idempotent_begin and lookup answer with the recovery point and state too:
 * their result changes, so each is renamed, created anew with the columns
 * added at the end, given the old one's privileges and dropped (the rules
 * above, 1).  idempotent_begin also takes external: a claim taken without it
 * must be finished or abandoned in the transaction that took it (its own C
 * entry point; the 1.0 declaration's claims commit on their own, as 1.0's
 * did).
 */
ALTER FUNCTION idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool)
	RENAME TO idempotent_begin_1_0;

CREATE FUNCTION idempotency.idempotent_begin(key pg_catalog.text,
											 scope pg_catalog.text DEFAULT '',
											 request pg_catalog.jsonb DEFAULT NULL,
											 ttl pg_catalog.interval DEFAULT '24 hours',
											 lease pg_catalog.interval DEFAULT NULL,
											 wait pg_catalog.bool DEFAULT true,
											 require_token pg_catalog.bool DEFAULT false,
											 max_wait pg_catalog.interval DEFAULT NULL,
											 defer_claim pg_catalog.bool DEFAULT false,
											 external pg_catalog.bool DEFAULT false,
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
											 OUT retry_after pg_catalog.int4,
											 OUT recovery_point pg_catalog.text,
											 OUT recovery_state pg_catalog.jsonb)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_idempotent_begin_1_1'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool) IS
'claim an idempotency key: outcome execute, replay or in_progress';

REVOKE ALL ON FUNCTION idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool) FROM PUBLIC;

SELECT idempotency.carry_privileges(
	'idempotency.idempotent_begin_1_0(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool)'::pg_catalog.regprocedure,
	'idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool)'::pg_catalog.regprocedure);

DROP FUNCTION idempotency.idempotent_begin_1_0(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool);

ALTER FUNCTION idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb)
	RENAME TO lookup_1_0;

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
								   OUT request_matches pg_catalog.bool,
								   OUT recovery_point pg_catalog.text,
								   OUT recovery_state pg_catalog.jsonb)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_lookup'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb) IS
'read the caller''s live record of a key without claiming it';

REVOKE ALL ON FUNCTION idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb) FROM PUBLIC;

SELECT idempotency.carry_privileges(
	'idempotency.lookup_1_0(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb)'::pg_catalog.regprocedure,
	'idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb)'::pg_catalog.regprocedure);

DROP FUNCTION idempotency.lookup_1_0(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb);

/*
 * my_records shows them too, at its end, and so does citus_my_records(),
 * what my_records reads once citus_setup() has distributed the registry:
 * its result changes, so it is replaced as the rules say.  Where it is what
 * my_records reads (Citus set up), the view reads the new one at once: the
 * library leaves the new columns NULL until citus_setup() has run again and
 * given the shards the new columns (IdempotencyCitusRegistryVersion), so
 * that my_records keeps showing the caller's records in between.
 * citus_setup() also distributes idempotent_checkpoint and idempotent_renew
 * by their key; run it again on the coordinator after updating a Citus
 * installation.
 */
ALTER FUNCTION idempotency.citus_my_records() RENAME TO citus_my_records_1_0;

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
											 OUT fingerprint pg_catalog.bytea,
											 OUT recovery_point pg_catalog.text,
											 OUT recovery_state pg_catalog.jsonb)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_citus_my_records'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_my_records() IS
'the calling role''s records, read as the registry''s owner (my_records under Citus)';

SELECT idempotency.carry_privileges('idempotency.citus_my_records_1_0()'::pg_catalog.regprocedure,
									'idempotency.citus_my_records()'::pg_catalog.regprocedure);

DO $$
BEGIN
	IF pg_catalog.pg_get_viewdef('idempotency.my_records'::pg_catalog.regclass)
	   OPERATOR(pg_catalog.~) 'citus_my_records' THEN
		CREATE OR REPLACE VIEW idempotency.my_records WITH (security_barrier) AS
			SELECT r.key, r.scope COLLATE pg_catalog."C" AS scope, r.status, r.attempt,
				   r.created_at, r.updated_at, r.lease_until, r.expires_at, r.expired, r.response,
				   r.status_code, r.body, r.headers, r.fingerprint, r.recovery_point, r.recovery_state
			  FROM idempotency.citus_my_records() AS r;
	ELSE
		CREATE OR REPLACE VIEW idempotency.my_records WITH (security_barrier) AS
			SELECT r.key, r.scope, r.status, r.attempt, r.created_at, r.updated_at,
				   r.lease_until, r.expires_at,
				   (r.expires_at OPERATOR(pg_catalog.<=) pg_catalog.now()
					OR r.status OPERATOR(pg_catalog.=) 'abandoned') AS expired,
				   r.response, r.status_code, r.body, r.headers, r.fingerprint,
				   r.recovery_point, r.recovery_state
			  FROM idempotency.registry AS r
			 WHERE r.owner OPERATOR(pg_catalog.=) idempotency.owner_name();
	END IF;
END
$$;

DROP FUNCTION idempotency.citus_my_records_1_0();


/*
 * idempotent_checkpoint: record, in the caller's transaction, the step the
 * claim has reached and a small state; fenced as idempotent_finish is.
 */
CREATE FUNCTION idempotency.idempotent_checkpoint(key pg_catalog.text,
												  recovery_point pg_catalog.text,
												  recovery_state pg_catalog.jsonb DEFAULT NULL,
												  scope pg_catalog.text DEFAULT '',
												  attempt pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_idempotent_checkpoint'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_checkpoint(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) IS
'record the step a claim has reached and its state, with the step''s own writes; a take-over resumes from it';

REVOKE ALL ON FUNCTION idempotency.idempotent_checkpoint(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;

/*
 * idempotent_renew: extend a running claim's lease; returns the new
 * lease_until.
 */
CREATE FUNCTION idempotency.idempotent_renew(key pg_catalog.text,
											 lease pg_catalog.interval,
											 scope pg_catalog.text DEFAULT '',
											 attempt pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'idempotency_idempotent_renew'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_renew(pg_catalog.text, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) IS
'extend the lease of a running claim so that it is not taken over; returns the new lease_until';

REVOKE ALL ON FUNCTION idempotency.idempotent_renew(pg_catalog.text, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;

/*
 * The caller's stalled claims: processing, their lease run out, not
 * expired, and nobody retried them.  The completer takes them over with
 * claim_stalled.
 */
CREATE VIEW idempotency.my_stalled_claims WITH (security_barrier) AS
	SELECT r.key, r.scope, r.attempt, r.created_at, r.updated_at, r.lease_until,
		   r.expires_at, r.recovery_point, r.recovery_state
	  FROM idempotency.my_records AS r
	 WHERE r.status OPERATOR(pg_catalog.=) 'processing'
	   AND r.lease_until OPERATOR(pg_catalog.<) pg_catalog.now()
	   AND NOT r.expired;

COMMENT ON VIEW idempotency.my_stalled_claims IS
'the calling role''s claims whose lease ran out and that nobody took over: what claim_stalled takes';

REVOKE ALL ON TABLE idempotency.my_stalled_claims FROM PUBLIC;

/*
 * claim_stalled: a completer's batch.  Takes over, as a begin's take-over
 * does, up to batch_size of the caller's stalled claims, passing over those
 * another transaction holds (SKIP LOCKED), so that no two completers get the
 * same claim.
 */
CREATE FUNCTION idempotency.claim_stalled(scope pg_catalog.text DEFAULT NULL,
										  batch_size pg_catalog.int4 DEFAULT 10,
										  lease pg_catalog.interval DEFAULT NULL,
										  OUT key idempotency.key,
										  OUT scope pg_catalog.text,
										  OUT attempt pg_catalog.int4,
										  OUT previous_attempt pg_catalog.int4,
										  OUT lease_until pg_catalog.timestamptz,
										  OUT expires_at pg_catalog.timestamptz,
										  OUT created_at pg_catalog.timestamptz,
										  OUT recovery_point pg_catalog.text,
										  OUT recovery_state pg_catalog.jsonb)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_claim_stalled'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;

COMMENT ON FUNCTION idempotency.claim_stalled(pg_catalog.text, pg_catalog.int4, pg_catalog.interval) IS
'take over a batch of the caller''s stalled claims, each with a new attempt and its recovery point, for a completer';

REVOKE ALL ON FUNCTION idempotency.claim_stalled(pg_catalog.text, pg_catalog.int4, pg_catalog.interval) FROM PUBLIC;


--
-- Citus: one request, one worker, one connection
--

/*
 * On the Citus coordinator, idempotent_begin, idempotent_finish,
 * idempotent_abandon and lookup hand each call to the worker that holds the
 * key, as the caller, through these delegates (src/citus.c,
 * doc/scaling-out-single-shard.md).  They are the same C entry points with
 * the key declared as an idempotency.key: citus_setup() distributes them by
 * the key with force_delegation, and Citus pins a delegated call's
 * transaction on the worker to the value of the key, compared by type as
 * well as by value with the registry's.  Without Citus they behave exactly
 * as the functions they stand for, so they are granted with them
 * (application_api).
 */
CREATE FUNCTION idempotency.citus_idempotent_begin(key idempotency.key,
												   scope pg_catalog.text,
												   request pg_catalog.jsonb,
												   ttl pg_catalog.interval,
												   lease pg_catalog.interval,
												   wait pg_catalog.bool,
												   require_token pg_catalog.bool,
												   max_wait pg_catalog.interval,
												   defer_claim pg_catalog.bool,
												   external pg_catalog.bool,
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
												   OUT retry_after pg_catalog.int4,
												   OUT recovery_point pg_catalog.text,
												   OUT recovery_state pg_catalog.jsonb)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_idempotent_begin_1_1'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_idempotent_begin(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool) IS
'idempotent_begin as the key''s Citus worker runs it (every argument given)';

CREATE FUNCTION idempotency.citus_idempotent_finish(key idempotency.key,
													response pg_catalog.jsonb,
													scope pg_catalog.text,
													attempt pg_catalog.int4,
													failed pg_catalog.bool,
													status_code pg_catalog.int4,
													body pg_catalog.bytea,
													ttl pg_catalog.interval,
													headers pg_catalog.jsonb)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_idempotent_finish'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_idempotent_finish(idempotency.key, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) IS
'idempotent_finish as the key''s Citus worker runs it (every argument given)';

CREATE FUNCTION idempotency.citus_idempotent_abandon(key idempotency.key,
													 scope pg_catalog.text,
													 attempt pg_catalog.int4)
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_idempotent_abandon'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_idempotent_abandon(idempotency.key, pg_catalog.text, pg_catalog.int4) IS
'idempotent_abandon as the key''s Citus worker runs it (every argument given)';

CREATE FUNCTION idempotency.citus_lookup(key idempotency.key,
										 scope pg_catalog.text,
										 request pg_catalog.jsonb,
										 OUT found pg_catalog.bool,
										 OUT status pg_catalog.text,
										 OUT response pg_catalog.jsonb,
										 OUT status_code pg_catalog.int4,
										 OUT body pg_catalog.bytea,
										 OUT headers pg_catalog.jsonb,
										 OUT attempt pg_catalog.int4,
										 OUT expires_at pg_catalog.timestamptz,
										 OUT lease_until pg_catalog.timestamptz,
										 OUT request_matches pg_catalog.bool,
										 OUT recovery_point pg_catalog.text,
										 OUT recovery_state pg_catalog.jsonb)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_lookup'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_lookup(idempotency.key, pg_catalog.text, pg_catalog.jsonb) IS
'lookup as the key''s Citus worker runs it (every argument given)';

CREATE FUNCTION idempotency.citus_idempotent_checkpoint(key idempotency.key,
														recovery_point pg_catalog.text,
														recovery_state pg_catalog.jsonb,
														scope pg_catalog.text,
														attempt pg_catalog.int4)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_idempotent_checkpoint'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_idempotent_checkpoint(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) IS
'idempotent_checkpoint as the key''s Citus worker runs it (every argument given)';

CREATE FUNCTION idempotency.citus_idempotent_renew(key idempotency.key,
												   lease pg_catalog.interval,
												   scope pg_catalog.text,
												   attempt pg_catalog.int4)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'idempotency_idempotent_renew'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_idempotent_renew(idempotency.key, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) IS
'idempotent_renew as the key''s Citus worker runs it (every argument given)';

REVOKE ALL ON FUNCTION idempotency.citus_idempotent_begin(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.citus_idempotent_finish(idempotency.key, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.citus_idempotent_abandon(idempotency.key, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.citus_lookup(idempotency.key, pg_catalog.text, pg_catalog.jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.citus_idempotent_checkpoint(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.citus_idempotent_renew(idempotency.key, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;

/*
 * The application API, listed once: what grant_usage() grants, by name (a
 * function's name is unique in the schema, so that a later version may
 * change its arguments without touching this list).  1.0's API, the
 * recovery points, renewal and the completer, and the delegates.  Readable
 * by everyone, as the functions' signatures are.  The roles grant_usage()
 * was given to get what is new (rule 2).
 */
CREATE VIEW idempotency.application_api AS
	SELECT v.object_type, v.object_name, v.privilege
	  FROM (VALUES
			('function', 'idempotent_begin', 'EXECUTE'),
			('function', 'idempotent_finish', 'EXECUTE'),
			('function', 'idempotent_abandon', 'EXECUTE'),
			('function', 'lookup', 'EXECUTE'),
			('view', 'my_records', 'SELECT'),
			('function', 'inbox_receive', 'EXECUTE'),
			('function', 'inbox_receive_batch', 'EXECUTE'),
			('function', 'issue_token', 'EXECUTE'),
			('function', 'consume_token', 'EXECUTE'),
			('view', 'my_tokens', 'SELECT'),
			('function', 'outbox_send', 'EXECUTE'),
			('function', 'outbox_fetch', 'EXECUTE'),
			('function', 'outbox_ack', 'EXECUTE'),
			('view', 'my_outbox', 'SELECT'),
			('function', 'lock', 'EXECUTE'),
			('function', 'try_lock', 'EXECUTE'),
			('function', 'idempotent_checkpoint', 'EXECUTE'),
			('function', 'idempotent_renew', 'EXECUTE'),
			('function', 'claim_stalled', 'EXECUTE'),
			('view', 'my_stalled_claims', 'SELECT'),
			('function', 'citus_idempotent_begin', 'EXECUTE'),
			('function', 'citus_idempotent_finish', 'EXECUTE'),
			('function', 'citus_idempotent_abandon', 'EXECUTE'),
			('function', 'citus_lookup', 'EXECUTE'),
			('function', 'citus_idempotent_checkpoint', 'EXECUTE'),
			('function', 'citus_idempotent_renew', 'EXECUTE'))
		   AS v (object_type, object_name, privilege);

COMMENT ON VIEW idempotency.application_api IS
'the functions and views grant_usage() grants to an application role';

REVOKE ALL ON TABLE idempotency.application_api FROM PUBLIC;
GRANT SELECT ON TABLE idempotency.application_api TO PUBLIC;

SELECT idempotency.extend_usage('function', 'idempotent_checkpoint');
SELECT idempotency.extend_usage('function', 'idempotent_renew');
SELECT idempotency.extend_usage('function', 'claim_stalled');
SELECT idempotency.extend_usage('view', 'my_stalled_claims');
/*
 * A delegate grants what the function it stands for grants, revocations by
 * hand included (and refuses, when it runs, a caller who may not run that
 * function: src/citus.c).
 */
SELECT idempotency.carry_privileges(
	'idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool)',
	'idempotency.citus_idempotent_begin(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool)');
SELECT idempotency.carry_privileges(
	'idempotency.idempotent_finish(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb)',
	'idempotency.citus_idempotent_finish(idempotency.key, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb)');
SELECT idempotency.carry_privileges(
	'idempotency.idempotent_abandon(pg_catalog.text, pg_catalog.text, pg_catalog.int4)',
	'idempotency.citus_idempotent_abandon(idempotency.key, pg_catalog.text, pg_catalog.int4)');
SELECT idempotency.carry_privileges(
	'idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb)',
	'idempotency.citus_lookup(idempotency.key, pg_catalog.text, pg_catalog.jsonb)');
SELECT idempotency.carry_privileges(
	'idempotency.idempotent_checkpoint(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4)',
	'idempotency.citus_idempotent_checkpoint(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4)');
SELECT idempotency.carry_privileges(
	'idempotency.idempotent_renew(pg_catalog.text, pg_catalog.interval, pg_catalog.text, pg_catalog.int4)',
	'idempotency.citus_idempotent_renew(idempotency.key, pg_catalog.interval, pg_catalog.text, pg_catalog.int4)');

/*
 * citus_setup(distribute_by): distribute_by => 'key' (the default) is 1.0's
 * layout; 'scope' distributes the registry and the tokens by their scope,
 * in one co-location group, so that a tenant's requests and a tenant's
 * business tables (distributed by a text COLLATE "C" tenant column,
 * co-located with the registry) share a worker, and the inbox by its
 * consumer, in a group of its own (inbox_receive runs on the coordinator,
 * as the inbox's owner: a business table co-located with it would be
 * written by two roles).  A table already distributed otherwise is refused
 * (55000).
 * It also distributes the delegates, by the same argument as the functions
 * they stand for, with force_delegation; run it again after updating.  The
 * rest is as in 1.0.  It replaces citus_setup(), whose grants it takes.
 */
CREATE FUNCTION idempotency.citus_setup(distribute_by pg_catalog.text DEFAULT 'key')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	by_scope bool;
	dist_col text;
	f_arg int4;
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

	IF distribute_by IS NULL OR distribute_by <> ALL (ARRAY['key', 'scope']) THEN
		RAISE EXCEPTION 'invalid value for distribute_by: "%"', distribute_by
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Distribute by ''key'' or by ''scope''.';
	END IF;
	by_scope := distribute_by = 'scope';

	FOR t IN
		SELECT v.rel::regclass AS rel, v.col, v.colocate
		  FROM (VALUES (1, 'idempotency.registry', CASE WHEN by_scope THEN 'scope' ELSE 'key' END, 'none'),
					   (2, 'idempotency.tokens', CASE WHEN by_scope THEN 'scope' ELSE 'token' END, 'idempotency.registry'),
					   (3, 'idempotency.inbox', CASE WHEN by_scope THEN 'consumer' ELSE 'message_id' END, 'none'),
					   (4, 'idempotency.state_machines', NULL, NULL),
					   (5, 'idempotency.outbox', 'ordering_key', 'none')) AS v(ord, rel, col, colocate)
		 ORDER BY v.ord
	LOOP
		SELECT CASE WHEN p.partkey IS NOT NULL THEN column_to_column_name(p.logicalrelid, p.partkey) END
		  INTO dist_col
		  FROM pg_dist_partition AS p WHERE p.logicalrelid = t.rel;
		IF FOUND AND t.col IS NOT NULL AND dist_col IS DISTINCT FROM t.col THEN
			RAISE EXCEPTION 'table % is already distributed by column "%"', t.rel, dist_col
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  HINT = format('citus_setup(distribute_by => %L) cannot redistribute it: start from citus_drop_tables(), or call citus_setup() with the distribution it has.', distribute_by);
		END IF;
		CONTINUE WHEN FOUND;
		IF t.col IS NULL THEN
			PERFORM create_reference_table(t.rel);
		ELSE
			PERFORM create_distributed_table(t.rel, t.col, colocate_with => t.colocate);
		END IF;
		PERFORM truncate_local_data_after_distributing_table(t.rel);
	END LOOP;

	FOR f IN
		SELECT v.fn::regprocedure AS fn, v.key_arg, v.scope_arg, v.colocate, v.force
		  FROM (VALUES ('idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean)', 1, 2, 'idempotency.registry', false),
					   ('idempotency.idempotent_finish(text, jsonb, text, integer, boolean, integer, bytea, interval, jsonb)', 1, 3, 'idempotency.registry', false),
					   ('idempotency.idempotent_abandon(text, text, integer)', 1, 2, 'idempotency.registry', false),
					   ('idempotency.lookup(text, text, jsonb)', 1, 2, 'idempotency.registry', false),
					   ('idempotency.citus_idempotent_begin(idempotency.key, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean)', 1, 2, 'idempotency.registry', true),
					   ('idempotency.citus_idempotent_finish(idempotency.key, jsonb, text, integer, boolean, integer, bytea, interval, jsonb)', 1, 3, 'idempotency.registry', true),
					   ('idempotency.citus_idempotent_abandon(idempotency.key, text, integer)', 1, 2, 'idempotency.registry', true),
					   ('idempotency.citus_lookup(idempotency.key, text, jsonb)', 1, 2, 'idempotency.registry', true),
					   ('idempotency.idempotent_checkpoint(text, text, jsonb, text, integer)', 1, 4, 'idempotency.registry', false),
					   ('idempotency.idempotent_renew(text, interval, text, integer)', 1, 3, 'idempotency.registry', false),
					   ('idempotency.citus_idempotent_checkpoint(idempotency.key, text, jsonb, text, integer)', 1, 4, 'idempotency.registry', true),
					   ('idempotency.citus_idempotent_renew(idempotency.key, interval, text, integer)', 1, 3, 'idempotency.registry', true),
					   ('idempotency.consume_token(text, text)', 1, 2, 'idempotency.tokens', false),
					   ('idempotency.inbox_receive(text, text, interval)', 2, 1, 'idempotency.inbox', false))
			   AS v(fn, key_arg, scope_arg, colocate, force)
	LOOP
		f_arg := CASE WHEN by_scope THEN f.scope_arg ELSE f.key_arg END;
		CONTINUE WHEN EXISTS (SELECT FROM pg_dist_object AS o
							   WHERE o.classid = 'pg_proc'::regclass AND o.objid = f.fn
								 AND o.distribution_argument_index = f_arg - 1
								 AND o.force_delegation IS NOT DISTINCT FROM f.force);
		PERFORM create_distributed_function(f.fn, '$' || f_arg, colocate_with => f.colocate,
											force_delegation => f.force);
	END LOOP;

	/*
	 * The registry's shards get the columns an update added to it: Citus
	 * does not propagate an extension script's ALTER TABLE (its hooks are
	 * off there), so shards made before the update lack them.
	 */
	PERFORM run_command_on_shards('idempotency.registry',
		'ALTER TABLE %s ADD COLUMN IF NOT EXISTS recovery_point pg_catalog.text,'
		' ADD COLUMN IF NOT EXISTS recovery_state pg_catalog.jsonb');

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
				   r.status_code, r.body, r.headers, r.fingerprint, r.recovery_point, r.recovery_state
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

COMMENT ON FUNCTION idempotency.citus_setup(pg_catalog.text) IS
'distribute the extension''s tables (by key or by scope) and functions with Citus; run on the coordinator, again after granting by hand';

REVOKE ALL ON FUNCTION idempotency.citus_setup(pg_catalog.text) FROM PUBLIC;
SELECT idempotency.carry_privileges('idempotency.citus_setup()', 'idempotency.citus_setup(pg_catalog.text)');
DROP FUNCTION idempotency.citus_setup();

/*
 * citus_status() also shows the delegates.  The rest is as in 1.0.
 */
CREATE OR REPLACE FUNCTION idempotency.citus_status(OUT object pg_catalog.text,
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
									  'issue_token', 'outbox_send', 'outbox_fetch', 'outbox_ack',
									  'citus_idempotent_begin', 'citus_idempotent_finish',
									  'citus_idempotent_abandon', 'citus_lookup',
									  'idempotent_checkpoint', 'idempotent_renew',
									  'citus_idempotent_checkpoint', 'citus_idempotent_renew'])
		 ORDER BY 1;
END;
$$;

