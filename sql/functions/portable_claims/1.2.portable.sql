/*
 * The claims the current transaction took, as xactclaims.c keeps them in
 * the C edition: what finish and abandon without an attempt may end, and
 * the claims that must end before the transaction commits.
 *
 * A row is written by the begin that took the claim, with the transaction's
 * id, and deleted by its finish or abandon; every reader looks only at its
 * own transaction's rows.  So the rows follow subtransactions both ways as
 * the claim's record does (a claim taken in a subtransaction that rolls
 * back is gone with it; one ended in a subtransaction that rolls back is
 * open again), and a row that outlives its transaction (an external claim's,
 * committed open; a prepared transaction's) is nobody's: cleanup() deletes
 * those.  UNLOGGED: nothing in it is needed after a crash.  A read-only
 * transaction (a hot standby's too, which cannot read an unlogged table)
 * has no claims and never reads it.  kind says what the claim was taken
 * as: transactional (the default), external, deferred (defer_claim), or
 * call (by idempotent_call, which alone finishes it so).
 */
CREATE UNLOGGED TABLE idempotency.portable_claims (
	owner		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	scope		pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	key			pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
	xact		pg_catalog.xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
	attempt		pg_catalog.int4 NOT NULL,
	kind		pg_catalog.text NOT NULL,
	CONSTRAINT portable_claims_pkey PRIMARY KEY (key, scope, owner, xact),
	CONSTRAINT portable_claims_kind CHECK (kind OPERATOR(pg_catalog.=) ANY (ARRAY['transactional', 'external', 'deferred', 'call']))
);

COMMENT ON TABLE idempotency.portable_claims IS
'the claims each transaction took and has not ended, by transaction id';

REVOKE ALL ON TABLE idempotency.portable_claims FROM PUBLIC;

/*
 * The commit rule: a claim that must end in its transaction (any but an
 * external one) and is still open when the transaction commits (or
 * PREPAREs) fails it, with the C edition's error.  A deferred constraint
 * trigger on the claims' rows, so that it runs when the transaction ends
 * and sees what it did.  A transaction that sets it IMMEDIATE (SET
 * CONSTRAINTS ALL IMMEDIATE) is checked at that moment: a claim taken while
 * it is immediate, or open when it is set, fails then (doc/portable.md),
 * rather than go unchecked.
 */
CREATE FUNCTION idempotency.portable_commit_rule()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT EXISTS (SELECT FROM idempotency.portable_claims AS c
					WHERE c.key OPERATOR(pg_catalog.=) NEW.key AND c.scope OPERATOR(pg_catalog.=) NEW.scope
					  AND c.owner OPERATOR(pg_catalog.=) NEW.owner AND c.xact OPERATOR(pg_catalog.=) NEW.xact) THEN
		RETURN NULL;			-- ended
	END IF;
	IF NEW.kind OPERATOR(pg_catalog.=) 'deferred' THEN
		RAISE EXCEPTION 'idempotency key "%" in scope "%" was claimed with defer_claim but not finished', NEW.key, NEW.scope
			USING ERRCODE = 'invalid_transaction_termination',
				  DETAIL = 'A deferred claim is written only by idempotent_finish, so this transaction cannot commit without it; nothing was committed.',
				  HINT = 'Call idempotent_finish (or idempotent_abandon) in the same transaction; for work outside the database, claim with external => true and without defer_claim.';
	END IF;
	RAISE EXCEPTION 'idempotency key "%" in scope "%" was claimed but not finished', NEW.key, NEW.scope
		USING ERRCODE = 'invalid_transaction_termination',
			  DETAIL = 'A claim taken without external => true must be finished or abandoned in the transaction that took it, so that the work and its answer commit together; nothing was committed.',
			  HINT = 'Call idempotent_finish (or idempotent_abandon) before the transaction commits; for work outside the database, claim with external => true and finish with attempt => in a later transaction.';
END
$$;

COMMENT ON FUNCTION idempotency.portable_commit_rule() IS
'refuses to commit a claim taken without external => true and not finished';

REVOKE ALL ON FUNCTION idempotency.portable_commit_rule() FROM PUBLIC;

CREATE CONSTRAINT TRIGGER portable_commit_rule
	AFTER INSERT ON idempotency.portable_claims
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW WHEN (NEW.kind OPERATOR(pg_catalog.<>) 'external')
	EXECUTE FUNCTION idempotency.portable_commit_rule();

/*
 * The fencing token a claim made now starts from, as RegistryFence: whole
 * seconds since 2000-01-01, read from the clock.
 */
CREATE FUNCTION idempotency.portable_fence()
RETURNS pg_catalog.int4
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
BEGIN
	RETURN pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.-) 946684800)::pg_catalog.int4;
END
$$;

COMMENT ON FUNCTION idempotency.portable_fence() IS
'the fencing token a claim made now starts from: whole seconds since 2000-01-01';

/*
 * The helpers below, like those in portable_args, run inside the bodies,
 * with their search_path: none sets one of its own (a SET clause costs
 * every call a change of search_path).
 */

/*
 * A value of a header, checked as http_headers.c's http_headers_value:
 * a string holding no control character but tab.
 */
CREATE FUNCTION idempotency.portable_header_value(name pg_catalog.text, value pg_catalog.jsonb, ordinal pg_catalog.int4)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
	s pg_catalog.text;
	b pg_catalog.bytea;
	c pg_catalog.int4;
BEGIN
	IF pg_catalog.jsonb_typeof(value) OPERATOR(pg_catalog.<>) 'string' AND ordinal OPERATOR(pg_catalog.>) 0 THEN
		RAISE EXCEPTION 'value % of header "%" must be a JSON string', ordinal, name
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = pg_catalog.format('It is a JSON %s.', pg_catalog.jsonb_typeof(value));
	END IF;
	IF pg_catalog.jsonb_typeof(value) OPERATOR(pg_catalog.<>) 'string' THEN
		RAISE EXCEPTION 'value of header "%" must be a JSON string', name
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = pg_catalog.format('It is a JSON %s.', pg_catalog.jsonb_typeof(value)),
				  HINT = 'Give each value of a header a [name, value] pair of its own.';
	END IF;
	s := value OPERATOR(pg_catalog.#>>) '{}';
	IF s OPERATOR(pg_catalog.~) E'[\\x01-\\x08\\x0a-\\x1f\\x7f]' THEN
		b := pg_catalog.convert_to(s, pg_catalog.current_setting('server_encoding'));
		FOR i IN 0 .. pg_catalog.length(b) OPERATOR(pg_catalog.-) 1 LOOP
			c := pg_catalog.get_byte(b, i);
			IF (c OPERATOR(pg_catalog.<) 32 AND c OPERATOR(pg_catalog.<>) 9) OR c OPERATOR(pg_catalog.=) 127 THEN
				RAISE EXCEPTION 'value of header "%" contains a control character', name
					USING ERRCODE = 'invalid_parameter_value',
						  DETAIL = pg_catalog.format('Byte 0x%s at position %s: a header value holds no control character but tab.',
													 pg_catalog.lpad(pg_catalog.to_hex(c), 2, '0'), i OPERATOR(pg_catalog.+) 1);
			END IF;
		END LOOP;
	END IF;
END
$$;

COMMENT ON FUNCTION idempotency.portable_header_value(pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4) IS
'a header value, checked: a JSON string without control characters but tab';

/* a header's name, checked as http_headers_name: an HTTP field name */
CREATE FUNCTION idempotency.portable_header_name(value pg_catalog.jsonb)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
	name pg_catalog.text := value OPERATOR(pg_catalog.#>>) '{}';
	b pg_catalog.bytea;
	c pg_catalog.int4;
BEGIN
	IF name OPERATOR(pg_catalog.=) '' THEN
		RAISE EXCEPTION 'header name must not be empty' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF name OPERATOR(pg_catalog.!~) '^[A-Za-z0-9!#$%&''*+.^_`|~-]+$' THEN
		b := pg_catalog.convert_to(name, pg_catalog.current_setting('server_encoding'));
		FOR i IN 0 .. pg_catalog.length(b) OPERATOR(pg_catalog.-) 1 LOOP
			c := pg_catalog.get_byte(b, i);
			CONTINUE WHEN pg_catalog.chr(c) OPERATOR(pg_catalog.~) '^[A-Za-z0-9!#$%&''*+.^_`|~-]$' AND c OPERATOR(pg_catalog.<) 128;
			RAISE EXCEPTION 'invalid header name "%"', name
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = pg_catalog.format('Byte 0x%s at position %s is not allowed: a header name is made of letters, digits and the characters !#$%%&''*+-.^_`|~.',
												 pg_catalog.lpad(pg_catalog.to_hex(c), 2, '0'), i OPERATOR(pg_catalog.+) 1);
		END LOOP;
	END IF;
	RETURN name;
END
$$;

COMMENT ON FUNCTION idempotency.portable_header_name(pg_catalog.jsonb) IS
'a header name, checked: an HTTP field name';

/*
 * The headers a finish stores, checked as IdempotencyHttpHeadersCheck
 * checks them: an object of strings or arrays of strings, or an array of
 * [name, value] pairs.
 */
CREATE FUNCTION idempotency.portable_headers_check(headers pg_catalog.jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
	name pg_catalog.text;
	v pg_catalog.jsonb;
	pair pg_catalog.jsonb;
	n pg_catalog.int4;
BEGIN
	IF pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.<>) ALL (ARRAY['object', 'array']) THEN
		RAISE EXCEPTION 'headers must be a JSON object or array'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = pg_catalog.format('It is a JSON %s.', pg_catalog.jsonb_typeof(headers)),
				  HINT = 'Pass the response headers as an object of header names and values, such as ''{"Location": "/charges/1"}'', or as an array of [name, value] pairs.';
	END IF;
	IF pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.=) 'object' THEN
		FOR name, v IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(headers) AS e LOOP
			name := idempotency.portable_header_name(pg_catalog.to_jsonb(name));
			IF pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'string' THEN
				PERFORM idempotency.portable_header_value(name, v, 0);
				CONTINUE;
			END IF;
			IF pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.<>) 'array' THEN
				RAISE EXCEPTION 'value of header "%" must be a JSON string or an array of strings', name
					USING ERRCODE = 'invalid_parameter_value',
						  DETAIL = pg_catalog.format('It is a JSON %s.', pg_catalog.jsonb_typeof(v)),
						  HINT = 'Pass several values of one header as an array of strings, such as ''{"Set-Cookie": ["a=1", "b=2"]}''.';
			END IF;
			IF pg_catalog.jsonb_array_length(v) OPERATOR(pg_catalog.=) 0 THEN
				RAISE EXCEPTION 'values of header "%" must not be an empty array', name
					USING ERRCODE = 'invalid_parameter_value',
						  HINT = 'Leave out a header that has no value.';
			END IF;
			FOR i IN 0 .. pg_catalog.jsonb_array_length(v) OPERATOR(pg_catalog.-) 1 LOOP
				PERFORM idempotency.portable_header_value(name, v OPERATOR(pg_catalog.->) i, i OPERATOR(pg_catalog.+) 1);
			END LOOP;
		END LOOP;
		RETURN;
	END IF;
	FOR i IN 0 .. pg_catalog.jsonb_array_length(headers) OPERATOR(pg_catalog.-) 1 LOOP
		pair := headers OPERATOR(pg_catalog.->) i;
		IF pg_catalog.jsonb_typeof(pair) OPERATOR(pg_catalog.<>) 'array' THEN
			RAISE EXCEPTION 'header % of headers must be a [name, value] pair', i OPERATOR(pg_catalog.+) 1
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = pg_catalog.format('It is a JSON %s.', pg_catalog.jsonb_typeof(pair)),
					  HINT = 'Pass an array of headers as pairs, such as ''[["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]]''.';
		END IF;
		n := pg_catalog.jsonb_array_length(pair);
		IF n OPERATOR(pg_catalog.<>) 2 THEN
			RAISE EXCEPTION 'header % of headers must be a [name, value] pair', i OPERATOR(pg_catalog.+) 1
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = CASE n WHEN 1 THEN 'It is an array of 1 element.'
								 ELSE pg_catalog.format('It is an array of %s elements.', n) END,
					  HINT = 'Give each value of a header a [name, value] pair of its own.';
		END IF;
		IF pg_catalog.jsonb_typeof(pair OPERATOR(pg_catalog.->) 0) OPERATOR(pg_catalog.<>) 'string' THEN
			RAISE EXCEPTION 'name of header % of headers must be a JSON string', i OPERATOR(pg_catalog.+) 1
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = pg_catalog.format('It is a JSON %s.', pg_catalog.jsonb_typeof(pair OPERATOR(pg_catalog.->) 0));
		END IF;
		PERFORM idempotency.portable_header_value(idempotency.portable_header_name(pair OPERATOR(pg_catalog.->) 0),
												  pair OPERATOR(pg_catalog.->) 1, 0);
	END LOOP;
END
$$;

COMMENT ON FUNCTION idempotency.portable_headers_check(pg_catalog.jsonb) IS
'response headers, checked: an object of strings or arrays of strings, or an array of [name, value] pairs';

/*
 * This transaction's claim of a key, as XactClaimFind finds it: its
 * attempt (NULL if it holds none), after checking an attempt the call
 * named against it (finish.c's api_own_attempt).  doing, if not NULL, names
 * a call that needs the claim's record, which a defer_claim claim in the
 * C edition does not have yet (RegistryOwnWrite): refused for one.
 */
CREATE FUNCTION idempotency.portable_own_attempt(v_owner pg_catalog.text,
												 v_scope pg_catalog.text,
												 v_key pg_catalog.text,
												 v_attempt pg_catalog.int4,
												 doing pg_catalog.text,
												 OUT attempt pg_catalog.int4,
												 OUT kind pg_catalog.text)
RETURNS record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
	IF pg_catalog.current_setting('transaction_read_only')::pg_catalog.bool THEN
		RETURN;
	END IF;
	SELECT c.attempt, c.kind INTO attempt, kind FROM idempotency.portable_claims AS c
	 WHERE c.key OPERATOR(pg_catalog.=) v_key AND c.scope OPERATOR(pg_catalog.=) v_scope
	   AND c.owner OPERATOR(pg_catalog.=) v_owner AND c.xact OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id_if_assigned();
	IF attempt IS NULL THEN
		RETURN;
	END IF;
	IF v_attempt OPERATOR(pg_catalog.<=) 0 OR v_attempt OPERATOR(pg_catalog.>) attempt THEN
		RAISE EXCEPTION 'attempt % of idempotency key "%" in scope "%" was never issued', v_attempt, v_key, v_scope
			USING ERRCODE = 'IK004',
				  DETAIL = pg_catalog.format(CASE WHEN v_attempt OPERATOR(pg_catalog.<=) 0 THEN 'Attempt numbers are positive; ' ELSE '' END
											 OPERATOR(pg_catalog.||) CASE WHEN kind OPERATOR(pg_catalog.=) 'deferred'
											 THEN CASE WHEN v_attempt OPERATOR(pg_catalog.<=) 0 THEN 'this' ELSE 'This' END
												  OPERATOR(pg_catalog.||) ' transaction''s deferred claim of the key is attempt %s.'
											 ELSE CASE WHEN v_attempt OPERATOR(pg_catalog.<=) 0 THEN 'the' ELSE 'The' END
												  OPERATOR(pg_catalog.||) ' latest attempt is %s.' END, attempt),
				  HINT = CASE WHEN v_attempt OPERATOR(pg_catalog.=) 0
						  THEN 'Pass the attempt that idempotent_begin returned (NULL only inside the transaction that made the claim); a driver may read a NULL attempt as 0.'
						  ELSE 'Pass the attempt that idempotent_begin returned.' END;
	END IF;
	IF v_attempt OPERATOR(pg_catalog.<>) attempt THEN
		RAISE EXCEPTION 'attempt % of idempotency key "%" in scope "%" is not current', v_attempt, v_key, v_scope
			USING ERRCODE = 'IK004',
				  DETAIL = pg_catalog.format('This transaction''s claim of the key is attempt %s.', attempt);
	END IF;
	IF doing IS NOT NULL AND kind OPERATOR(pg_catalog.=) 'deferred' THEN
		RAISE EXCEPTION 'cannot % idempotency key "%" in scope "%": it was claimed with defer_claim', doing, v_key, v_scope
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'A deferred claim is written whole by its finish, in the transaction that took it.';
	END IF;
END
$$;

COMMENT ON FUNCTION idempotency.portable_own_attempt(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.int4, pg_catalog.text) IS
'this transaction''s claim of a key: its attempt and kind, the attempt named checked against it';

REVOKE ALL ON FUNCTION idempotency.portable_own_attempt(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.int4, pg_catalog.text) FROM PUBLIC;

/*
 * finish.c's api_explain_miss: a fenced statement on a claim changed no
 * row; raise why, with the SQLSTATE that tells the caller what to do.  A
 * finish (v_status completed or failed, with its answer) that was already
 * done with the same attempt and answer returns instead.  doing names the
 * call in the IK006 detail.
 */
CREATE FUNCTION idempotency.portable_explain_miss(v_owner pg_catalog.text,
												  v_scope pg_catalog.text,
												  v_key pg_catalog.text,
												  v_attempt pg_catalog.int4,
												  v_status pg_catalog.text,
												  v_response pg_catalog.jsonb,
												  v_status_code pg_catalog.int4,
												  v_body pg_catalog.bytea,
												  v_headers pg_catalog.jsonb,
												  doing pg_catalog.text)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
DECLARE
	v_now pg_catalog.timestamptz := pg_catalog.clock_timestamp();
	v_given pg_catalog.bool := v_attempt IS NOT NULL;
	v_finish pg_catalog.bool := v_status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed']);
	v_keystr pg_catalog.text := idempotency.portable_display(v_key);
	rec idempotency.registry;
	first pg_catalog.int4;
BEGIN
	SELECT * INTO rec FROM idempotency.registry AS r
	 WHERE r.key OPERATOR(pg_catalog.=) v_key AND r.scope OPERATOR(pg_catalog.=) v_scope
	   AND r.owner OPERATOR(pg_catalog.=) v_owner;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'idempotency key "%" in scope "%" has no claim', v_keystr, v_scope
			USING ERRCODE = 'IK002',
				  HINT = 'Call idempotent_begin first; a claim that expired or was abandoned no longer exists.';
	END IF;
	-- a fenced-off attempt hears about that first, whatever happened since
	IF v_given AND (v_attempt OPERATOR(pg_catalog.<=) 0 OR v_attempt OPERATOR(pg_catalog.>) rec.attempt) THEN
		RAISE EXCEPTION 'attempt % of idempotency key "%" in scope "%" was never issued', v_attempt, v_keystr, v_scope
			USING ERRCODE = 'IK004',
				  DETAIL = CASE WHEN v_attempt OPERATOR(pg_catalog.<=) 0
							THEN pg_catalog.format('Attempt numbers are positive; the latest attempt is %s.', rec.attempt)
							ELSE pg_catalog.format('The latest attempt is %s.', rec.attempt) END,
				  HINT = CASE WHEN v_attempt OPERATOR(pg_catalog.=) 0
						  THEN 'Pass the attempt that idempotent_begin returned (NULL only inside the transaction that made the claim); a driver may read a NULL attempt as 0.'
						  ELSE 'Pass the attempt that idempotent_begin returned.' END;
	END IF;
	first := pg_catalog.floor(pg_catalog.date_part('epoch', rec.created_at) OPERATOR(pg_catalog.-) 946684800)::pg_catalog.int4;
	IF v_given AND v_attempt OPERATOR(pg_catalog.<) rec.attempt AND v_attempt OPERATOR(pg_catalog.<) first THEN
		RAISE EXCEPTION 'attempt % of idempotency key "%" in scope "%" is older than the key''s record', v_attempt, v_keystr, v_scope
			USING ERRCODE = 'IK004',
				  DETAIL = pg_catalog.format('Attempt numbers start from the clock''s seconds at their claim: the record''s first claim was given attempt %s or a larger one, and attempt %s holds the key now. Attempt %s was never issued to this record: it belonged to an earlier record of the key, since expired or abandoned, or to no claim at all.',
											 first, rec.attempt, v_attempt),
				  HINT = 'Pass the attempt that idempotent_begin returned.';
	END IF;
	IF v_given AND v_attempt OPERATOR(pg_catalog.<>) rec.attempt THEN
		RAISE EXCEPTION 'attempt % of idempotency key "%" in scope "%" is no longer current', v_attempt, v_keystr, v_scope
			USING ERRCODE = 'IK004',
				  DETAIL = pg_catalog.format('A later claim, attempt %s, holds the key now: the lease of attempt %s ran out and it was taken over, or its record expired or was abandoned and the key was claimed again.',
											 rec.attempt, v_attempt);
	END IF;
	IF rec.expires_at OPERATOR(pg_catalog.<=) v_now OR rec.status OPERATOR(pg_catalog.=) 'abandoned' THEN
		RAISE EXCEPTION 'idempotency key "%" in scope "%" has no claim', v_keystr, v_scope
			USING ERRCODE = 'IK002',
				  DETAIL = CASE rec.status WHEN 'abandoned' THEN 'Its claim was abandoned.' ELSE 'Its claim expired.' END,
				  HINT = 'Call idempotent_begin first; a claim that expired or was abandoned no longer exists.';
	END IF;
	IF rec.status OPERATOR(pg_catalog.<>) 'processing' THEN
		-- the same finish again, its acknowledgement lost: done already
		IF v_finish AND v_given
		   AND rec.status OPERATOR(pg_catalog.=) v_status
		   AND COALESCE(rec.status_code, 0) OPERATOR(pg_catalog.=) COALESCE(v_status_code, 0)
		   AND rec.response IS NOT DISTINCT FROM v_response
		   AND rec.headers IS NOT DISTINCT FROM v_headers
		   AND rec.body IS NOT DISTINCT FROM v_body THEN
			RETURN;
		END IF;
		IF v_finish AND v_given THEN
			RAISE EXCEPTION 'idempotency key "%" in scope "%" is already finished', v_keystr, v_scope
				USING ERRCODE = 'IK003',
					  DETAIL = pg_catalog.format('Its status is "%s".', rec.status),
					  HINT = 'A finish repeated with the same attempt and the same answer returns the stored status; this one differs.';
		END IF;
		RAISE EXCEPTION 'idempotency key "%" in scope "%" is already finished', v_keystr, v_scope
			USING ERRCODE = 'IK003',
				  DETAIL = pg_catalog.format('Its status is "%s".', rec.status);
	END IF;
	-- a claim committed in an earlier transaction is ended by its attempt
	IF NOT v_given THEN
		RAISE EXCEPTION 'idempotency key "%" in scope "%" was claimed in an earlier transaction', v_keystr, v_scope
			USING ERRCODE = 'IK006',
				  DETAIL = pg_catalog.format('Outside the transaction that took a claim, %s it takes the attempt idempotent_begin returned: a worker whose claim was taken over must not overwrite the new owner''s answer.', doing),
				  HINT = 'Pass attempt => the attempt that idempotent_begin returned.';
	END IF;
	RAISE EXCEPTION 'idempotency key "%" in scope "%" changed concurrently', v_keystr, v_scope
		USING ERRCODE = '40001';
END
$$;

COMMENT ON FUNCTION idempotency.portable_explain_miss(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4, pg_catalog.bytea, pg_catalog.jsonb, pg_catalog.text) IS
'raises why a fenced statement on a claim changed no row';

REVOKE ALL ON FUNCTION idempotency.portable_explain_miss(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4, pg_catalog.bytea, pg_catalog.jsonb, pg_catalog.text) FROM PUBLIC;

/*
 * What finish (with an answer) and abandon (v_status abandoned, no
 * answer) share, as finish.c's api_end_claim: end the owner's live claim
 * of the key, fenced by this transaction's own claim's attempt or by the
 * attempt named, or say why there is none.  call_only: a finish of
 * idempotent_call's own claim, which must be one.
 */
CREATE FUNCTION idempotency.portable_end_claim(v_owner pg_catalog.text,
											   v_scope pg_catalog.text,
											   v_key pg_catalog.text,
											   v_attempt pg_catalog.int4,
											   v_status pg_catalog.text,
											   v_response pg_catalog.jsonb,
											   v_status_code pg_catalog.int4,
											   v_body pg_catalog.bytea,
											   v_headers pg_catalog.jsonb,
											   v_ttl pg_catalog.interval,
											   call_only pg_catalog.bool DEFAULT false)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
DECLARE
	v_now pg_catalog.timestamptz := pg_catalog.clock_timestamp();
	v_expires pg_catalog.timestamptz;
	mine record;
	n pg_catalog.int8 := 0;
BEGIN
	IF v_ttl IS NOT NULL THEN
		v_expires := idempotency.portable_after(v_now, v_ttl, 'ttl');
	END IF;
	IF v_status OPERATOR(pg_catalog.=) 'abandoned' THEN
		v_expires := v_now;
	END IF;
	mine := idempotency.portable_own_attempt(v_owner, v_scope, v_key, v_attempt, NULL);
	IF call_only AND mine.kind OPERATOR(pg_catalog.<>) 'call' THEN
		RAISE EXCEPTION 'idempotency key "%" in scope "%" was not claimed by idempotent_call in this transaction', v_key, v_scope
			USING ERRCODE = 'object_not_in_prerequisite_state';
	END IF;
	IF mine.attempt IS NOT NULL THEN
		v_attempt := mine.attempt;
	END IF;
	IF v_attempt IS NOT NULL THEN
		UPDATE idempotency.registry AS r
		   SET status = v_status, response = v_response, status_code = v_status_code, body = v_body,
			   headers = v_headers, updated_at = v_now, lease_until = NULL,
			   expires_at = COALESCE(v_expires, r.expires_at)
		 WHERE r.key OPERATOR(pg_catalog.=) v_key AND r.scope OPERATOR(pg_catalog.=) v_scope
		   AND r.owner OPERATOR(pg_catalog.=) v_owner
		   AND r.status OPERATOR(pg_catalog.=) 'processing' AND r.expires_at OPERATOR(pg_catalog.>) v_now
		   AND r.attempt OPERATOR(pg_catalog.=) v_attempt;
		GET DIAGNOSTICS n = ROW_COUNT;
	END IF;
	IF n OPERATOR(pg_catalog.=) 0 THEN
		PERFORM idempotency.portable_explain_miss(v_owner, v_scope, v_key, v_attempt, v_status, v_response,
												  v_status_code, v_body, v_headers, 'finishing or abandoning');
	END IF;
	IF mine.attempt IS NOT NULL THEN
		DELETE FROM idempotency.portable_claims AS c
		 WHERE c.key OPERATOR(pg_catalog.=) v_key AND c.scope OPERATOR(pg_catalog.=) v_scope
		   AND c.owner OPERATOR(pg_catalog.=) v_owner AND c.xact OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id();
	END IF;
END
$$;

COMMENT ON FUNCTION idempotency.portable_end_claim(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4, pg_catalog.bytea, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.bool) IS
'end an owner''s claim of a key (finish or abandon), fenced by its attempt, or raise why not';

REVOKE ALL ON FUNCTION idempotency.portable_end_claim(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4, pg_catalog.bytea, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.bool) FROM PUBLIC;
