-- What the package's tests need in their database, beside the extension:
-- the business tables whose rows they count, and a trigger that makes "in
-- flight" and the errors to map happen when a test says, not by timing.
-- For testing only, never in production.  Run as an administrator:
--   psql -v role=app -f test/schema.sql
-- (app: the role the tests connect as).

-- charges: one row per effect of the HTTP tests
CREATE TABLE charges (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	idempotency_key text NOT NULL,
	scope text NOT NULL,
	amount integer NOT NULL,
	fail_with text,
	created_at timestamptz NOT NULL DEFAULT now()
);

-- A row waits for advisory lock 4242 while a test holds it (a request in
-- flight), and a row with fail_with set fails with that SQLSTATE, as
-- PostgreSQL would raise it.
CREATE FUNCTION charges_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(4242);
	IF NEW.fail_with IS NOT NULL THEN
		RAISE EXCEPTION 'failing with % as the test asked', NEW.fail_with
			USING ERRCODE = NEW.fail_with;
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER charges_hold BEFORE INSERT ON charges
	FOR EACH ROW EXECUTE FUNCTION charges_hold();

-- The one-statement mode's handler: a charge and its answer, header lines
-- in their order, as a SQL function that idempotent_call runs.
CREATE FUNCTION charge_sql(request jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
	c record;
BEGIN
	INSERT INTO charges (idempotency_key, scope, amount, fail_with)
	VALUES (request->>'key', (request->>'method') || ' ' || (request->>'path'),
			(request->'body'->>'amount')::integer, request->'body'->>'fail')
	RETURNING id::text AS id, amount INTO c;
	RETURN jsonb_build_object('status', 201,
		'headers', jsonb_build_array(jsonb_build_array('Location', '/charges/' || c.id),
									 jsonb_build_array('Link', '</charges/' || c.id || '/refunds>; rel="refunds"'),
									 jsonb_build_array('Set-Cookie', 'a=1'),
									 jsonb_build_array('Link', '</charges/' || c.id || '/receipt>; rel="receipt"')),
		'body', jsonb_build_object('id', c.id, 'amount', c.amount));
END $$;

-- receipts: the local writes of external work, one per finished key
CREATE TABLE receipts (
	idempotency_key text PRIMARY KEY,
	charge text NOT NULL
);

-- invoices: one row per message a consumer applied
CREATE TABLE invoices (
	message_id text NOT NULL,
	amount integer NOT NULL
);

-- published: what the relays published, one row per publication (copies
-- included, so a test sees them)
CREATE TABLE published (
	message_id text NOT NULL,
	topic text NOT NULL,
	ordering_key text,
	payload jsonb NOT NULL,
	attempt bigint NOT NULL,
	at timestamptz NOT NULL DEFAULT clock_timestamp()
);

GRANT SELECT, INSERT ON charges, receipts, invoices, published TO :"role";
GRANT EXECUTE ON FUNCTION charge_sql(jsonb) TO :"role";
SELECT idempotency.grant_usage(:'role');
