-- bench/clients/setup.sql: the database that bench/clients.sh serves
-- POST /payments from: one payments table per variant (no unique key on
-- key: the checks count the rows each key got), the extension for
-- pg-idempotency, the hand-written handler's keys table, and the floor's
-- answers.  DBOS keeps its
-- workflows in a system database of its own (dbos_sys) and its transaction
-- steps' outputs in schema dbos here, which its data source creates.
CREATE EXTENSION idempotency;
CREATE EXTENSION pg_stat_statements;
CREATE TABLE payments_ours (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
CREATE TABLE payments_ourssql (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
-- the ourssql variant's handler: the same write and answer, in SQL
CREATE FUNCTION pay_ourssql(request jsonb) RETURNS jsonb LANGUAGE sql AS $$
	INSERT INTO payments_ourssql (key, amount)
	VALUES (request->>'key', (request->'body'->>'amount')::int)
	RETURNING jsonb_build_object('status', 201,
		'body', jsonb_build_object('id', id::text, 'key', key, 'amount', amount))
$$;
CREATE TABLE payments_expidem (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
CREATE TABLE payments_nodeidem (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
CREATE TABLE payments_dbos (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
CREATE TABLE payments_hand (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
CREATE TABLE hand_keys (
	key text PRIMARY KEY,
	status int,
	body text,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE payments_floor (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
CREATE TABLE floor_answers (key text PRIMARY KEY, body text NOT NULL);
