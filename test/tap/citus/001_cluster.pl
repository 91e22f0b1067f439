# Citus: a coordinator and two workers, shared_preload_libraries =
# 'citus,idempotency'.  idempotency.citus_setup() and citus_status(); the API
# through the coordinator for granted roles, with callers' SQL unchanged; the
# views; the inbox's batch without XX000 or a broken session; the cleanup,
# by hand and in the background, on every shard and once per cluster;
# state machine definitions reaching every node's cache and the same
# session's; history naming the distributed table on whichever node holds
# the shard; a concurrent duplicate through two coordinator sessions, claimed
# and deferred; and a worker killed in the middle of begin + business write
# + finish, before and after the coordinator's commit (two-phase commit
# recovery).
#
# Runs only where Citus is installed in the PostgreSQL being tested;
# test/run_all.sh runs it as its own suite and says so when it is skipped.
# No test asserts an attempt number: attempts are only compared.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CitusCluster;

# --- the cluster ------------------------------------------------------------

my ($coord, @workers) = citus_cluster(q{
citus.recover_2pc_interval = '1s'
# the two-phase commit test holds the coordinator's commit in synchronous
# replication, which needs WAL senders
wal_level = logical
max_wal_senders = 4
});

citus_join('postgres', $coord, @workers);
is($coord->safe_psql('postgres', 'SELECT count(*) FROM pg_dist_node'), '3',
	'a coordinator and two workers');

# the node (by port) holding the shard of a table for a value
sub port_of
{
	my ($table, $value) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT p.nodeport FROM pg_dist_shard_placement AS p
		 WHERE p.shardid = get_shard_id_for_distribution_column('$table', $value)});
}

# a node by port
sub node_at
{
	my ($port) = @_;
	my ($node) = grep { $_->port == $port } ($coord, @workers);
	return $node;
}

# --- citus_setup(): refused where it cannot work ---------------------------

# a database of the coordinator without Citus, then a worker
$coord->safe_psql('postgres', 'CREATE DATABASE plain');
$coord->safe_psql('plain',
	'CREATE EXTENSION idempotency; CREATE TABLE done (what text)');

my ($ret, $out, $err) = $coord->psql('plain', 'SELECT idempotency.citus_setup()');
like($err, qr/ERROR:  extension "citus" is not installed in this database/,
	'without Citus: a clear error');
($ret, $out, $err) = $coord->psql('plain',
	'\set VERBOSITY verbose
	 SELECT idempotency.citus_setup()');
like($err, qr/ERROR:  55000:/, 'its SQLSTATE is 55000 (object_not_in_prerequisite_state)');
($ret, $out, $err) = $coord->psql(
	'plain', q{
	BEGIN;
	INSERT INTO done VALUES ('in a transaction, before the error');
	SAVEPOINT s;
	SELECT idempotency.citus_setup();
	ROLLBACK TO SAVEPOINT s;
	INSERT INTO done VALUES ('after the savepoint');
	DO $$ BEGIN PERFORM idempotency.citus_setup(); EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END $$;
	INSERT INTO done VALUES ('after an EXCEPTION block');
	COMMIT;
	BEGIN;
	SELECT idempotency.citus_setup();
	ROLLBACK;
	INSERT INTO done VALUES ('after a failed transaction');
	SELECT idempotency.citus_setup();
	INSERT INTO done VALUES ('in autocommit, after the error');
}, on_error_stop => 0);
like($err, qr/extension "citus" is not installed/, 'the error under a savepoint and in autocommit');
is($coord->safe_psql('plain', q{SELECT string_agg(what, ', ' ORDER BY what) FROM done}),
	'after a failed transaction, after an EXCEPTION block, after the savepoint, in a transaction, before the error, in autocommit, after the error',
	'work around the error still commits (transaction, savepoint, EXCEPTION block, autocommit)');

$coord->safe_psql('postgres', 'CREATE EXTENSION idempotency');
is($workers[0]->safe_psql('postgres',
		q{SELECT count(*) FROM pg_extension WHERE extname = 'idempotency'}),
	'1', 'CREATE EXTENSION on the coordinator reached the workers');
($ret, $out, $err) = $workers[0]->psql('postgres', 'SELECT idempotency.citus_setup()');
like($err, qr/ERROR:  this node is not the Citus coordinator\nDETAIL:  This node is in Citus group [1-9]\d*; the coordinator is group 0\./,
	'on a worker: a clear error naming its group');
($ret, $out, $err) = $workers[0]->psql('postgres', q{
	BEGIN;
	SAVEPOINT s;
	SELECT idempotency.citus_setup();
	ROLLBACK TO SAVEPOINT s;
	SELECT 'still here';
	COMMIT;
}, on_error_stop => 0);
is($out, 'still here', 'and a transaction goes on after it');

# --- citus_setup(): the distribution ------------------------------------------

# an application role granted before the setup, one after; a record and a
# state machine from before the setup
$coord->safe_psql('postgres', q{
	CREATE ROLE app_before LOGIN;
	SELECT idempotency.grant_usage('app_before');
	SET ROLE app_before;
	BEGIN;
	SELECT idempotency.idempotent_begin('from-before', external => true);
	SELECT idempotency.idempotent_finish('from-before', '{"kept": true}');
	COMMIT;
	RESET ROLE;
	SELECT idempotency.define_state_machine('order_status',
		'{"created": ["paying", "cancelled"], "paying": ["paid", "cancelled"], "paid": []}');
});

$coord->safe_psql('postgres', 'SELECT idempotency.citus_setup()');
my $status = q{SELECT string_agg(concat_ws(' ', object, distribution, distributed_by, shards), E'\n' ORDER BY kind, object)
				 FROM idempotency.citus_status()};
my $expected = join("\n",
	'idempotency.citus_idempotent_abandon(idempotency.key,text,integer) distributed key',
	'idempotency.citus_idempotent_begin(idempotency.key,text,jsonb,interval,interval,boolean,boolean,interval,boolean,boolean) distributed key',
	'idempotency.citus_idempotent_checkpoint(idempotency.key,text,jsonb,text,integer) distributed key',
	'idempotency.citus_idempotent_finish(idempotency.key,jsonb,text,integer,boolean,integer,bytea,interval,jsonb) distributed key',
	'idempotency.citus_idempotent_renew(idempotency.key,interval,text,integer) distributed key',
	'idempotency.citus_lookup(idempotency.key,text,jsonb) distributed key',
	'idempotency.consume_token(text,text) distributed token',
	'idempotency.idempotent_abandon(text,text,integer) distributed key',
	'idempotency.idempotent_begin(text,text,jsonb,interval,interval,boolean,boolean,interval,boolean,boolean) distributed key',
	'idempotency.idempotent_checkpoint(text,text,jsonb,text,integer) distributed key',
	'idempotency.idempotent_finish(text,jsonb,text,integer,boolean,integer,bytea,interval,jsonb) distributed key',
	'idempotency.idempotent_renew(text,interval,text,integer) distributed key',
	'idempotency.inbox_receive(text,text,interval) distributed message_id',
	'idempotency.inbox_receive_batch(text,text[],interval) local',
	'idempotency.issue_token(text,interval) local',
	'idempotency.lookup(text,text,jsonb) distributed key',
	'idempotency.outbox_ack(bigint,text[],interval) local',
	'idempotency.outbox_fetch(integer,interval) local',
	'idempotency.outbox_send(text,jsonb,text,jsonb,text) local',
	'idempotency.application_roles reference 1',
	'idempotency.inbox distributed message_id 32',
	'idempotency.outbox distributed ordering_key 32',
	'idempotency.registry distributed key 32',
	'idempotency.state_history local',
	'idempotency.state_machines reference 1',
	'idempotency.tokens distributed token 32',
	'idempotency.my_outbox owner-run',
	'idempotency.my_records owner-run',
	'idempotency.my_tokens owner-run');
is($coord->safe_psql('postgres', $status), $expected,
	'citus_status: tables, API functions and views as citus_setup placed them');
is( $coord->safe_psql('postgres', q{
	SELECT count(DISTINCT colocation_id) FROM idempotency.citus_status()
	 WHERE object IN ('idempotency.registry', 'idempotency.tokens')}),
	'1', 'tokens are co-located with the registry');

$coord->safe_psql('postgres', 'SELECT idempotency.citus_setup()');
is($coord->safe_psql('postgres', $status), $expected, 'citus_setup() again changes nothing');

$coord->safe_psql('postgres', q{
	CREATE ROLE app_after LOGIN;
	SELECT idempotency.grant_usage('app_after');
});

is( $coord->safe_psql('postgres', q{
	SET ROLE app_before;
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('from-before', external => true)}),
	'replay {"kept": true}', 'a record made before the setup replays after it');

# --- the API through the coordinator, callers' SQL unchanged -----------------

# The example of doc/scaling-out.md: the business table is distributed by the key, in a
# co-location group of its own (see doc/scaling-out.md).
$coord->safe_psql('postgres', q{
	CREATE TABLE public.charges (key idempotency.key PRIMARY KEY, order_id text, amount int);
	SELECT create_distributed_table('public.charges', 'key', colocate_with => 'none');
	CREATE TABLE public.ledger (key idempotency.key NOT NULL, amount int);
	SELECT create_distributed_table('public.ledger', 'key', colocate_with => 'charges');
	GRANT SELECT, INSERT ON public.charges, public.ledger TO app_before, app_after;
	CREATE FUNCTION public.pay(order_id text, amount int) RETURNS jsonb
	LANGUAGE plpgsql SET search_path = pg_catalog AS $$
	DECLARE
		k idempotency.key := idempotency.make_key('order', order_id, 'pay');
		b record;
		answer jsonb;
	BEGIN
		b := idempotency.idempotent_begin(k, 'payments',
				 request => jsonb_build_object('order', order_id, 'amount', amount), external => true);
		IF b.outcome = 'replay' THEN
			RETURN b.response;
		ELSIF b.outcome = 'in_progress' THEN
			RETURN '{"status": "in progress"}';
		END IF;
		INSERT INTO public.charges VALUES (k, order_id, amount);
		answer := jsonb_build_object('order', order_id, 'charged', amount);
		PERFORM idempotency.idempotent_finish(k, answer, 'payments', b.attempt);
		RETURN answer;
	END $$;
});

for my $role (qw(app_before app_after))
{
	is( $coord->safe_psql('postgres', qq{
		SET ROLE $role;
		SELECT public.pay('$role-1', 10);
		SELECT public.pay('$role-1', 10);
		BEGIN;
		SELECT public.pay('$role-2', 20);
		SELECT public.pay('$role-3', 30);
		COMMIT;
		BEGIN;
		SELECT public.pay('$role-4', 40);
		ROLLBACK;
		SELECT count(*) FROM public.charges WHERE order_id LIKE '$role-%';
	}),
		qq{{"order": "$role-1", "charged": 10}
{"order": "$role-1", "charged": 10}
{"order": "$role-2", "charged": 20}
{"order": "$role-3", "charged": 30}
{"order": "$role-4", "charged": 40}
3}, "$role: pay() executes once, replays, commits and rolls back across the workers");

	# top-level calls, which Citus runs on the key's node
	is( $coord->safe_psql('postgres', qq{
		SET ROLE $role;
		SELECT outcome FROM idempotency.idempotent_begin('$role-direct', request => '{"n": 1}', external => true);
		SELECT outcome FROM idempotency.idempotent_begin('$role-direct', request => '{"n": 1}', external => true);
		SELECT idempotency.idempotent_finish('$role-direct', '{"done": 1}',
			attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = '$role-direct'));
		SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('$role-direct', request => '{"n": 1}', external => true);
		SELECT outcome FROM idempotency.idempotent_begin('$role-abandoned', external => true);
		SELECT idempotency.idempotent_abandon('$role-abandoned',
			attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = '$role-abandoned'));
		SELECT outcome FROM idempotency.idempotent_begin('$role-abandoned', external => true);
		SELECT idempotency.idempotent_finish('$role-abandoned', '{"error": "declined"}', failed => true,
			attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = '$role-abandoned'));
		SELECT outcome || ' ' || status FROM idempotency.idempotent_begin('$role-abandoned', external => true);
	}),
		qq{execute
in_progress
completed
replay {"done": 1}
execute

execute
failed
replay failed}, "$role: begin, in_progress, finish, replay, abandon and failed on the key's node");

	($ret, $out, $err) = $coord->psql('postgres', qq{
		SET ROLE $role;
		SELECT outcome FROM idempotency.idempotent_begin('$role-direct', request => '{"n": 2}', external => true);
	}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:  IK001:/,
		"$role: a request mismatch keeps its SQLSTATE through Citus");
}

# take-over with fencing: attempts only grow, the superseded one is refused
$coord->safe_psql('postgres', q{
	SET ROLE app_before;
	SELECT idempotency.idempotent_begin('lapsed', external => true);
	RESET ROLE;
	UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'lapsed';
});
($ret, $out, $err) = $coord->psql('postgres', q{
	SET ROLE app_before;
	SELECT attempt AS first FROM idempotency.my_records WHERE key = 'lapsed' \gset
	SELECT outcome, attempt > :first FROM idempotency.idempotent_begin('lapsed', external => true);
	SELECT idempotency.idempotent_finish('lapsed', '{}', attempt => :first);
}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
is($out, 'execute|t', 'a lapsed lease is taken over with a greater attempt');
like($err, qr/ERROR:  IK004:/, 'the superseded attempt is fenced off (IK004)');

# tokens, co-located with the registry
is( $coord->safe_psql('postgres', q{
	SET ROLE app_after;
	SELECT idempotency.issue_token('checkout') AS t \gset
	SELECT idempotency.consume_token(:'t', 'checkout'), idempotency.consume_token(:'t', 'checkout');
	SELECT outcome FROM idempotency.idempotent_begin(idempotency.issue_token(), require_token => true, external => true);
}), "t|f\nexecute", 'tokens: consumed once; require_token finds the token beside the record');

# --- the views for granted roles -----------------------------------------------

is( $coord->safe_psql('postgres', q{
	SET ROLE app_before;
	SELECT string_agg(key::text, ' ' ORDER BY key) FROM idempotency.my_records WHERE key::text LIKE 'app_%-direct' OR key = 'from-before';
}), 'app_before-direct from-before', 'my_records: a granted role sees its own records through the coordinator');
is( $coord->safe_psql('postgres', q{
	SET ROLE app_after;
	SELECT count(*), bool_and(scope = 'payments') FROM idempotency.my_records WHERE key::text LIKE 'order:%';
	SELECT string_agg(state, ' ' ORDER BY state) FROM idempotency.my_tokens;
}), "3|t\nused used", 'my_records and my_tokens for the role granted after the setup');
($ret, $out, $err) = $coord->psql('postgres', 'SET ROLE app_after; SELECT count(*) FROM idempotency.registry');
like($err, qr/permission denied for table registry/, 'the registry itself stays closed');
is( $workers[1]->safe_psql('postgres', q{
	SET ROLE app_before;
	SELECT count(*) FROM idempotency.my_records WHERE key = 'from-before';
	SELECT outcome FROM idempotency.idempotent_begin('from-before', external => true);
}), "1\nreplay", 'on a worker too: the view and the API work for the granted role');

# --- the inbox's batch ------------------------------------------------------------

is( $coord->safe_psql('postgres', q{
	SET ROLE app_before;
	SELECT string_agg(x, ' ') FROM idempotency.inbox_receive_batch('billing', ARRAY['m1', 'm2', 'm1', 'm3']) AS x;
	SELECT string_agg(x, ' ') FROM idempotency.inbox_receive_batch('billing', ARRAY['m4', 'm2', 'm5']) AS x;
	SELECT count(*) FROM idempotency.inbox_receive_batch('billing', ARRAY['m2']);
	SELECT string_agg(x, ' ') FROM idempotency.inbox_receive_batch('billing', ARRAY['m6']) AS x;
	SELECT idempotency.inbox_receive('billing', 'm6'), idempotency.inbox_receive('billing', 'm7');
	SELECT 'session still fine';
}), "m1 m2 m3\nm4 m5\n0\nm6\nf|t\nsession still fine",
	'batches with seen ids, one seen id and one new id: no XX000, the session goes on');

is( $coord->safe_psql('postgres', q{
	SET ROLE app_before;
	BEGIN;
	SELECT string_agg(x, ' ') FROM idempotency.inbox_receive_batch('billing', ARRAY['m7', 'm8']) AS x;
	SAVEPOINT s;
	SELECT string_agg(x, ' ') FROM idempotency.inbox_receive_batch('billing', ARRAY['m8', 'm9']) AS x;
	ROLLBACK TO SAVEPOINT s;
	DO $$ BEGIN
		PERFORM idempotency.inbox_receive_batch('billing', ARRAY['m9', NULL]);
	EXCEPTION WHEN null_value_not_allowed THEN NULL;
	END $$;
	SELECT string_agg(x, ' ') FROM idempotency.inbox_receive_batch('billing', ARRAY['m9', 'm1']) AS x;
	COMMIT;
	SELECT string_agg(x, ' ') FROM idempotency.inbox_receive_batch('billing', ARRAY['m8', 'm9', 'm10']) AS x;
}), "m8\nm9\nm9\nm10", 'in a transaction, under a savepoint and after an EXCEPTION block');

# an expired entry counts as unseen and is renewed
$coord->safe_psql('postgres', q{
	UPDATE idempotency.inbox SET expires_at = now() - interval '1 second' WHERE message_id = 'm1'});
is( $coord->safe_psql('postgres', q{
	SET ROLE app_before;
	SELECT string_agg(x, ' ') FROM idempotency.inbox_receive_batch('billing', ARRAY['m1', 'm2']) AS x;
	SELECT count(*) FROM idempotency.inbox_receive_batch('billing', ARRAY['m1', 'm2']);
}), "m1\n0", 'an expired id is received again, once');

# --- the cleanup by hand ------------------------------------------------------

$coord->safe_psql('postgres', q{
	SELECT count(idempotency.idempotent_begin(('old-' || i)::idempotency.key, ttl => '1 hour', external => true))
	  FROM generate_series(1, 300) AS i;
	SELECT count(*) FROM idempotency.inbox_receive_batch('old', ARRAY(SELECT 'old-' || i FROM generate_series(1, 150) AS i));
	SELECT count(idempotency.issue_token('old')) FROM generate_series(1, 50);
	UPDATE idempotency.registry SET expires_at = now() - interval '1 minute', attempt = attempt - 60
	 WHERE key::text LIKE 'old-%';
	UPDATE idempotency.inbox SET expires_at = now() - interval '1 minute' WHERE consumer = 'old';
	UPDATE idempotency.tokens SET expires_at = now() - interval '1 minute' WHERE scope = 'old';
});
is( $coord->safe_psql('postgres', q{
	SELECT count(DISTINCT get_shard_id_for_distribution_column('idempotency.registry', key)) > 20
	  FROM idempotency.registry WHERE key::text LIKE 'old-%'}),
	't', 'the expired records are spread over the shards');

# a held expired record: a live transaction has it locked
my $holder = $coord->background_psql('postgres');
$holder->query_safe(q{
	BEGIN;
	UPDATE idempotency.registry SET updated_at = now() WHERE key = 'old-1';
});

is($coord->safe_psql('postgres', 'SELECT idempotency.cleanup(100)'), '100',
	'cleanup(100) through the coordinator deletes one batch of 100 over the shards');
is($coord->safe_psql('postgres', 'SELECT idempotency.cleanup(1000)'), '399',
	'the next batch takes the rest of the registry (less the held record) and of the inbox and tokens');
is($coord->safe_psql('postgres', 'SELECT idempotency.cleanup(1000)'), '0', 'then nothing is left');
is( $coord->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM idempotency.registry WHERE expires_at <= now()),
		   (SELECT count(*) FROM idempotency.inbox WHERE expires_at <= now()),
		   (SELECT count(*) FROM idempotency.tokens WHERE expires_at <= now());
	SELECT count(*) FROM idempotency.registry WHERE key = 'app_before-direct';
}), "1|0|0\n1", 'only the held record is left; live records stay');
is($workers[0]->safe_psql('postgres', 'SELECT idempotency.cleanup(1000)'), '0',
	'on a worker, cleanup() leaves distributed tables to the coordinator');
$holder->query_safe('COMMIT');
is($coord->safe_psql('postgres', 'SELECT idempotency.cleanup(1000)'), '1',
	'the record is deleted once its transaction ends');
$holder->quit;

# --- state machines: every node's cache, and the same session's ---------------

$coord->safe_psql('postgres', q{
	CREATE TABLE public.orders (id int PRIMARY KEY, status text NOT NULL);
	SET citus.enable_unsafe_triggers = on;
	SELECT create_distributed_table('public.orders', 'id');
	CREATE TRIGGER orders_status BEFORE INSERT OR UPDATE ON public.orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
	CREATE TRIGGER orders_history AFTER INSERT OR UPDATE ON public.orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
	INSERT INTO public.orders SELECT i, 'created' FROM generate_series(1, 8) AS i;
	UPDATE public.orders SET status = 'paying';
	UPDATE public.orders SET status = 'paid';
});
($ret, $out, $err) = $coord->psql('postgres', q{UPDATE public.orders SET status = 'paying' WHERE id = 1});
like($err, qr/transition from "paid" to "paying" is not allowed by state machine "order_status"/,
	'check_transition on every shard refuses paid -> paying');

# long-lived sessions: one on a worker, one on the coordinator
my $on_worker = $workers[0]->background_psql('postgres');
my $on_coord = $coord->background_psql('postgres');
is($on_worker->query_safe(q{SELECT idempotency.transition_allowed('order_status', 'paid', 'paying')}),
	'f', 'a worker session has the definition cached');
is($on_coord->query_safe(q{SELECT idempotency.transition_allowed('order_status', 'paid', 'paying')}),
	'f', 'so has a coordinator session');
is( $on_coord->query_safe(q{
	SELECT idempotency.define_state_machine('order_status',
		'{"created": ["paying", "cancelled"], "paying": ["paid", "cancelled"], "paid": ["paying"]}');
	SELECT idempotency.transition_allowed('order_status', 'paid', 'paying');
}), "\nt", 'the session that redefines the machine sees the change at once');
is($on_worker->query_safe(q{SELECT idempotency.transition_allowed('order_status', 'paid', 'paying')}),
	't', 'the long-lived worker session sees it at its next statement');
is( $coord->safe_psql('postgres', q{
	WITH u AS (UPDATE public.orders SET status = 'paying' WHERE id <= 4 RETURNING id)
	SELECT string_agg(id::text, ' ' ORDER BY id) FROM u}),
	'1 2 3 4', 'writes through the coordinator follow the new definition on every shard');
$on_worker->quit;
$on_coord->quit;

# history: node-local, naming the distributed table, never a shard
my $history = q{SELECT coalesce(string_agg(DISTINCT table_name, ' '), '-') || ' ' || count(*)
				  FROM idempotency.state_history};
my @counts = map { $_->safe_psql('postgres', $history) } @workers;
like($counts[0], qr/^public\.orders \d+$/, 'worker1 records history as public.orders');
like($counts[1], qr/^public\.orders \d+$/, 'worker2 records history as public.orders');
my $total = 0;
$total += (split / /, $_)[1] for @counts;
is($total, 8 * 3 + 4, 'one history row per change of state, wherever the shard is');

# --- a concurrent duplicate through two coordinator sessions -----------------

my $first = $coord->background_psql('postgres');
my $second = $coord->background_psql('postgres');
is( $first->query_safe(q{SET ROLE app_before; BEGIN; SELECT public.pay('dup', 7);}),
	'{"order": "dup", "charged": 7}', 'the first request executes and holds its claim');
$second->query_until(qr/sent/, q{
	\echo sent
	SET ROLE app_before;
	SELECT public.pay('dup', 7);
});
ok( $coord->poll_query_until('postgres', q{
	SELECT sum(result::int) > 0 FROM run_command_on_workers(
		'SELECT count(*) FROM pg_locks WHERE NOT granted')}),
	'the duplicate waits for the first on the key\'s worker');
$first->query_safe('COMMIT');
is($second->query_safe('SELECT 1'), "{\"order\": \"dup\", \"charged\": 7}\n1",
	'then replays the same answer');
is($coord->safe_psql('postgres', q{SELECT count(*) FROM public.charges WHERE order_id = 'dup'}),
	'1', 'one charge');
$first->quit;
$second->quit;

# --- defer_claim: a duplicate that raced past begin fails at its finish -------
#
# Both begins read and find nothing; the first finishes and commits; the
# second's finish meets the first one's record on the key's worker (a unique
# violation there) and fails with the serialization failure, its business
# write rolled back with it; a retry replays the first one's answer.

$first = $coord->background_psql('postgres', on_error_stop => 0);
$second = $coord->background_psql('postgres', on_error_stop => 0);
for my $s ($first, $second)
{
	is( $s->query_safe(q{
		\\set VERBOSITY verbose
		SET ROLE app_before;
		BEGIN;
		SELECT outcome FROM idempotency.idempotent_begin('deferred-dup', 'payments', defer_claim => true);
	}), 'execute', 'a deferred begin of a key nobody holds executes');
}
$first->query_safe(q{
	INSERT INTO public.ledger VALUES ('deferred-dup', 1);
	SELECT idempotency.idempotent_finish('deferred-dup', '{"by": "first"}', 'payments');
	COMMIT;
});
my ($dres, $dfailed) = $second->query(q{
	INSERT INTO public.ledger VALUES ('deferred-dup', 2);
	SELECT idempotency.idempotent_finish('deferred-dup', '{"by": "second"}', 'payments');
});
ok($dfailed, 'the duplicate fails at its finish');
like($second->{stderr},
	qr/ERROR:  40001: could not finish idempotency key "deferred-dup" in scope "payments": a concurrent request with the same key finished first/,
	'with a serialization failure that says why');
$second->{stderr} = '';
$second->query(q{ROLLBACK});
is( $second->query_safe(q{
	SELECT outcome || ' ' || (response ->> 'by')
	  FROM idempotency.idempotent_begin('deferred-dup', 'payments', defer_claim => true);
}), 'replay first', 'its retry replays the first one\'s answer');
$first->quit;
$second->quit;
is($coord->safe_psql('postgres', q{SELECT string_agg(amount::text, ',') FROM public.ledger WHERE key = 'deferred-dup'}),
	'1', 'one business write: the duplicate\'s went with its rollback');
# the ledger's rows are counted again at the end, by the tests below
$coord->safe_psql('postgres', q{DELETE FROM public.ledger WHERE key = 'deferred-dup'});

# --- a worker killed mid-way ----------------------------------------------------

# keys whose records live on worker1 and on worker2
my %key_on;
for my $i (1 .. 50)
{
	my $port = port_of('idempotency.registry', "'kill-$i'::idempotency.key");
	$key_on{$port} //= "kill-$i";
	last if keys %key_on == 2;
}
is(scalar(keys %key_on), 2, 'keys on both workers');

# begin + business write + finish, one key; the ledger has no unique index,
# so a second effect would show
sub steps
{
	my ($key, $amount) = @_;
	return qq{
		SELECT outcome FROM idempotency.idempotent_begin('$key', 'payments', external => true);
		INSERT INTO public.ledger VALUES ('$key', $amount);
		SELECT idempotency.idempotent_finish('$key', '{"charged": $amount}', 'payments');
	};
}

# 1. the worker dies before the commit: nothing is acknowledged, and the
#    retry executes once
my ($port_a) = sort keys %key_on;
my $key_a = $key_on{$port_a};
my $victim = node_at($port_a);
my $session = $coord->background_psql('postgres', on_error_stop => 0);
$session->query_safe(qq{
	SET ROLE app_before;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('$key_a', 'payments', external => true);
	INSERT INTO public.ledger VALUES ('$key_a', 1);
});
$victim->stop('immediate');
my ($res, $failed) = $session->query(qq{SELECT idempotency.idempotent_finish('$key_a', '{"charged": 1}', 'payments')});
ok($failed, 'with its worker gone, the transaction fails');
$session->{stderr} = '';
$session->query(q{ROLLBACK});
$session->quit;
$victim->start;
is($coord->safe_psql('postgres', 'SET ROLE app_before; BEGIN;' . steps($key_a, 1) . 'COMMIT; SELECT 1'),
	"execute\ncompleted\n1", 'the retry executes: nothing of the first attempt was committed');

# 2. the worker dies after the coordinator committed but before it heard
#    COMMIT PREPARED: the coordinator holds its commit (synchronous
#    replication to a standby that never comes) while both workers have
#    prepared, the worker holding one record is killed, then the commit is
#    let go and acknowledged.  Citus's recovery commits the prepared
#    transaction when the worker is back.
my %twopc_on;
for my $i (1 .. 50)
{
	my $port = port_of('idempotency.registry', "'twopc-$i'::idempotency.key");
	$twopc_on{$port} //= "twopc-$i";
	last if keys %twopc_on == 2;
}
my ($a_port, $b_port) = sort keys %twopc_on;
my ($key_c, $key_d) = @twopc_on{ $a_port, $b_port };
$coord->safe_psql('postgres', q{
	ALTER SYSTEM SET synchronous_standby_names = 'nobody';
	SELECT pg_reload_conf();
});
$session = $coord->background_psql('postgres', on_error_stop => 0);
$session->query_safe(qq{
	SET ROLE app_before;
	BEGIN;
} . steps($key_c, 2) . steps($key_d, 3));
$session->query_until(qr/committing/, qq{\\echo committing\nCOMMIT;\n});
ok( $coord->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'client backend' AND wait_event = 'SyncRep' AND query LIKE 'COMMIT%'}),
	'the coordinator has written its commit and waits before COMMIT PREPARED');
ok( $workers[0]->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') > 0 &&
	  $workers[1]->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') > 0,
	'both workers have prepared');
$victim = node_at($a_port);
$victim->stop('immediate');
$coord->safe_psql('postgres', q{
	ALTER SYSTEM RESET synchronous_standby_names;
	SELECT pg_reload_conf();
});
($res, $failed) = $session->query('SELECT 1');
is($res, '1', 'the commit is acknowledged');
like($session->{stderr}, qr/WARNING:  failed to commit transaction on 127\.0\.0\.1:$a_port/,
	'with a warning about the worker it could not reach');
$session->quit;

$victim->start;
ok($victim->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_prepared_xacts'),
	'two-phase commit recovery commits the prepared transaction on the restarted worker');
is( $coord->safe_psql('postgres', qq{
	SET ROLE app_before;
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('$key_c', 'payments', external => true);
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('$key_d', 'payments', external => true);
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('$key_a', 'payments', external => true);
}), qq{replay {"charged": 2}
replay {"charged": 3}
replay {"charged": 1}}, 'every acknowledged result replays');
is( $coord->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT key FROM public.ledger GROUP BY key HAVING count(*) > 1) AS twice;
	SELECT count(*) FROM public.ledger;
}), "0\n3", 'no key has two effects');

# --- a coordinator without nodes ------------------------------------------------

# Citus created, no node registered: citus_is_coordinator() is false, but
# this is group 0, the coordinator, and the shards are all local
$coord->safe_psql('postgres', 'CREATE DATABASE lonely');
is( $coord->safe_psql('lonely', q{
	CREATE EXTENSION citus;
	CREATE EXTENSION idempotency;
	SELECT citus_is_coordinator(), (SELECT groupid FROM pg_dist_local_group), (SELECT count(*) FROM pg_dist_node);
}), 'f|0|0', 'a database whose Citus has no node: not citus_is_coordinator(), but group 0');
$coord->safe_psql('lonely', q{
	SELECT idempotency.citus_setup();
	SELECT count(idempotency.idempotent_begin(('lonely-' || i)::idempotency.key, ttl => '1 hour', external => true))
	  FROM generate_series(1, 120) AS i;
	UPDATE idempotency.registry SET expires_at = now() - interval '1 minute', attempt = attempt - 60;
});
is($coord->safe_psql('lonely', q{SELECT distribution FROM idempotency.citus_status() WHERE object = 'idempotency.registry'}),
	'distributed', 'citus_setup() distributes there');
is($coord->safe_psql('lonely', 'SELECT idempotency.cleanup(50), idempotency.cleanup(50), idempotency.cleanup(50)'),
	'50|50|20', 'cleanup() deletes from the local shards, one bounded batch at a time');
$coord->safe_psql('lonely', q{
	SELECT count(idempotency.idempotent_begin(('lonely-bg-' || i)::idempotency.key, ttl => '1 hour', external => true))
	  FROM generate_series(1, 30) AS i;
	UPDATE idempotency.registry SET expires_at = now() - interval '1 minute', attempt = attempt - 60;
});

# --- the background cleanup: every node, once per cluster ---------------------

$coord->safe_psql('postgres', q{
	SELECT count(idempotency.idempotent_begin(('bg-' || i)::idempotency.key, ttl => '1 hour', external => true))
	  FROM generate_series(1, 200) AS i;
	UPDATE idempotency.registry SET expires_at = now() - interval '1 minute', attempt = attempt - 60 WHERE key::text LIKE 'bg-%';
});
$_->safe_psql('postgres',
	q{UPDATE idempotency.state_history SET expires_at = now() - interval '1 minute'}) for @workers;
for my $node ($coord, @workers)
{
	$node->safe_psql('postgres', q{
		ALTER SYSTEM SET idempotency.cleanup_interval = '1s';
		SELECT pg_reload_conf();
	});
}
ok( $coord->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'bg-%'}),
	'the background cleanup deletes expired records on every shard');
ok( $coord->poll_query_until('postgres', q{
	SELECT failures = 0 AND total_deleted >= 200 AND last_end > last_start
	  FROM idempotency.cleanup_status WHERE datname = 'postgres'}),
	'the coordinator\'s passes succeed');
ok($coord->poll_query_until('lonely', 'SELECT count(*) = 0 FROM idempotency.registry'),
	'and clean the coordinator without nodes too');
for my $i (0, 1)
{
	ok( $workers[$i]->poll_query_until('postgres', q{SELECT count(*) = 0 FROM idempotency.state_history}),
		'worker' . ($i + 1) . ' deletes its node-local expired history');
	is( $workers[$i]->safe_psql('postgres', q{
		SELECT failures, last_error IS NULL FROM idempotency.cleanup_status WHERE datname = 'postgres'}),
		'0|t', 'worker' . ($i + 1) . '\'s passes succeed too');
}

# --- DROP EXTENSION ----------------------------------------------------------------

($ret, $out, $err) = $workers[0]->psql('postgres', 'SELECT idempotency.citus_drop_tables()');
like($err, qr/this node is not the Citus coordinator/, 'citus_drop_tables() only on the coordinator');
$coord->safe_psql('postgres', q{
	DROP TABLE public.charges, public.ledger, public.orders;
	DROP FUNCTION public.pay(text, int);
	SELECT idempotency.citus_drop_tables();
	DROP EXTENSION idempotency;
});
for my $node ($coord, @workers)
{
	is( $node->safe_psql('postgres', q{
		SET citus.override_table_visibility = off;
		SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'idempotency'),
			   (SELECT count(*) FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
				 WHERE n.nspname = 'idempotency'),
			   (SELECT count(*) FROM pg_dist_partition);
	}), '0|0|0', $node->name . ': after citus_drop_tables(), DROP EXTENSION leaves no table or shard behind');
}

done_testing();
