/*
 * idempotent_call(key, handler, request) claims the key as a transactional
 * idempotent_begin does, runs handler(request) on execute and finishes with
 * what it returned: one statement per request for a client that would send
 * begin, its write and finish separately.  The handler runs as the caller,
 * with the caller's search_path (src/registry/begin.c).
 */
CREATE FUNCTION idempotency.idempotent_call(key pg_catalog.text,
											handler pg_catalog.regprocedure,
											request pg_catalog.jsonb DEFAULT NULL,
											scope pg_catalog.text DEFAULT '',
											ttl pg_catalog.interval DEFAULT '24 hours',
											max_wait pg_catalog.interval DEFAULT NULL,
											OUT outcome pg_catalog.text,
											OUT status pg_catalog.text,
											OUT response pg_catalog.jsonb,
											OUT attempt pg_catalog.int4,
											OUT retry_after pg_catalog.int4)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_idempotent_call'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_call IS
'run a handler function under an idempotency key: execute (the handler ran), replay or in_progress';

REVOKE ALL ON FUNCTION idempotency.idempotent_call FROM PUBLIC;
