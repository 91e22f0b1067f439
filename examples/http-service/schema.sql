-- The service's business table, and what its database role may do.  Run as
-- an administrator, in a database where CREATE EXTENSION idempotency ran:
--   psql -v role=app -f schema.sql
-- The role needs nothing of the extension but grant_usage's grants.
CREATE TABLE charges (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	amount integer NOT NULL CHECK (amount > 0),
	currency text NOT NULL,
	idempotency_key text NOT NULL,	-- kept for audit; no unique index needed
	created_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON charges TO :"role";
SELECT idempotency.grant_usage(:'role');
