# The outbox through logical decoding (idempotency.outbox_delivery =
# logical): every message of a committed transaction is a transactional
# logical decoding message, read here with test_decoding, in commit order;
# a rolled-back transaction's message never appears; the row is kept as
# delivered (its id stays taken) and never handed to a relay.  With the
# default, relay, nothing is written to the WAL for decoding.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('logical');
$node->init(allows_streaming => 'logical');
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
});
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	SELECT pg_create_logical_replication_slot('outbox', 'test_decoding');
});

# messages(): the outbox messages decoded since the last call, as
# "message_id|topic|ordering_key|payload|headers"
sub messages
{
	my $out = $node->safe_psql('postgres', q{
		SELECT string_agg(concat_ws('|', m->>'message_id', m->>'topic', m->>'ordering_key',
									m->'payload', m->'headers'), E'\n' ORDER BY c.ord)
		  FROM (SELECT substring(data FROM 'content:(.*)$')::jsonb AS m, ord
				  FROM pg_logical_slot_get_changes('outbox', NULL, NULL,
												   'skip-empty-xacts', '1', 'include-xids', '0')
					   WITH ORDINALITY AS x(lsn, xid, data, ord)
				 WHERE data LIKE 'message: transactional: 1 prefix: idempotency.outbox,%') AS c});
	return $out;
}

$node->safe_psql('postgres', q{
	SET idempotency.outbox_delivery = logical;
	BEGIN;
	SELECT idempotency.outbox_send('orders', '{"n": 1}', 'k', message_id => 'm1');
	COMMIT;
	BEGIN;
	SELECT idempotency.outbox_send('orders', '{"n": 2}', 'k', message_id => 'm2');
	ROLLBACK;
	SELECT idempotency.outbox_send('audit', '{"n": 3}', headers => '{"trace": "t3"}', message_id => 'm3');
});

# two transactions on one key: the messages come in commit order
my $s1 = $node->background_psql('postgres');
my $s2 = $node->background_psql('postgres');
$s1->query_safe(q{SET idempotency.outbox_delivery = logical});
$s2->query_safe(q{SET idempotency.outbox_delivery = logical});
$s1->query_safe(q{BEGIN; SELECT idempotency.outbox_send('orders', '{"n": 4}', 'k', message_id => 'm4')});
$s2->query_safe(q{BEGIN; SELECT idempotency.outbox_send('orders', '{"n": 5}', 'k', message_id => 'm5'); COMMIT});
$s1->query_safe('COMMIT');
$s1->quit;
$s2->quit;

is( messages(),
	join("\n",
		'm1|orders|k|{"n": 1}|null',
		'm3|audit|m3|{"n": 3}|{"trace": "t3"}',
		'm5|orders|k|{"n": 5}|null',
		'm4|orders|k|{"n": 4}|null'),
	'committed messages are decoded in commit order, a rolled-back one never');

is( $node->safe_psql('postgres',
		q{SELECT string_agg(message_id || ' ' || state, ',' ORDER BY message_id) FROM idempotency.my_outbox}),
	'm1 delivered,m3 delivered,m4 delivered,m5 delivered',
	'the rows are kept as delivered');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.outbox_fetch()}),
	'0', 'and never handed to a relay');

my ($ret, $stdout, $stderr) = $node->psql('postgres', q{
	SET idempotency.outbox_delivery = logical;
	SELECT idempotency.outbox_send('orders', '{}', 'k', message_id => 'm1')});
like($stderr, qr/message "m1" was already sent with ordering key "k"/,
	'an id that was sent is refused while it is kept');

# the default: rows for relays, nothing for logical decoding
$node->safe_psql('postgres',
	q{SELECT idempotency.outbox_send('orders', '{"n": 6}', 'k', message_id => 'm6')});
is(messages(), '', 'with outbox_delivery = relay nothing is decoded');
is($node->safe_psql('postgres', q{SELECT message_id FROM idempotency.outbox_fetch()}),
	'm6', 'and the message waits for a relay');

$node->stop;
done_testing();
