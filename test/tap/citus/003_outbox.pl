# Citus: the transactional outbox distributed by its ordering key.  A
# coordinator and two workers; citus_setup() distributes the outbox (with a
# message sent before it) in a co-location group of its own; an application
# role sends through the coordinator in its business transaction, beside
# its own distributed table; two relays fetch at the same time and get
# disjoint batches; every key's messages are handed out in order, one at a
# time, across the shards; acknowledgements, a relay that died and a
# take-over after its lease; a fetch on a worker is refused; the cleanup;
# rename_owner; and a user's table distributed by a text column stays out of
# the outbox's group.  Lease expiry is simulated by moving lease_until back, never by
# waiting.
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
	CREATE ROLE app LOGIN;
	SELECT idempotency.grant_usage('app');
});

# SQL as the application role, through the coordinator (or another node)
sub app
{
	my ($sql, $node) = @_;
	return ($node // $coord)->safe_psql('postgres', $sql, extra_params => [ '-U', 'app' ]);
}

# a message sent before the setup is copied into the shards with the table
app(q{SELECT idempotency.outbox_send('early', '{"n": 0}', 'early-key', message_id => 'early-1')});

$coord->safe_psql('postgres', 'SELECT idempotency.citus_setup()');

# --- citus_setup() ---------------------------------------------------------------

is( $coord->safe_psql('postgres', q{
	SELECT distribution || ' ' || distributed_by || ' ' || shards
	  FROM idempotency.citus_status() WHERE object = 'idempotency.outbox'}),
	'distributed ordering_key 32', 'citus_setup() distributes the outbox by ordering_key');
is( $coord->safe_psql('postgres', q{
	SELECT count(*) FROM pg_dist_partition AS o, pg_dist_partition AS x
	 WHERE o.logicalrelid = 'idempotency.outbox'::regclass
	   AND x.logicalrelid <> o.logicalrelid AND x.colocationid = o.colocationid}),
	'0', 'in a co-location group of its own');
is( $coord->safe_psql('postgres', q{
	SELECT c.distributioncolumntype::regtype FROM pg_dist_colocation AS c
	  JOIN pg_dist_partition AS p ON p.colocationid = c.colocationid
	 WHERE p.logicalrelid = 'idempotency.outbox'::regclass}),
	'idempotency.ordering_key', 'whose distribution column is of the outbox\'s own type');
is( $coord->safe_psql('postgres', q{
	SELECT count(DISTINCT p.groupid) FROM pg_dist_shard AS s
	  JOIN pg_dist_placement AS p ON p.shardid = s.shardid
	 WHERE s.logicalrelid = 'idempotency.outbox'::regclass AND p.groupid <> 0}),
	'2', 'its shards are on both workers');
is( $coord->safe_psql('postgres', q{
	SELECT distribution FROM idempotency.citus_status() WHERE object = 'idempotency.my_outbox'}),
	'owner-run', 'my_outbox reads through an owner-run function');
is( app(q{SELECT message_id || ' ' || ordering_key || ' ' || seq || ' ' || state
	  FROM idempotency.my_outbox}),
	'early-1 early-key 1 pending',
	'a message sent before the setup is in the shards, and the role sees it in my_outbox');
$coord->safe_psql('postgres', 'SELECT idempotency.citus_setup()');
pass('citus_setup() runs again without changing anything');

# --- sending in the business transaction -------------------------------------------

$coord->safe_psql('postgres', q{
	CREATE TABLE public.shipments (order_id text PRIMARY KEY, status text NOT NULL);
	SELECT create_distributed_table('public.shipments', 'order_id');
	GRANT ALL ON public.shipments TO app;
});
is( $coord->safe_psql('postgres', q{
	SELECT count(*) FROM pg_dist_partition AS u, pg_dist_partition AS x
	 WHERE u.logicalrelid = 'public.shipments'::regclass
	   AND x.logicalrelid IN ('idempotency.registry'::regclass, 'idempotency.inbox'::regclass,
							  'idempotency.tokens'::regclass, 'idempotency.outbox'::regclass)
	   AND u.colocationid = x.colocationid}),
	'0', 'a user\'s table distributed by a text column is in none of the extension\'s groups');

app(q{
	BEGIN;
	INSERT INTO public.shipments VALUES ('ORD-1', 'packed');
	SELECT idempotency.outbox_send('shipments', '{"order": "ORD-1"}', ordering_key => 'ORD-1',
								   message_id => 'ship-1');
	COMMIT;
	BEGIN;
	INSERT INTO public.shipments VALUES ('ORD-2', 'packed');
	SELECT idempotency.outbox_send('shipments', '{"order": "ORD-2"}', ordering_key => 'ORD-2',
								   message_id => 'ship-2');
	ROLLBACK;
});
is( app(q{SELECT string_agg(order_id, ' ' ORDER BY order_id) FROM public.shipments}),
	'ORD-1', 'the business rows: the committed one only');
is( app(q{SELECT string_agg(message_id, ' ' ORDER BY message_id) FROM idempotency.my_outbox
		   WHERE topic = 'shipments'}),
	'ship-1', 'the messages: the committed transaction\'s only');
my ($rc, $out, $err) = $coord->psql('postgres',
	q{SELECT idempotency.outbox_send('shipments', '{}', 'ORD-1', message_id => 'ship-1')},
	extra_params => [ '-U', 'app' ]);
like($err, qr/message "ship-1" was already sent with ordering key "ORD-1"/,
	'an id sent before under the key is refused');
is( $coord->safe_psql('postgres', q{SELECT count(*) FROM idempotency.outbox}),
	'2', 'the application role reaches the table only through the functions');
($rc, $out, $err) = $coord->psql('postgres', q{SELECT count(*) FROM idempotency.outbox},
	extra_params => [ '-U', 'app' ]);
like($err, qr/permission denied for table outbox/, 'and not directly');

# the statements a send and a fetch run go to one shard
like( $coord->safe_psql('postgres', q{
	EXPLAIN (COSTS OFF) SELECT p.seq FROM idempotency.outbox AS p
	 WHERE p.owner = 'app' AND p.ordering_key = 'ORD-1' AND p.delivered_at IS NULL
	 ORDER BY p.seq DESC LIMIT 1}),
	qr/Task Count: 1\b/, 'reading a key\'s highest number is routed to one shard');
like( $coord->safe_psql('postgres', q{
	EXPLAIN (COSTS OFF) INSERT INTO idempotency.outbox AS o
		(owner, ordering_key, seq, message_id, topic, payload, headers, sent_at)
	VALUES ('app', 'ORD-1', 2, 'x', 't', '{}', NULL, now())
	ON CONFLICT (owner, ordering_key, seq) WHERE delivered_at IS NULL DO NOTHING}),
	qr/Task Count: 1\b/, 'inserting the next is routed to one shard');
like( $coord->safe_psql('postgres', q{
	EXPLAIN (COSTS OFF) UPDATE idempotency.outbox AS o SET lease_until = now()
	 WHERE o.ctid = ANY (ARRAY(SELECT c.ctid FROM idempotency.outbox AS c
							   WHERE c.owner = 'app' AND c.ordering_key = 'ORD-1' AND c.seq = 1
							   FOR UPDATE OF c SKIP LOCKED))
	   AND o.ordering_key = 'ORD-1'}),
	qr/Task Count: 1\b/, 'taking one key\'s message is routed to one shard');

# two senders of one key: the second waits for the first and takes the next number
my $s1 = $coord->background_psql('postgres', extra_params => [ '-U', 'app' ]);
my $s2 = $coord->background_psql('postgres', extra_params => [ '-U', 'app' ]);
$s1->query_safe(q{BEGIN; SELECT idempotency.outbox_send('race', '{}', 'race-key', message_id => 'r1')});
$s2->query_until(qr/sending/, q{\echo sending
	SELECT idempotency.outbox_send('race', '{}', 'race-key', message_id => 'r2');
});
$s1->query_safe('COMMIT');
$s2->query_safe('SELECT 1');
is( app(q{SELECT string_agg(message_id || ':' || seq, ' ' ORDER BY seq) FROM idempotency.my_outbox
		   WHERE ordering_key = 'race-key'}),
	'r1:1 r2:2', 'two senders of one key get consecutive numbers in commit order');

# --- relays --------------------------------------------------------------------------

# deliver what was sent so far, out of the relays' way
app(q{
	DO $$
	DECLARE
		ids text[];
		a int8;
	BEGIN
		LOOP
			SELECT array_agg(f.message_id), max(f.attempt) INTO ids, a
			  FROM idempotency.outbox_fetch(100) AS f;
			EXIT WHEN ids IS NULL;
			PERFORM idempotency.outbox_ack(a, ids);
		END LOOP;
	END $$});
is( app(q{SELECT count(*) FROM idempotency.my_outbox WHERE state <> 'delivered'}),
	'0', 'a relay in one transaction delivers every message, each key\'s in turn');

# Sixteen keys spread over both workers, three messages each, sent in
# transactions that interleave the keys; the numbers the setup gave each
# message in its payload are the order the relays must keep.
app(q{
	DO $$
	BEGIN
		FOR i IN 1..3 LOOP
			FOR k IN 1..16 LOOP
				PERFORM idempotency.outbox_send('orders', jsonb_build_object('i', i), 'key-' || k,
												message_id => format('key-%s-%s', k, i));
			END LOOP;
		END LOOP;
	END $$});
is( $coord->safe_psql('postgres', q{
	SELECT count(DISTINCT p.groupid)
	  FROM generate_series(1, 16) AS k,
		   LATERAL get_shard_id_for_distribution_column('idempotency.outbox', 'key-' || k) AS s
	  JOIN pg_dist_placement AS p ON p.shardid = s}),
	'2', 'the keys are on both workers');

is( app(q{SELECT count(*) FROM idempotency.my_outbox WHERE state <> 'delivered'}),
	'48', 'the 48 new messages pending');

my $r1 = $coord->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'app' ]);
my $r2 = $coord->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'app' ]);

# a fetch rolled back hands nothing out
$r1->query_safe('BEGIN; SELECT count(*) FROM idempotency.outbox_fetch(5); ROLLBACK');
is( app(q{SELECT count(*) FROM idempotency.my_outbox WHERE state = 'leased'}),
	'0', 'a fetch whose transaction rolled back leases nothing');

my %delivered;
my %per_key;
for my $round (1 .. 3)
{
	# r1's batch is locked in its open transaction while r2 fetches
	my $b1 = $r1->query_safe(q{BEGIN;
		SELECT string_agg(message_id || '|' || attempt, ' ') FROM idempotency.outbox_fetch(5)});
	my $b2 = $r2->query_safe(q{
		SELECT string_agg(message_id || '|' || attempt, ' ') FROM idempotency.outbox_fetch(100)});
	$r1->query_safe('COMMIT');
	is( scalar(split / /, $b1) . ' ' . scalar(split / /, $b2 // ''),
		'5 11', "round $round: r2 passed over the five messages r1 held and took the other keys'");
	my %seen;
	my $overlap = 0;
	for my $batch ([ 'r1', $b1 ], [ 'r2', $b2 ])
	{
		my ($relay, $list) = @$batch;
		my %attempt;
		for my $m (split / /, $list // '')
		{
			my ($id, $attempt) = split /\|/, $m;
			$overlap++ if $seen{$id}++;
			$attempt{$attempt} = 1;
			$delivered{$id}++;
			my ($k, $i) = $id =~ /^key-(\d+)-(\d+)$/;
			push @{ $per_key{$k} }, $i;
		}
		is(scalar(keys %attempt), 1, "round $round: $relay\'s batch has one attempt");
		my ($attempt) = keys %attempt;
		my $ids = join(',', map { (split /\|/)[0] } split / /, $list);
		is( ($relay eq 'r1' ? $r1 : $r2)->query_safe(
				"SELECT idempotency.outbox_ack($attempt, string_to_array('$ids', ','))"),
			scalar(split / /, $list), "round $round: $relay acknowledges its batch");
	}
	is($overlap, 0, "round $round: the two relays got disjoint batches");
	is(scalar(keys %seen), 16, "round $round: one message of every key, no more");
}
is(scalar(grep { $delivered{$_} == 1 } keys %delivered), 48,
	'every message was handed out once');
is(scalar(grep { join(',', @{ $per_key{$_} }) eq '1,2,3' } keys %per_key), 16,
	'every key\'s messages were handed out in the order they were sent');
is( app(q{SELECT count(*) FROM idempotency.my_outbox WHERE state <> 'delivered'}),
	'0', 'all delivered');
is( $r1->query_safe('SELECT count(*) FROM idempotency.outbox_fetch(100)'),
	'0', 'nothing is left to fetch');

# --- a relay that dies, and a take-over after the lease ------------------------------

app(q{SELECT idempotency.outbox_send('orders', '{}', 'late-key', message_id => 'late-1');
	  SELECT idempotency.outbox_send('orders', '{}', 'late-key', message_id => 'late-2')});
my $late = $r1->query_safe(q{SELECT attempt FROM idempotency.outbox_fetch(100, '1 hour')
							  WHERE message_id = 'late-1'});
app(q{SELECT idempotency.outbox_send('orders', '{}', 'gone-key', message_id => 'gone-1')});
my $gone = $coord->background_psql('postgres', extra_params => [ '-U', 'app' ]);
is($gone->query_safe(q{SELECT message_id FROM idempotency.outbox_fetch(100, '1 hour')}),
	'gone-1', 'a second relay takes the other key\'s message');
is($r2->query_safe('SELECT count(*) FROM idempotency.outbox_fetch(100)'),
	'0', 'leased messages are not handed out again, nor the next message of their key');
$gone->quit;    # this relay dies holding gone-1

# the leases run out
$coord->safe_psql('postgres',
	q{UPDATE idempotency.outbox SET lease_until = now() - interval '1 second'
	   WHERE message_id = ANY (ARRAY['late-1', 'gone-1'])});
is( $r2->query_safe(q{SELECT string_agg(message_id || ':' || deliveries, ' ' ORDER BY message_id)
						FROM idempotency.outbox_fetch(100)}),
	'gone-1:2 late-1:2', 'after the lease, another relay gets the messages again');
my $taken = $r2->query_safe(q{SELECT attempt FROM idempotency.my_outbox WHERE message_id = 'gone-1'});
$r1->query(qq{SELECT idempotency.outbox_ack($late, ARRAY['late-1'])});
like($r1->{stderr}, qr/attempt $late does not hold message "late-1"/,
	'the late relay\'s acknowledgement is refused once another relay took its message');
$r1->{stderr} = '';
is($r2->query_safe(qq{SELECT idempotency.outbox_ack($taken, ARRAY['late-1', 'gone-1'])}),
	'2', 'the relay that took them over acknowledges them');
is( $r2->query_safe(q{SELECT string_agg(message_id, ' ') FROM idempotency.outbox_fetch(100)}),
	'late-2', 'then the key\'s next message is ready');

# a late acknowledgement nobody overtook is still heard
$coord->safe_psql('postgres',
	q{UPDATE idempotency.outbox SET lease_until = now() - interval '1 second'
	   WHERE message_id = 'late-2'});
my $attempt2 = app(q{SELECT attempt FROM idempotency.my_outbox WHERE message_id = 'late-2'});
is($r2->query_safe(qq{SELECT idempotency.outbox_ack($attempt2, ARRAY['late-2'])}),
	'1', 'a late acknowledgement is accepted while no other relay took the message');
is($r2->query_safe(qq{SELECT idempotency.outbox_ack($attempt2, ARRAY['late-2'])}),
	'0', 'and accepted again (nothing newly marked)');
$_->quit for ($r1, $r2, $s1, $s2);

# --- a fetch on a worker --------------------------------------------------------------

app(q{SELECT idempotency.outbox_send('orders', '{}', 'worker-key', message_id => 'w-1')});
($rc, $out, $err) = $workers[0]->psql('postgres',
	q{\set VERBOSITY verbose
	  SELECT * FROM idempotency.outbox_fetch(10)}, extra_params => [ '-U', 'app' ]);
like($err, qr/55000: cannot fetch outbox messages on a node that is not the Citus coordinator/,
	'a fetch on a worker is refused');
is(app(q{SELECT message_id FROM idempotency.outbox_fetch(10)}), 'w-1',
	'the coordinator hands the message out');

# --- the cleanup --------------------------------------------------------------------

my $before = $coord->safe_psql('postgres', q{SELECT count(*) FROM idempotency.outbox});
$coord->safe_psql('postgres',
	q{UPDATE idempotency.outbox SET expires_at = now() - interval '1 second'
	   WHERE delivered_at IS NOT NULL AND ordering_key LIKE 'key-%'});
is($coord->safe_psql('postgres', q{SELECT idempotency.cleanup()}) >= 48, 1,
	'the cleanup deletes expired delivered messages from the shards');
is( $coord->safe_psql('postgres', q{SELECT count(*) FROM idempotency.outbox}),
	$before - 48, 'exactly those');

# --- a role renamed -----------------------------------------------------------------

$coord->safe_psql('postgres', q{
	ALTER ROLE app RENAME TO app_renamed;
	SELECT idempotency.rename_owner('app', 'app_renamed');
});
is( $coord->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE owner = 'app') || ' ' || (count(*) FILTER (WHERE owner = 'app_renamed') > 0)
	  FROM idempotency.outbox}),
	'0 true', 'rename_owner moves the role\'s messages on every shard');
is( $coord->safe_psql('postgres', q{SELECT count(*) FROM idempotency.my_outbox},
		extra_params => [ '-U', 'app_renamed' ]),
	$coord->safe_psql('postgres', q{SELECT count(*) FROM idempotency.outbox}),
	'and the renamed role sees them in my_outbox');

# --- an administrator's reset of one key, and the metrics, over the shards -------

$coord->safe_psql('postgres', q{
	SET ROLE app_renamed;
	BEGIN;
	SELECT idempotency.idempotent_begin('forget-me');
	SELECT idempotency.idempotent_finish('forget-me', '{"n": 1}');
	COMMIT;
});
is($coord->safe_psql('postgres', q{SELECT idempotency.forget_key('app_renamed', 'forget-me')}), 't',
	'forget_key deletes a record on its shard');
is( $coord->safe_psql('postgres', q{SELECT found FROM idempotency.lookup('forget-me')},
		extra_params => [ '-U', 'app_renamed' ]),
	'f', 'and the key is gone for its role');
is( $coord->safe_psql('postgres', q{
	SELECT m.records = (SELECT count(*) FROM idempotency.registry)
	   AND m.outbox_pending = (SELECT count(*) FROM idempotency.outbox WHERE delivered_at IS NULL)
	  FROM idempotency.metrics AS m}),
	't', 'metrics counts the records and the outbox of every shard');

done_testing();
