/*
 * outbox.c's outbox_send, in PL/pgSQL: the message recorded in the
 * caller's transaction.  The senders of one (owner, ordering key) are
 * serialised by a transaction-scoped advisory lock of the pair
 * (portable_outbox_lock), so that a second sender waits
 * until the first's transaction ends and then numbers after its message.
 * Under READ COMMITTED the statement after the wait sees what the first
 * committed, as the C edition's latest snapshot does; under REPEATABLE
 * READ or SERIALIZABLE a sender's snapshot may predate it, and the insert
 * that takes the same number fails with 40001 (doc/portable.md), where the
 * C edition numbers after it.  A message without an ordering key is its own
 * key and takes number 1 without the lock.  The body is SECURITY DEFINER;
 * outbox_send() passes it its caller.
 */
CREATE FUNCTION idempotency.portable_outbox_send(caller pg_catalog.name,
												 p_topic pg_catalog.text,
												 p_payload pg_catalog.jsonb,
												 p_ordering_key pg_catalog.text,
												 p_headers pg_catalog.jsonb,
												 p_message_id pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_topic pg_catalog.text := idempotency.portable_text_arg(p_topic, 'topic');
	v_key pg_catalog.text;
	v_id pg_catalog.text;
	v_owner pg_catalog.text;
	v_now pg_catalog.timestamptz;
	v_hex pg_catalog.text;
	v_ms pg_catalog.int8;
	n pg_catalog.int8 := 0;
BEGIN
	IF p_payload IS NULL THEN
		RAISE EXCEPTION 'payload must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF p_ordering_key IS NOT NULL THEN
		v_key := idempotency.portable_text_arg(p_ordering_key, 'ordering_key');
	END IF;
	IF p_headers IS NOT NULL
	   AND pg_catalog.jsonb_typeof(p_headers) OPERATOR(pg_catalog.<>) 'object' THEN
		RAISE EXCEPTION 'headers must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF p_message_id IS NOT NULL THEN
		v_id := idempotency.portable_text_arg(p_message_id, 'message_id');
	END IF;
	v_owner := idempotency.portable_owner(caller, 'idempotency.outbox_send(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text)');
	v_now := pg_catalog.clock_timestamp();
	IF v_id IS NULL THEN
		-- a version 7 UUID: 48 bits of Unix time in ms, then random bits
		v_ms := pg_catalog.floor(pg_catalog.date_part('epoch', v_now) OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8;
		v_hex := pg_catalog.lpad(pg_catalog.to_hex(v_ms), 12, '0')
				 OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.replace(pg_catalog.gen_random_uuid()::pg_catalog.text, '-', ''), 13);
		v_hex := pg_catalog.substr(v_hex, 1, 12) OPERATOR(pg_catalog.||) '7' OPERATOR(pg_catalog.||) pg_catalog.substr(v_hex, 14);
		v_id := pg_catalog.substr(v_hex, 1, 8) OPERATOR(pg_catalog.||) '-' OPERATOR(pg_catalog.||) pg_catalog.substr(v_hex, 9, 4)
				OPERATOR(pg_catalog.||) '-' OPERATOR(pg_catalog.||) pg_catalog.substr(v_hex, 13, 4)
				OPERATOR(pg_catalog.||) '-' OPERATOR(pg_catalog.||) pg_catalog.substr(v_hex, 17, 4)
				OPERATOR(pg_catalog.||) '-' OPERATOR(pg_catalog.||) pg_catalog.substr(v_hex, 21, 12);
	ELSIF EXISTS (SELECT FROM idempotency.outbox AS o
				   WHERE o.message_id OPERATOR(pg_catalog.=) v_id
					 AND o.ordering_key OPERATOR(pg_catalog.=) COALESCE(v_key, v_id)
					 AND o.owner OPERATOR(pg_catalog.=) v_owner) THEN
		RAISE EXCEPTION 'message "%" was already sent with ordering key "%"', v_id, COALESCE(v_key, v_id)
			USING ERRCODE = 'unique_violation',
				  DETAIL = 'A message id is kept until the message''s delivery has expired.',
				  HINT = 'Give every message its own id, or let outbox_send generate one.';
	END IF;

	IF pg_catalog.current_setting('idempotency.outbox_delivery', true) OPERATOR(pg_catalog.=) 'logical' THEN
		-- consumers read the messages in commit order from the WAL
		IF pg_catalog.current_setting('wal_level') OPERATOR(pg_catalog.<>) 'logical' THEN
			RAISE EXCEPTION 'cannot send outbox messages through logical decoding while "wal_level" is "%"',
				pg_catalog.current_setting('wal_level')
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  HINT = 'Set "wal_level" to "logical" and restart, or set "idempotency.outbox_delivery" to "relay".';
		END IF;
		INSERT INTO idempotency.outbox AS o (owner, ordering_key, seq, message_id, topic, payload, headers,
											 sent_at, delivered_at, expires_at)
		VALUES (v_owner, COALESCE(v_key, v_id), 0, v_id, v_topic, p_payload,
				p_headers, v_now, v_now, v_now OPERATOR(pg_catalog.+) pg_catalog.interval '7 days');
		PERFORM pg_catalog.pg_logical_emit_message(true, 'idempotency.outbox',
			pg_catalog.jsonb_build_object('message_id', v_id, 'topic', v_topic, 'ordering_key', COALESCE(v_key, v_id),
										  'payload', p_payload, 'headers', p_headers,
										  'sent_at', v_now, 'owner', v_owner)::pg_catalog.text);
		RETURN v_id;
	END IF;

	IF v_key IS NULL THEN
		INSERT INTO idempotency.outbox AS o (owner, ordering_key, seq, message_id, topic, payload, headers, sent_at)
		VALUES (v_owner, v_id, 1, v_id, v_topic, p_payload, p_headers, v_now)
		ON CONFLICT (owner, ordering_key, seq) WHERE delivered_at IS NULL DO NOTHING;
		GET DIAGNOSTICS n = ROW_COUNT;
	END IF;
	IF n OPERATOR(pg_catalog.=) 0 THEN
		PERFORM pg_catalog.pg_advisory_xact_lock(l.key1, l.key2)
		   FROM idempotency.portable_outbox_lock(v_owner, COALESCE(v_key, v_id)) AS l;
	END IF;
	WHILE n OPERATOR(pg_catalog.=) 0 LOOP
		INSERT INTO idempotency.outbox AS o (owner, ordering_key, seq, message_id, topic, payload, headers, sent_at)
		VALUES (v_owner, COALESCE(v_key, v_id),
				COALESCE((SELECT p.seq FROM idempotency.outbox AS p
						   WHERE p.owner OPERATOR(pg_catalog.=) v_owner
							 AND p.ordering_key OPERATOR(pg_catalog.=) COALESCE(v_key, v_id)
							 AND p.delivered_at IS NULL
						   ORDER BY p.seq DESC LIMIT 1), 0) OPERATOR(pg_catalog.+) 1,
				v_id, v_topic, p_payload, p_headers, v_now)
		ON CONFLICT (owner, ordering_key, seq) WHERE delivered_at IS NULL DO NOTHING;
		GET DIAGNOSTICS n = ROW_COUNT;
	END LOOP;
	RETURN v_id;
END
$$;

COMMENT ON FUNCTION idempotency.portable_outbox_send(pg_catalog.name, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text) IS
'outbox_send() for a caller, checked against the session';

/*
 * The two numbers of the advisory lock of an owner's ordering key: 64 bits
 * of the keyed hash of the owner and the key (portable_secret_hash), in
 * the two-number form, apart from the key locks' one-number form.
 */
CREATE FUNCTION idempotency.portable_outbox_lock(owner pg_catalog.text, ordering_key pg_catalog.text,
												 OUT key1 pg_catalog.int4, OUT key2 pg_catalog.int4)
RETURNS record
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	h pg_catalog.int8 := idempotency.portable_secret_hash('outbox:' OPERATOR(pg_catalog.||) pg_catalog.octet_length(owner)
														  OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) owner
														  OPERATOR(pg_catalog.||) ordering_key);
	low pg_catalog.int8 := h OPERATOR(pg_catalog.&) 4294967295;
BEGIN
	key1 := (h OPERATOR(pg_catalog.>>) 32)::pg_catalog.int4;
	key2 := (low OPERATOR(pg_catalog.-) CASE WHEN low OPERATOR(pg_catalog.>) 2147483647 THEN 4294967296 ELSE 0 END)::pg_catalog.int4;
END
$$;

COMMENT ON FUNCTION idempotency.portable_outbox_lock(pg_catalog.text, pg_catalog.text) IS
'the two numbers of the advisory lock of an owner''s ordering key, keyed with the installation''s secret';

REVOKE ALL ON FUNCTION idempotency.portable_outbox_lock(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

CREATE FUNCTION idempotency.outbox_send(topic pg_catalog.text,
										payload pg_catalog.jsonb,
										ordering_key pg_catalog.text DEFAULT NULL,
										headers pg_catalog.jsonb DEFAULT NULL,
										message_id pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_outbox_send(CURRENT_USER, topic, payload, ordering_key, headers, message_id);

COMMENT ON FUNCTION idempotency.outbox_send(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text) IS
'record a message in the calling transaction, delivered if and only if it commits; returns the message id';

REVOKE ALL ON FUNCTION idempotency.outbox_send(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text) FROM PUBLIC;
