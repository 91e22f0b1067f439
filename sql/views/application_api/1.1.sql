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
