/*
 * idempotent_checkpoint: record, in the caller's transaction, the step the
 * claim has reached and a small state; fenced as idempotent_finish is.
 */
CREATE FUNCTION idempotency.idempotent_checkpoint(key pg_catalog.text,
												  recovery_point pg_catalog.text,
												  recovery_state pg_catalog.jsonb DEFAULT NULL,
												  scope pg_catalog.text DEFAULT '',
												  attempt pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_idempotent_checkpoint'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_checkpoint(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) IS
'record the step a claim has reached and its state, with the step''s own writes; a take-over resumes from it';

REVOKE ALL ON FUNCTION idempotency.idempotent_checkpoint(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
