/*
 * The application API, listed once: what grant_usage() grants.  The
 * delegates leave it, being open to everyone; idempotent_call joins it; the
 * rest is as in 1.1.
 */
CREATE OR REPLACE VIEW idempotency.application_api AS
	SELECT v.object_type, v.object_name, v.privilege
	  FROM (VALUES
			('function', 'idempotent_begin', 'EXECUTE'),
			('function', 'idempotent_finish', 'EXECUTE'),
			('function', 'idempotent_abandon', 'EXECUTE'),
			('function', 'idempotent_call', 'EXECUTE'),
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
			('view', 'my_stalled_claims', 'SELECT'))
		   AS v (object_type, object_name, privilege);
