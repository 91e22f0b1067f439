# The outbox end to end: producers send messages in their business
# transactions (some of which roll back), relays deliver them to a consumer
# in another database that applies each one through inbox_receive, and the
# relays die on the way: sessions terminated at arbitrary moments, a relay
# that dies after applying its batch but before acknowledging it (every
# time, so that redelivery is certain to happen), and an immediate shutdown
# of the server in the middle.  Afterwards:
# - every committed message had its effect at the consumer exactly once,
#   and no message of a rolled-back transaction had any;
# - within each ordering key the effects happened in the order the messages
#   were sent;
# - messages were handed out more than once (the kills did land), and the
#   consumer's inbox turned the redeliveries away;
# - the background cleanup deletes the delivered messages once they expire.
#
# The relay is a PL/pgSQL procedure: fetch a batch and commit (the lease),
# apply each message in the consumer database through dblink (one
# transaction per message there), acknowledge, commit; on IK004 (a batch
# taken over after the lease ran out) acknowledge what is still held.
# Nothing here depends on timing: kills happen after the consumer has
# progressed (poll_query_until), and the end is reached when every message
# is delivered.

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('outbox');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
max_connections = 40
});
$node->start;

my $n_messages = 1500;
my $n_keys = 12;
my $lease = '1 second';

$node->safe_psql('postgres', 'CREATE DATABASE producer; CREATE DATABASE consumer;');

$node->safe_psql('consumer', q{
CREATE EXTENSION idempotency;
CREATE TABLE effects (
	applied bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	message_id text NOT NULL,
	ordering_key text NOT NULL,
	n int NOT NULL
);
CREATE TABLE deliveries (message_id text NOT NULL);
-- the consumer: the message's effect and its id, in one transaction; every
-- delivery that reaches it is logged
CREATE PROCEDURE apply(id text, k text, n int) LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO deliveries VALUES (id);
	IF idempotency.inbox_receive('orders', id) THEN
		INSERT INTO effects (message_id, ordering_key, n) VALUES (id, k, n);
	END IF;
END $$;
});

$node->safe_psql('producer', qq{
CREATE EXTENSION idempotency;
CREATE EXTENSION dblink;
CREATE TABLE orders (n int PRIMARY KEY, ordering_key text NOT NULL, message_id text NOT NULL);
CREATE TABLE control (produced boolean NOT NULL, stop boolean NOT NULL);
INSERT INTO control VALUES (false, false);

-- the producer: order n and its message in one transaction; every 7th
-- transaction rolls back after sending
CREATE PROCEDURE produce(first int, last int) LANGUAGE plpgsql AS \$\$
DECLARE
	k text;
BEGIN
	FOR n IN first .. last LOOP
		k := 'key-' || (n % $n_keys);
		INSERT INTO orders VALUES (n, k,
			idempotency.outbox_send('orders', jsonb_build_object('n', n), k));
		IF n % 7 = 0 THEN
			ROLLBACK;
		ELSE
			COMMIT;
		END IF;
		IF n % 5 = 0 THEN
			PERFORM pg_sleep(0.005);
		END IF;
	END LOOP;
	UPDATE control SET produced = true;
	COMMIT;
END \$\$;

-- a relay; with die_before_ack it ends its session after applying its
-- first batch, before acknowledging it
CREATE PROCEDURE relay(batch_size int, die_before_ack boolean) LANGUAGE plpgsql AS \$\$
DECLARE
	ids text[];
	keys text[];
	ns int[];
	att int8;
	m text;
BEGIN
	PERFORM dblink_connect('consumer', 'dbname=consumer host=' || current_setting('unix_socket_directories')
						   || ' port=' || current_setting('port'));
	LOOP
		SELECT array_agg(f.message_id), array_agg(f.ordering_key), array_agg((f.payload->>'n')::int),
			   max(f.attempt)
		  INTO ids, keys, ns, att
		  FROM idempotency.outbox_fetch(batch_size, lease => '$lease') AS f;
		COMMIT;
		IF ids IS NULL THEN
			EXIT WHEN (SELECT c.produced AND c.stop FROM control AS c);
			PERFORM pg_sleep(0.02);
			CONTINUE;
		END IF;
		FOR i IN 1 .. array_length(ids, 1) LOOP
			PERFORM dblink_exec('consumer', format('CALL apply(%L, %L, %s)', ids[i], keys[i], ns[i]));
		END LOOP;
		IF die_before_ack THEN
			PERFORM pg_terminate_backend(pg_backend_pid());
		END IF;
		BEGIN
			PERFORM idempotency.outbox_ack(att, ids);
		EXCEPTION WHEN SQLSTATE 'IK004' THEN
			-- some were taken over: acknowledge the ones still held
			FOREACH m IN ARRAY ids LOOP
				BEGIN
					PERFORM idempotency.outbox_ack(att, ARRAY[m]);
				EXCEPTION WHEN SQLSTATE 'IK004' THEN
					NULL;
				END;
			END LOOP;
		END;
		COMMIT;
	END LOOP;
END \$\$;
});

my @psql = ($node->installed_command('psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1');
my @procs;

# start(db, sql, name): a psql running sql in the background
sub start
{
	my ($db, $sql, $name) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ @psql, '-d', $node->connstr($db) . " application_name=$name", '-c', $sql ],
		'<', \undef, '>', \$out, '2>', \$err);
	push @procs, $h;
	return $h;
}

sub start_relays
{
	my ($n) = @_;
	start('producer', 'CALL relay(' . (5 + 10 * $_) . ', false)', 'relay') for 1 .. $n;
}

# wait until the consumer has applied at least n effects
sub wait_effects
{
	my ($n) = @_;
	ok($node->poll_query_until('consumer', "SELECT count(*) >= $n FROM effects"),
		"the consumer reached $n effects");
}

sub kill_one_relay
{
	my $killed = $node->safe_psql('producer', q{
		SELECT count(pg_terminate_backend(pid)) FROM (
			SELECT pid FROM pg_stat_activity
			 WHERE application_name = 'relay' AND datname = 'producer'
			 ORDER BY random() LIMIT 1) AS r});
	return $killed;
}

start('producer', "CALL produce(1, $n_messages)", 'producer');
start_relays(3);
# a relay that applies its first batch and dies before acknowledging it
start('producer', 'CALL relay(20, true)', 'relay-dying');

# terminate relays while they work, and start new ones
my $step = int($n_messages / 12);
for my $round (1 .. 2)
{
	wait_effects($round * $step);
	is(kill_one_relay(), 1, "round $round: a relay was terminated");
	start_relays(1);
}

# an immediate shutdown in the middle: producer and relays die with the
# server; then the producer resumes after its last committed order
wait_effects(3 * $step);
$node->stop('immediate');
$_->kill_kill for @procs;
@procs = ();
$node->start;
my $resume = $node->safe_psql('producer', 'SELECT coalesce(max(n), 0) + 1 FROM orders');
note "producer resumes at $resume";
start('producer', "CALL produce($resume, $n_messages)", 'producer');
start_relays(2);
start('producer', 'CALL relay(20, true)', 'relay-dying');

for my $round (3 .. 8)
{
	wait_effects($round * $step);
	is(kill_one_relay(), 1, "round $round: a relay was terminated");
	start_relays(1);
}

# the end: everything produced, everything delivered; then the relays stop
ok($node->poll_query_until('producer', 'SELECT produced FROM control'), 'the producer finished');
ok($node->poll_query_until('producer',
		'SELECT count(*) = 0 FROM idempotency.outbox WHERE delivered_at IS NULL'),
	'every committed message was delivered and acknowledged');
$node->safe_psql('producer', 'UPDATE control SET stop = true');
for my $h (@procs)
{
	eval { $h->finish; };
}

#
# The checks
#
my $orders = $node->safe_psql('producer',
	q{SELECT string_agg(n || ' ' || message_id, ',' ORDER BY n) FROM orders});
my $effects = $node->safe_psql('consumer',
	q{SELECT string_agg(n || ' ' || message_id, ',' ORDER BY n) FROM effects});
my $n_orders = $node->safe_psql('producer', 'SELECT count(*) FROM orders');
cmp_ok($n_orders, '>', $n_messages / 2, "$n_orders orders committed");
is($effects, $orders, 'the consumer has exactly the committed messages, each once');

is($node->safe_psql('consumer', 'SELECT count(*) - count(DISTINCT message_id) FROM effects'),
	'0', 'no message had two effects');
is($node->safe_psql('consumer', 'SELECT count(*) FROM effects WHERE n % 7 = 0'),
	'0', 'no message of a rolled-back transaction had an effect');
is($node->safe_psql('producer', q{SELECT count(*) FROM idempotency.outbox WHERE (payload->>'n')::int % 7 = 0}),
	'0', 'no message of a rolled-back transaction is in the outbox');
is( $node->safe_psql('consumer', q{
		SELECT count(*) FROM (
			SELECT n, lag(n) OVER (PARTITION BY ordering_key ORDER BY applied) AS before
			  FROM effects) AS e
		 WHERE e.n < e.before}),
	'0', 'within each ordering key, effects happened in the order of the sends');

my $redelivered = $node->safe_psql('producer',
	'SELECT count(*) FROM idempotency.outbox WHERE deliveries > 1');
cmp_ok($redelivered, '>', 0, "$redelivered messages were handed out more than once");
my $turned_away = $node->safe_psql('consumer',
	'SELECT count(*) - count(DISTINCT message_id) FROM deliveries');
cmp_ok($turned_away, '>', 0, "the consumer's inbox turned away $turned_away redeliveries");

# the background cleanup deletes delivered messages once they expire, and
# leaves undelivered ones alone
$node->safe_psql('producer', q{
	SELECT idempotency.outbox_send('orders', '{"late": true}', 'late-key', message_id => 'late');
	UPDATE idempotency.outbox SET expires_at = now() - interval '1 second' WHERE delivered_at IS NOT NULL;
	ALTER SYSTEM SET idempotency.cleanup_interval = '1s';
	SELECT pg_reload_conf();
});
ok($node->poll_query_until('producer', 'SELECT count(*) = 1 FROM idempotency.outbox'),
	'the background cleanup deleted the expired delivered messages');
is($node->safe_psql('producer', 'SELECT message_id FROM idempotency.outbox'), 'late',
	'and left the undelivered one');

done_testing();
