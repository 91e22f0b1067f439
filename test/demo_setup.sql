-- Demo schema: an order table, a charges table (the payment provider's side)
-- and the request handler a shop would write.
\echo '==> setting up: CREATE EXTENSION idempotency, orders, charges, shop.pay()'
CREATE EXTENSION idempotency;
CREATE SCHEMA shop;
CREATE TABLE shop.orders (id text PRIMARY KEY, status text NOT NULL DEFAULT 'created');
-- the third line of defence: one charge per idempotency key, whatever happens
CREATE TABLE shop.charges (
	key idempotency.key PRIMARY KEY,
	order_id text NOT NULL REFERENCES shop.orders,
	amount_cents int NOT NULL,
	charged_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO shop.orders VALUES ('ORD20260711001');

-- begin, do the work once, finish: all in the caller's transaction
CREATE FUNCTION shop.pay(order_id text, amount_cents int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
	k idempotency.key := idempotency.make_key('order', order_id, 'pay');
	b record;
	answer jsonb;
BEGIN
	SELECT * INTO b FROM idempotency.idempotent_begin(k, 'payments',
		jsonb_build_object('order', order_id, 'amount_cents', amount_cents));
	IF b.outcome = 'replay' THEN
		RAISE NOTICE 'key %: replay of the stored answer, nothing charged', k;
		RETURN b.response;
	ELSIF b.outcome = 'in_progress' THEN
		RAISE NOTICE 'key %: still in progress elsewhere', k;
		RETURN jsonb_build_object('status', 'in progress');
	END IF;
	RAISE NOTICE 'key %: execute, charging the card', k;
	INSERT INTO shop.charges (key, order_id, amount_cents) VALUES (k, order_id, amount_cents);
	UPDATE shop.orders SET status = 'paid' WHERE id = order_id;
	answer := jsonb_build_object('order', order_id, 'status', 'paid', 'charged_cents', amount_cents);
	PERFORM idempotency.idempotent_finish(k, answer, 'payments', b.attempt);
	RETURN answer;
END $$;
