# The outbox's per-key order under a storm: several producers send on a few
# ordering keys in overlapping transactions (some REPEATABLE READ, some
# rolled back), while several relays deliver to a consumer in another
# database, some terminated on the way and some stalled past their lease
# (before publishing, or between publishing and acknowledging).  The
# consumer applies each message through inbox_receive and records the
# order in which the effects happened.  Afterwards, exactly:
# - no message is lost and none had two effects: the consumer has the
#   committed messages, each once, and nothing of a rolled-back transaction;
# - within each ordering key the effects happened in the order the sending
#   transactions committed (their commit timestamps);
# - two messages of one key were never in flight at once: no fetch handed
#   out a message while another message of its key was under an unexpired
#   lease (checked by each relay inside its fetch's transaction, and again
#   afterwards from the leases and deliveries logged);
# - the only duplicates are redeliveries, which the consumer's inbox turned
#   away: no message reached the consumer more often than it was handed out;
# - an acknowledgement after the lease ran out was accepted only while no
#   other relay had taken the message (no later attempt had it), and every
#   refused one was refused because a later attempt had taken it;
# - no sender failed (none waited for a deadlock or a serialization failure).
#
# Nothing depends on timing: the relays are terminated once the consumer
# has progressed (poll_query_until), stalls are counted not required, and
# the end is reached when every committed message is delivered.

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('outbox_order');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
track_commit_timestamp = on
max_connections = 40
});
$node->start;

my $n_producers = 4;
my $n_transactions = 180;    # per producer
my $n_keys = 5;
my $lease = '700 milliseconds';
my $stall = 1.2;             # seconds: past the lease

$node->safe_psql('postgres', 'CREATE DATABASE producer; CREATE DATABASE consumer;');

$node->safe_psql('consumer', q{
CREATE EXTENSION idempotency;
CREATE TABLE effects (
	applied bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	message_id text NOT NULL,
	ordering_key text NOT NULL
);
CREATE TABLE deliveries (message_id text NOT NULL);
CREATE PROCEDURE apply(id text, k text) LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO deliveries VALUES (id);
	IF idempotency.inbox_receive('orders', id) THEN
		INSERT INTO effects (message_id, ordering_key) VALUES (id, k);
	END IF;
END $$;
});

$node->safe_psql('producer', qq{
CREATE EXTENSION idempotency;
CREATE EXTENSION dblink;
CREATE TABLE orders (message_id text PRIMARY KEY, ordering_key text NOT NULL,
					 producer int NOT NULL, n int NOT NULL);
CREATE TABLE control (stop boolean NOT NULL);
INSERT INTO control VALUES (false);
-- each fetch, logged in its transaction: what was handed out under which
-- attempt, and how many other messages of its key were under an unexpired
-- lease then.  fetched_at is read once the fetch has returned: the fetch's
-- own clock reading comes before its snapshot, and a busy machine may run
-- an acknowledgement of the key's previous message in between
CREATE TABLE fetch_log (attempt int8 NOT NULL, message_id text NOT NULL, ordering_key text NOT NULL,
						fetched_at timestamptz NOT NULL, lease_until timestamptz NOT NULL,
						others_in_flight int NOT NULL);
-- each acknowledgement of a message, logged in its transaction
CREATE TABLE ack_log (attempt int8 NOT NULL, message_id text NOT NULL, lease_until timestamptz NOT NULL,
					  acked_at timestamptz NOT NULL, accepted boolean NOT NULL);
CREATE TABLE stalls (kind text NOT NULL);

-- a relay; every stall_every-th batch it stalls past its lease, before
-- publishing or (the next time) between publishing and acknowledging
CREATE PROCEDURE relay(batch_size int, stall_every int) LANGUAGE plpgsql AS \$\$
DECLARE
	ids text[];
	keys text[];
	leases timestamptz[];
	att int8;
	batches int := 0;
	acked_at timestamptz;
	m text;
	i int;
BEGIN
	PERFORM dblink_connect('consumer', 'dbname=consumer host=' || current_setting('unix_socket_directories')
						   || ' port=' || current_setting('port'));
	LOOP
		SELECT array_agg(f.message_id), array_agg(f.ordering_key), array_agg(f.lease_until), max(f.attempt)
		  INTO ids, keys, leases, att
		  FROM idempotency.outbox_fetch(batch_size, lease => '$lease') AS f;
		IF ids IS NULL THEN
			COMMIT;
			EXIT WHEN (SELECT c.stop FROM control AS c);
			PERFORM pg_sleep(0.02);
			CONTINUE;
		END IF;
		INSERT INTO fetch_log
			SELECT att, f.id, f.k, clock_timestamp(), f.lease_until,
				   (SELECT count(*) FROM idempotency.outbox AS o
					 WHERE o.ordering_key = f.k AND o.message_id <> f.id
					   AND o.delivered_at IS NULL AND o.lease_until > clock_timestamp())
			  FROM unnest(ids, keys, leases) AS f(id, k, lease_until);
		COMMIT;
		batches := batches + 1;
		IF stall_every > 0 AND batches % stall_every = 0 AND batches % (2 * stall_every) <> 0 THEN
			INSERT INTO stalls VALUES ('before publishing');
			COMMIT;
			PERFORM pg_sleep($stall);
		END IF;
		FOR i IN 1 .. array_length(ids, 1) LOOP
			PERFORM dblink_exec('consumer', format('CALL apply(%L, %L)', ids[i], keys[i]));
		END LOOP;
		IF stall_every > 0 AND batches % (2 * stall_every) = 0 THEN
			INSERT INTO stalls VALUES ('before acknowledging');
			COMMIT;
			PERFORM pg_sleep($stall);
		END IF;
		-- the protocol of doc/outbox.md: on IK004, acknowledge the rest of
		-- the batch without the message named
		LOOP
			acked_at := clock_timestamp();
			BEGIN
				PERFORM idempotency.outbox_ack(att, ids);
				INSERT INTO ack_log SELECT att, a.id, a.lease_until, acked_at, true
				  FROM unnest(ids, leases) AS a(id, lease_until);
				EXIT;
			EXCEPTION WHEN SQLSTATE 'IK004' THEN
				GET STACKED DIAGNOSTICS m = MESSAGE_TEXT;
				m := substring(m FROM 'does not hold message "(.*)"\$');
				i := array_position(ids, m);
				IF i IS NULL THEN
					RAISE EXCEPTION 'IK004 named a message not in the batch: %', m;
				END IF;
				INSERT INTO ack_log VALUES (att, m, leases[i], acked_at, false);
				ids := ids[:i - 1] || ids[i + 1:];
				leases := leases[:i - 1] || leases[i + 1:];
				EXIT WHEN cardinality(ids) = 0;
			END;
		END LOOP;
		COMMIT;
	END LOOP;
END \$\$;
});

my @psql = ($node->installed_command('psql'), '-X', '-q');
my @relays;
my @producers;

# start(db, sql or script, name): a psql in the background
sub start
{
	my ($db, $name, @args) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ @psql, '-d', $node->connstr($db) . " application_name=$name", @args ],
		'<', \undef, '>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err };
}

sub start_relay
{
	my ($name, $stall_every) = @_;
	push @relays, start('producer', $name, '-v', 'ON_ERROR_STOP=1',
		'-c', "CALL relay(3, $stall_every)");
}

# The producers: transactions of one send each, on keys drawn at random,
# open a little while after the send so that they overlap with each other
# and with the relays' acknowledgements; every 9th rolls back; the last
# producer runs at REPEATABLE READ, its snapshot taken before the send.
my $tmp = PostgreSQL::Test::Utils::tempdir;
for my $p (1 .. $n_producers)
{
	my $file = "$tmp/producer$p.sql";
	open(my $fh, '>', $file) or die "could not write $file: $!";
	srand($p);
	for my $n (1 .. $n_transactions)
	{
		my $k = 'key-' . int(rand($n_keys));
		my $sleep = sprintf('%.3f', 0.002 + rand(0.012));
		if ($p == $n_producers)
		{
			print $fh "BEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT count(*) FROM orders \\g /dev/null\n";
		}
		else
		{
			print $fh "BEGIN;\n";
		}
		print $fh "INSERT INTO orders SELECT idempotency.outbox_send('orders', "
		  . "jsonb_build_object('p', $p, 'n', $n), '$k'), '$k', $p, $n;\n";
		print $fh "SELECT pg_sleep($sleep) \\g /dev/null\n";
		print $fh($n % 9 == 0 ? "ROLLBACK;\n" : "COMMIT;\n");
	}
	close $fh;
	push @producers, start('producer', "producer$p", '-f', $file);
}

# three relays that are terminated on the way, two that stall
start_relay('relay', 0) for 1 .. 3;
start_relay('relay-stalling', 2) for 1 .. 2;

sub kill_one_relay
{
	return $node->safe_psql('producer', q{
		SELECT count(pg_terminate_backend(pid)) FROM (
			SELECT pid FROM pg_stat_activity
			 WHERE application_name = 'relay' AND datname = 'producer'
			 ORDER BY random() LIMIT 1) AS r});
}

my $total = $n_producers * ($n_transactions - int($n_transactions / 9));
my $step = int($total / 8);
for my $round (1 .. 6)
{
	ok($node->poll_query_until('consumer', "SELECT count(*) >= " . ($round * $step) . " FROM effects"),
		"the consumer reached " . ($round * $step) . " effects");
	is(kill_one_relay(), '1', "round $round: a relay was terminated");
	start_relay('relay', 0);
}

for my $p (@producers)
{
	$p->{h}->finish;
}
ok($node->poll_query_until('producer',
		'SELECT count(*) = 0 FROM idempotency.outbox WHERE delivered_at IS NULL'),
	'every committed message was delivered and acknowledged');
$node->safe_psql('producer', 'UPDATE control SET stop = true');
for my $r (@relays)
{
	eval { $r->{h}->finish; };
}

#
# The checks
#
my @errors = grep { /ERROR/ } map { split /\n/, ${ $_->{err} } } @producers;
is(scalar(@errors), 0, 'no sender failed') or diag($errors[0]);

my $n_orders = $node->safe_psql('producer', 'SELECT count(*) FROM orders');
is($n_orders, $total, "$n_orders transactions committed");

my $orders = $node->safe_psql('producer',
	q{SELECT string_agg(message_id, ',' ORDER BY message_id) FROM orders});
my $effects = $node->safe_psql('consumer',
	q{SELECT string_agg(message_id, ',' ORDER BY message_id) FROM effects});
is($effects, $orders, 'no message was lost, none had two effects, none of a rolled-back transaction had any');

# the commit order of each key's senders, and the order of the effects
my %committed;
for my $row (split /\n/, $node->safe_psql('producer', q{
	SELECT message_id, rank() OVER (PARTITION BY ordering_key ORDER BY pg_xact_commit_timestamp(xmin))
	  FROM orders}))
{
	my ($id, $rank) = split /\|/, $row;
	$committed{$id} = $rank;
}
my (%last, $violations);
$violations = 0;
for my $row (split /\n/, $node->safe_psql('consumer',
	'SELECT message_id, ordering_key FROM effects ORDER BY applied'))
{
	my ($id, $k) = split /\|/, $row;
	$violations++ if defined $last{$k} && $committed{$id} < $last{$k};
	$last{$k} = $committed{$id};
}
is($violations, 0, 'within each ordering key, the effects happened in commit order');

is($node->safe_psql('producer', 'SELECT count(*) FROM fetch_log WHERE others_in_flight > 0'),
	'0', 'no fetch handed out a message while another of its key was in flight');
# the same from the log: a message is in flight from its fetch until its
# lease runs out or it is delivered (the acknowledgement's clock reading,
# before its commit), whichever comes first
is( $node->safe_psql('producer', q{
		WITH flight AS (
			SELECT l.ordering_key, l.message_id, l.fetched_at AS since,
				   least(l.lease_until, o.delivered_at) AS until
			  FROM fetch_log AS l JOIN idempotency.outbox AS o USING (message_id))
		SELECT count(*) FROM flight AS a JOIN flight AS b
			ON a.ordering_key = b.ordering_key AND a.message_id < b.message_id
		 WHERE a.since < b.until AND b.since < a.until}),
	'0', 'two messages of one key were never in flight at once');

# duplicates: only redeliveries, turned away by the consumer's inbox
my %handed;
for my $row (split /\n/, $node->safe_psql('producer',
	'SELECT message_id, deliveries FROM idempotency.outbox'))
{
	my ($id, $n) = split /\|/, $row;
	$handed{$id} = $n;
}
my $over = 0;
for my $row (split /\n/, $node->safe_psql('consumer',
	'SELECT message_id, count(*) FROM deliveries GROUP BY message_id'))
{
	my ($id, $n) = split /\|/, $row;
	$over++ if !defined $handed{$id} || $n > $handed{$id};
}
is($over, 0, 'no message reached the consumer more often than it was handed out');
my $turned_away = $node->safe_psql('consumer',
	'SELECT count(*) - count(DISTINCT message_id) FROM deliveries');
cmp_ok($turned_away, '>', 0, "the consumer's inbox turned away $turned_away redeliveries");
note 'stalls: ' . $node->safe_psql('producer',
	q{SELECT string_agg(kind || ' ' || n, ', ') FROM (SELECT kind, count(*) AS n FROM stalls GROUP BY kind) AS s});

# acknowledgements after the lease ran out
my $late_accepted = $node->safe_psql('producer',
	'SELECT count(*) FROM ack_log WHERE accepted AND acked_at > lease_until');
my $refused = $node->safe_psql('producer', 'SELECT count(*) FROM ack_log WHERE NOT accepted');
note "$late_accepted acknowledgements accepted after their lease ran out, $refused refused";
cmp_ok($refused, '>', 0, 'stalled relays were refused');
is( $node->safe_psql('producer', q{
		SELECT count(*) FROM ack_log AS a
		 WHERE a.accepted AND EXISTS (SELECT FROM fetch_log AS l
									   WHERE l.message_id = a.message_id AND l.attempt > a.attempt)}),
	'0', 'an acknowledgement was accepted only while no later attempt had taken the message');
is( $node->safe_psql('producer', q{
		SELECT count(*) FROM ack_log AS a
		 WHERE NOT a.accepted AND NOT EXISTS (SELECT FROM fetch_log AS l
										   WHERE l.message_id = a.message_id AND l.attempt > a.attempt)}),
	'0', 'every refused acknowledgement had been taken over by a later attempt');
is( $node->safe_psql('producer', q{
		SELECT count(*) FROM idempotency.outbox AS o
		 WHERE o.attempt <> (SELECT max(l.attempt) FROM fetch_log AS l WHERE l.message_id = o.message_id)}),
	'0', 'every message was marked delivered by the last attempt that took it');

# The same two cases one at a time, with no relay running: a lease that ran
# out with nobody taking the message over leaves the late acknowledgement
# accepted; once another attempt has taken it, the late one is refused and
# the new one accepted.
$node->safe_psql('producer', q{SELECT idempotency.outbox_send('orders', '{}', 'late', message_id => 'late-1')});
my $att = $node->safe_psql('producer', q{SELECT attempt FROM idempotency.outbox_fetch(1, '10 milliseconds')});
ok($node->poll_query_until('producer', q{SELECT lease_until < now() FROM idempotency.outbox WHERE message_id = 'late-1'}),
	'the lease ran out');
is($node->safe_psql('producer', "SELECT idempotency.outbox_ack($att, ARRAY['late-1'])"),
	'1', 'a late acknowledgement is accepted while no other attempt has taken the message');
$node->safe_psql('producer', q{SELECT idempotency.outbox_send('orders', '{}', 'late', message_id => 'late-2')});
$att = $node->safe_psql('producer', q{SELECT attempt FROM idempotency.outbox_fetch(1, '10 milliseconds')});
ok($node->poll_query_until('producer', q{SELECT lease_until < now() FROM idempotency.outbox WHERE message_id = 'late-2'}),
	'the lease ran out');
my $att2 = $node->safe_psql('producer', q{SELECT attempt FROM idempotency.outbox_fetch(1)});
cmp_ok($att2, '>', $att, 'another attempt took the message over');
my ($ret, $out, $err) = $node->psql('producer', "SELECT idempotency.outbox_ack($att, ARRAY['late-2'])");
like($err, qr/attempt $att does not hold message "late-2"/, 'the late acknowledgement is refused');
is($node->safe_psql('producer', "SELECT idempotency.outbox_ack($att2, ARRAY['late-2'])"),
	'1', 'and the new attempt acknowledges it');

done_testing();
