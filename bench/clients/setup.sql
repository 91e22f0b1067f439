-- bench/clients/setup.sql: the database that bench/clients.sh serves
-- POST /payments from: one payments table per variant (no unique key on
-- key: the checks count the rows each key got), the extension for
-- pg-idempotency, the hand-written handler's keys table.  DBOS keeps its
-- workflows in a system database of its own (dbos_sys) and its transaction
-- steps' outputs in schema dbos here, which its data source creates.
CREATE EXTENSION idempotency;
CREATE EXTENSION pg_stat_statements;
CREATE TABLE payments_ours (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
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
