--
-- A role that was not granted the API gets core's permission error, with a
-- hint at grant_usage() when idempotency.permission_hints is on
-- (src/admin/hints.c, from the view application_api): in autocommit, in a transaction and under a savepoint; a PL/pgSQL handler sees the error as core raised it.
-- Other permission errors are left alone.
--
SET search_path = public;
CREATE ROLE regress_stranger;
CREATE FUNCTION public.not_ours(int) RETURNS int LANGUAGE sql AS 'SELECT $1';
REVOKE ALL ON FUNCTION public.not_ours(int) FROM PUBLIC;
CREATE TABLE public.hint_log (what text);
GRANT ALL ON public.hint_log TO regress_stranger;

-- by default core's error is left as it is
SET ROLE regress_stranger;
SELECT idempotency.idempotent_begin('k');
RESET ROLE;
-- with idempotency.permission_hints on, it gets the hint
SET idempotency.permission_hints = on;
SET ROLE regress_stranger;
-- autocommit: every function and view that grant_usage grants
SELECT idempotency.idempotent_begin('k');
SELECT idempotency.idempotent_finish('k', '{}');
SELECT idempotency.idempotent_abandon('k');
SELECT idempotency.inbox_receive('c', 'm');
SELECT idempotency.inbox_receive_batch('c', ARRAY['m']);
SELECT idempotency.lock('k');
SELECT idempotency.try_lock('k');
SELECT idempotency.issue_token();
SELECT idempotency.consume_token('tk_x');
SELECT * FROM idempotency.my_records;
SELECT * FROM idempotency.my_tokens;
SELECT * FROM idempotency.lookup('k');
SELECT idempotency.outbox_send('t', '{}');
SELECT * FROM idempotency.outbox_fetch();
SELECT idempotency.outbox_ack(1, ARRAY['m']);
SELECT * FROM idempotency.my_outbox;
SELECT idempotency.idempotent_checkpoint('k', 'step');
SELECT * FROM idempotency.idempotent_renew('k', '1 minute');
SELECT * FROM idempotency.claim_stalled();
SELECT * FROM idempotency.my_stalled_claims;
-- not for grant_usage, or not ours: no hint
SELECT idempotency.cleanup();
SELECT idempotency.forget_role('x');
SELECT * FROM idempotency.registry;
SELECT public.not_ours(1);
-- in a transaction, then under a savepoint; the work after it commits
BEGIN;
SELECT idempotency.idempotent_begin('k');
ROLLBACK;
BEGIN;
INSERT INTO public.hint_log VALUES ('before');
SAVEPOINT s;
SELECT idempotency.issue_token();
ROLLBACK TO SAVEPOINT s;
INSERT INTO public.hint_log VALUES ('after');
COMMIT;
-- caught by PL/pgSQL: the error as core raised it, nothing added
DO $$
DECLARE
	hint text;
BEGIN
	PERFORM idempotency.idempotent_begin('k');
EXCEPTION WHEN insufficient_privilege THEN
	GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
	RAISE NOTICE 'caught: % (hint: "%")', SQLERRM, hint;
	INSERT INTO public.hint_log VALUES ('in handler');
END
$$;
SELECT what FROM public.hint_log ORDER BY what;
RESET ROLE;

-- the hint comes from a log hook: with errors kept out of the server log,
-- core does not call it
SET log_min_messages = fatal;
SET ROLE regress_stranger;
SELECT idempotency.idempotent_begin('k');
RESET ROLE;
RESET log_min_messages;
RESET idempotency.permission_hints;

DROP TABLE public.hint_log;
DROP FUNCTION public.not_ours(int);
DROP ROLE regress_stranger;
RESET search_path;
