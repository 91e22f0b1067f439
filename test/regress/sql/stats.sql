--
-- Statistics: counters in shared memory, added at the end of each
-- transaction.  (Each statement below is its own transaction.)
--
SET search_path = public;

SELECT idempotency.stats_reset();
SELECT outcome FROM idempotency.idempotent_begin('s1', request => '{"a": 1}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('s1', request => '{"a": 1}', external => true);
SELECT idempotency.idempotent_begin('s1', request => '{"a": 2}', external => true);
SELECT idempotency.idempotent_finish('s1', '{}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 's1' AND r.scope = ''));
SELECT outcome FROM idempotency.idempotent_begin('s1', request => '{"a": 1}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('s2', lease => '1 minute', external => true);
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 's2';
SELECT outcome FROM idempotency.idempotent_begin('s2', external => true);
SELECT idempotency.idempotent_abandon('s2', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 's2' AND r.scope = ''));
SELECT idempotency.inbox_receive('c', 'm1'), idempotency.inbox_receive('c', 'm1');
SELECT count(*) FROM idempotency.inbox_receive_batch('c', ARRAY['m1', 'm2', 'm2', 'm3']);
SELECT idempotency.consume_token(idempotency.issue_token());
SELECT idempotency.define_state_machine('stats_m', '{"a": ["b"]}');
CREATE TABLE sm (id int PRIMARY KEY, s text NOT NULL);
CREATE TRIGGER sm_s BEFORE INSERT OR UPDATE ON sm FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('stats_m', 's');
INSERT INTO sm VALUES (1, 'a');
UPDATE sm SET s = 'b';
UPDATE sm SET s = 'a';
CREATE TABLE vg (id int PRIMARY KEY, v int NOT NULL);
CREATE TRIGGER vg_v BEFORE UPDATE ON vg FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('v');
INSERT INTO vg VALUES (1, 1);
UPDATE vg SET v = 7;
UPDATE idempotency.registry SET expires_at = now() - interval '1 second', attempt = attempt - 120;
SELECT idempotency.cleanup();

SELECT begins_execute, begins_replay, begins_in_progress, takeovers, request_mismatches,
	   finishes, abandons, inbox_new, inbox_duplicates, tokens_issued, tokens_consumed,
	   transitions_checked, transitions_rejected, stale_writes, rows_cleaned,
	   stats_reset > now() - interval '1 hour' AS recently_reset
  FROM idempotency.stats;
SELECT idempotency.stats_reset();
SELECT begins_execute + finishes + rows_cleaned AS after_reset FROM idempotency.stats;

-- who may look, and who may reset
CREATE ROLE regress_nosy;
CREATE ROLE regress_monitor IN ROLE pg_monitor;
SET ROLE regress_nosy;
SELECT * FROM idempotency.stats;
SELECT idempotency.stats_reset();
RESET ROLE;
SET ROLE regress_monitor;
SELECT count(*) AS monitor_reads FROM idempotency.stats;
SELECT idempotency.stats_reset();
RESET ROLE;

DROP TABLE sm, vg;
SELECT idempotency.drop_state_machine('stats_m');
TRUNCATE idempotency.registry, idempotency.inbox, idempotency.tokens;
DROP ROLE regress_nosy, regress_monitor;
RESET search_path;
