# Citus: what a long-lived pooled connection meets.  One coordinator
# session, as a pooler keeps it, uses every feature of the extension in turn
# (begin and finish, deferred claims, lookup, the views, the inbox, tokens,
# key locks, the cleanup, state machines, a check_transition trigger created
# on a distributed table) with Citus loaded in the same backend, and is
# still connected and correct at the end: the extension takes one relcache
# callback slot of the ten a backend has, whatever it caches, and the worker
# backends that serve the session do not grow with its requests.  Then a
# user's own table distributed by a text column, the Citus default, after
# citus_setup(): Citus must not put it in one of the extension's
# co-location groups.
#
# Runs only where Citus is installed in the PostgreSQL being tested.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CitusCluster;

my ($coord, @workers) = citus_cluster();
citus_join('postgres', $coord, @workers);
$coord->safe_psql('postgres', 'CREATE EXTENSION idempotency');
$coord->safe_psql('postgres', q{
	SELECT idempotency.citus_setup();
	CREATE ROLE app LOGIN;
	SELECT idempotency.grant_usage('app');
});

# --- one pooled session, every feature ---------------------------------------

my $s = $coord->background_psql('postgres', on_error_stop => 0);
my @steps = (
	[ 'begin and finish',
	  q{BEGIN;
		SELECT outcome FROM idempotency.idempotent_begin('ls-1', 'pay', '{"a": 1}', external => true);
		SELECT idempotency.idempotent_finish('ls-1', '{"ok": 1}', 'pay');
		COMMIT},
	  "execute\ncompleted" ],
	[ 'replay', q{SELECT outcome FROM idempotency.idempotent_begin('ls-1', 'pay', '{"a": 1}', external => true)},
	  'replay' ],
	[ 'a deferred claim',
	  q{BEGIN;
		SELECT outcome FROM idempotency.idempotent_begin('ls-2', 'pay', defer_claim => true);
		SELECT idempotency.idempotent_finish('ls-2', '{"ok": 2}', 'pay');
		COMMIT;
		SELECT outcome FROM idempotency.idempotent_begin('ls-2', 'pay', external => true)},
	  "execute\ncompleted\nreplay" ],
	[ 'lookup', q{SELECT status FROM idempotency.lookup('ls-1', 'pay')}, 'completed' ],
	[ 'my_records', q{SELECT count(*) FROM idempotency.my_records WHERE scope = 'pay'}, '2' ],
	[ 'the cleanup by hand', q{SELECT idempotency.cleanup() >= 0}, 't' ],
	[ 'inbox_receive', q{SELECT idempotency.inbox_receive('billing', 'm-1')}, 't' ],
	[ 'inbox_receive_batch',
	  q{SELECT string_agg(id, ' ' ORDER BY id)
		  FROM idempotency.inbox_receive_batch('billing', ARRAY['m-1', 'm-2', 'm-3']) AS id},
	  'm-2 m-3' ],
	[ 'tokens',
	  q{SELECT idempotency.consume_token(idempotency.issue_token('forms'), 'forms')}, 't' ],
	[ 'key locks', q{SELECT idempotency.try_lock('ls-lock')}, 't' ],
	[ 'my_tokens', q{SELECT count(*) FROM idempotency.my_tokens}, '1' ],
	[ 'a state machine',
	  q{SELECT idempotency.define_state_machine('ls_order',
			'{"created": ["paid"], "paid": ["shipped"], "shipped": []}');
		SELECT idempotency.transition_allowed('ls_order', 'created', 'paid')},
	  "\nt" ],
	[ 'a distributed table with check_transition and history',
	  q{CREATE TABLE public.ls_orders (id int PRIMARY KEY, status text NOT NULL);
		SELECT create_distributed_table('public.ls_orders', 'id');
		SET citus.enable_unsafe_triggers = on;
		CREATE TRIGGER ls_status BEFORE INSERT OR UPDATE ON public.ls_orders
			FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('ls_order', 'status');
		CREATE TRIGGER ls_history AFTER INSERT OR UPDATE ON public.ls_orders
			FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
		INSERT INTO public.ls_orders SELECT i, 'created' FROM generate_series(1, 4) AS i;
		UPDATE public.ls_orders SET status = 'paid';
		SELECT count(*) FROM public.ls_orders WHERE status = 'paid'},
	  "\n4" ],
	[ 'an illegal transition refused',
	  q{UPDATE public.ls_orders SET status = 'created' WHERE id = 1;
		SELECT status FROM public.ls_orders WHERE id = 1},
	  'paid' ],
	[ 'still the same backend, still working',
	  q{SELECT outcome FROM idempotency.idempotent_begin('ls-1', 'pay', '{"a": 1}', external => true)},
	  'replay' ],);
my $pid = $s->query_safe('SELECT pg_backend_pid()');
for my $step (@steps)
{
	my ($what, $sql, $want) = @$step;
	my $got = $s->query($sql);
	is($got, $want, "pooled session: $what");
	if ($what eq 'an illegal transition refused')
	{
		like($s->{stderr}, qr/transition from "paid" to "created" is not allowed/,
			'pooled session: with check_transition\'s error');
	}
	else
	{
		is($s->{stderr}, '', "pooled session: $what, without an error");
	}
	$s->{stderr} = '';
}
is($s->query_safe('SELECT pg_backend_pid()'), $pid,
	'the pooled session kept its backend through every feature');
unlike(slurp_file($coord->logfile), qr/out of relcache_callback_list slots/,
	'no backend ran out of relcache callback slots');

# The session's requests run on the workers, each in the worker backend
# that serves this session for as long as it lives: that backend's memory
# must not grow with the number of requests.  memory(WORKER) asks it to log
# its memory contexts and reads the total back.
my $gpid = $s->query_safe('SELECT citus_backend_gpid()');
sub memory
{
	my ($worker) = @_;
	my $wpid = $worker->safe_psql('postgres', qq{
		SELECT pid FROM pg_stat_activity WHERE application_name = 'citus_internal gpid=$gpid'});
	die "no backend serves the session on " . $worker->name unless $wpid =~ /^\d+$/;
	my $offset = -s $worker->logfile;
	$worker->safe_psql('postgres', "SELECT pg_log_backend_memory_contexts($wpid)");
	$worker->wait_for_log(qr/\[$wpid\][^\n]*Grand total: \d+ bytes/, $offset);
	my ($bytes) = substr(slurp_file($worker->logfile), $offset) =~
	  /\[$wpid\][^\n]*Grand total: (\d+) bytes/;
	return $bytes;
}
my $requests = q{DO $$
	BEGIN
		FOR i IN 1 .. 300 LOOP
			PERFORM idempotency.idempotent_begin('mem-' || pg_catalog.gen_random_uuid(), 'pay', external => true);
		END LOOP;
	END $$};
$s->query_safe($requests);
my @before = map { memory($_) } @workers;
$s->query_safe($requests) for 1 .. 2;
my @after = map { memory($_) } @workers;
for my $i (0 .. $#workers)
{
	cmp_ok($after[$i] - $before[$i], '<', 2_000_000,
		'600 more requests leave the memory of the backend serving the session on '
		  . $workers[$i]->name . " as it was ($before[$i] bytes, then $after[$i])");
}
$s->quit;

# --- a user's table distributed by a text column -------------------------------

$coord->safe_psql('postgres', q{
	CREATE TABLE public.user_charges (id bigserial, k text NOT NULL, amount int);
	SELECT create_distributed_table('public.user_charges', 'k');
	INSERT INTO public.user_charges (k, amount) VALUES ('a', 1), ('b', 2);
});
is($coord->safe_psql('postgres', 'SELECT count(*) FROM public.user_charges'),
	'2', 'a table distributed by a text column with the default co-location works');
is( $coord->safe_psql('postgres', q{
	SELECT count(*) FROM pg_dist_partition AS u, pg_dist_partition AS x
	 WHERE u.logicalrelid = 'public.user_charges'::regclass
	   AND x.logicalrelid IN ('idempotency.registry'::regclass, 'idempotency.inbox'::regclass,
							  'idempotency.tokens'::regclass, 'idempotency.outbox'::regclass)
	   AND u.colocationid = x.colocationid}),
	'0', 'it is in none of the extension\'s co-location groups');
$coord->safe_psql('postgres', q{
	CREATE TABLE public.user_events (id text PRIMARY KEY, body text);
	SELECT create_distributed_table('public.user_events', 'id', colocate_with => 'user_charges');
});
pass('a second user table co-locates with the first');

# the inbox's statements still go to the one shard of their id
like( $coord->safe_psql('postgres', q{
	EXPLAIN (COSTS OFF) UPDATE idempotency.inbox AS i SET expires_at = now()
	 WHERE i.message_id = 'route-1' AND i.consumer = 'orders' AND i.owner = 'app'}),
	qr/Task Count: 1\b/, 'a statement on one message id is routed to one shard');
is( $coord->safe_psql('postgres', q{
	SET ROLE app;
	SELECT idempotency.inbox_receive('orders', 'route-1');
	SELECT idempotency.inbox_receive('orders', 'route-1');
}), "t\nf", 'the inbox still de-duplicates through the coordinator');

done_testing();
