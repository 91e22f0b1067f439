# State machine definitions replicated by a subscription: the apply worker
# runs with session_replication_role = replica and fires row triggers only,
# yet every backend on the subscriber must drop its cached machine when a
# definition arrives.  A session that had the machine cached before the
# change must enforce the new one, in check_transition and in
# transition_allowed alike; so must one after a TRUNCATE.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $settings = qq{
shared_preload_libraries = 'idempotency'
};

my $publisher = PostgreSQL::Test::Cluster->new('publisher');
$publisher->init(allows_streaming => 'logical');
$publisher->append_conf('postgresql.conf', $settings);
$publisher->start;

my $subscriber = PostgreSQL::Test::Cluster->new('subscriber');
$subscriber->init;
$subscriber->append_conf('postgresql.conf', $settings);
$subscriber->start;

$publisher->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	SELECT idempotency.define_state_machine('m',
		'{"created": ["paid"], "paid": ["created", "refunded"], "refunded": []}', ARRAY['created']);
	CREATE PUBLICATION machines FOR TABLE idempotency.state_machines;
});
$subscriber->safe_psql('postgres', 'CREATE EXTENSION idempotency');
my $connstr = $publisher->connstr . ' dbname=postgres';
$subscriber->safe_psql('postgres',
	"CREATE SUBSCRIPTION machines CONNECTION '$connstr' PUBLICATION machines");
$subscriber->wait_for_subscription_sync($publisher, 'machines');

$subscriber->safe_psql('postgres', q{
	CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL);
	CREATE TRIGGER orders_status BEFORE INSERT OR UPDATE ON orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('m', 'status');
	INSERT INTO orders VALUES (1, 'created'), (2, 'created'), (3, 'created');
});

# A session on the subscriber that has the machine cached.
my $session = $subscriber->background_psql('postgres', on_error_stop => 0);
is($session->query_safe(q{UPDATE orders SET status = 'paid' WHERE id = 1 RETURNING status}),
	'paid', 'the subscriber enforces the replicated machine');
is($session->query_safe(q{SELECT idempotency.transition_allowed('m', 'paid', 'created')}),
	't', 'paid -> created is allowed before the change');

# The publisher removes paid -> created.
$publisher->safe_psql('postgres', q{
	SELECT idempotency.define_state_machine('m',
		'{"created": ["paid"], "paid": ["refunded"], "refunded": []}', ARRAY['created']);
});
$publisher->wait_for_catchup('machines');
is($subscriber->safe_psql('postgres',
		q{SELECT transitions -> 'paid' FROM idempotency.state_machines WHERE name = 'm'}),
	'["refunded"]', 'the new definition reached the subscriber');

is($session->query_safe(q{SELECT idempotency.transition_allowed('m', 'paid', 'created')}),
	'f', 'a session that had the machine cached sees the removed transition');
eval { $session->query_safe(q{UPDATE orders SET status = 'created' WHERE id = 1}) };
like($@, qr/transition from "paid" to "created" is not allowed by state machine "m"/,
	'and its check_transition refuses paid -> created');
$session->{stderr} = '';
is($subscriber->safe_psql('postgres', 'SELECT status FROM orders WHERE id = 1'),
	'paid', 'the row stayed paid');

# A TRUNCATE on the publisher reaches the cache as well (statement trigger).
is($session->query_safe(q{SELECT idempotency.transition_allowed('m', 'created', 'paid')}),
	't', 'created -> paid is allowed before the truncate');
$publisher->safe_psql('postgres', 'TRUNCATE idempotency.state_machines');
$publisher->wait_for_catchup('machines');
my ($ret, $out, $err) = $subscriber->psql('postgres', 'SELECT count(*) FROM idempotency.state_machines');
is($out, '0', 'the truncate reached the subscriber');
eval { $session->query_safe(q{SELECT idempotency.transition_allowed('m', 'created', 'paid')}) };
like($@, qr/state machine "m" does not exist/,
	'a session that had the machine cached sees that it is gone');
$session->{stderr} = '';

$session->quit;
ok(!$subscriber->log_contains('TRAP|server process .* was terminated'),
	'the subscriber logged no crash');
$subscriber->stop;
$publisher->stop;
done_testing();
