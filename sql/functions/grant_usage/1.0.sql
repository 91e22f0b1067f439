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
