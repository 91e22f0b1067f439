# ALTER EXTENSION idempotency UPDATE from 1.1 to 1.2 while applications
# run: long-lived sessions of an application's login and of a consumer's,
# which used the 1.1 objects, and a load of begin, lookup and finish by
# another login of the application, go on through the update without an
# error; the update records the roles grant_usage() was given to as the
# application roles, and a session whose role was its own owner under 1.1
# (a consumer-only role from which idempotent_begin was revoked) works on
# its application role's records afterwards, without reconnecting.

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('update_1_1');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
idempotency.max_wait = '1min'
max_connections = 40
log_line_prefix = '%m [%p] %e '
});
$node->start;

$node->safe_psql('postgres', q{
	CREATE ROLE app NOLOGIN;
	CREATE ROLE app_login1 LOGIN IN ROLE app;
	CREATE ROLE app_login2 LOGIN IN ROLE app;
	CREATE ROLE consumer NOLOGIN;
	CREATE ROLE consumer_login LOGIN IN ROLE consumer;
	CREATE EXTENSION idempotency VERSION '1.1';
	SELECT idempotency.grant_usage('app');
	SELECT idempotency.grant_usage('consumer');
	REVOKE EXECUTE ON FUNCTION idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean) FROM consumer;
	CREATE ROLE monitor LOGIN IN ROLE pg_monitor;
	CREATE ROLE auditor LOGIN;
	GRANT SELECT ON idempotency.stats TO auditor;
	GRANT EXECUTE ON FUNCTION idempotency.stats() TO auditor;
});

# a monitoring session through the update: one statement prepared with
# SELECT *, one naming its columns
my $monitor = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'monitor' ]);
my $stale = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'monitor' ]);
$stale->query_safe(q{PREPARE whole AS SELECT * FROM idempotency.stats});
$monitor->query_safe(q{PREPARE named AS SELECT finishes >= 0 FROM idempotency.stats});
is($monitor->query_safe(q{EXECUTE named}), 't', 'under 1.1 the monitor reads the stats');

my $app = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'app_login1' ]);
$app->query_safe(q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('done', 'live');
	SELECT idempotency.idempotent_finish('done', '{"n": 1}', 'live');
	COMMIT;
});
is($app->query_safe(q{SELECT idempotency.owner_name()}), 'app', 'under 1.1 the login works for app');

my $consumer = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'consumer_login' ]);
is($consumer->query_safe(q{SELECT idempotency.owner_name()}), 'consumer_login',
	'under 1.1 a login of the consumer from which idempotent_begin was revoked is its own owner');

# a load by another login of the application, through the update
my $script = $node->basedir . '/load.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set n random(1, 9000000000000000000)
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('load-' || :client_id || '-' || :n, 'live');
SELECT found FROM idempotency.lookup('load-' || :client_id || '-' || :n, 'live');
SELECT idempotency.idempotent_finish('load-' || :client_id || '-' || :n, '{}', 'live');
COMMIT;
SELECT outcome FROM idempotency.idempotent_begin('done', 'live', external => true);
SELECT idempotency.inbox_receive('orders', 'evt-' || :n);
});
my $log_start = -s $node->logfile;
my ($bench_out, $bench_err) = ('', '');
my $bench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '6', '-j', '2', '-T', '6', '-f', $script,
	  '-h', $node->host, '-p', $node->port, '-U', 'app_login2', 'postgres' ],
	'>', \$bench_out, '2>', \$bench_err);
ok($node->poll_query_until('postgres', q{
	SELECT count(*) >= 200 FROM idempotency.registry WHERE key LIKE 'load-%'}),
	'the load runs');
$node->safe_psql('postgres', 'ALTER EXTENSION idempotency UPDATE');
$bench->finish;
note("the load through the update:\n$bench_out");
my $log = slurp_file($node->logfile, $log_start);
my %errors;
$errors{$1}++ while $log =~ /\] (\w{5}) (?:ERROR|FATAL):/g;
is(join(', ', map { "$_: $errors{$_}" } sort keys %errors), '',
	'no call fails through the update');
unlike($bench_err, qr/aborted/, 'no client of the load was aborted') or diag($bench_err);
like($bench_out, qr/number of transactions actually processed: [1-9]/, 'the load ran') or diag($bench_err);

is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
	'1.2', 'the extension is at 1.2');
is($node->safe_psql('postgres', q{SELECT string_agg(role_name, ',' ORDER BY role_name) FROM idempotency.application_roles}),
	'app,consumer', 'the update records the roles grant_usage was given to');
is($app->query_safe(q{SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('done', 'live', external => true)}),
	'replay {"n": 1}', 'the application\'s long-lived session replays what it finished before the update');
is($consumer->query_safe(q{SELECT idempotency.owner_name()}), 'consumer',
	'the consumer\'s long-lived session works for the consumer after the update, without reconnecting');
is($consumer->query_safe(q{SELECT idempotency.inbox_receive('orders', 'evt-c')}), 't',
	'and processes a message');
$node->safe_psql('postgres', q{CREATE ROLE consumer_login2 LOGIN IN ROLE consumer});
is($node->safe_psql('postgres', q{SELECT idempotency.inbox_receive('orders', 'evt-c')},
		extra_params => [ '-U', 'consumer_login2' ]), 'f',
	'which another login of the consumer turns away');
$node->safe_psql('postgres', q{CREATE FUNCTION public.live_pay(r jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT r'});
is($app->query_safe(q{SELECT outcome || ' ' || response::text FROM idempotency.idempotent_call('call', 'public.live_pay(jsonb)', '{"n": 2}', 'live')}),
	'execute {"n": 2}', 'the update grants idempotent_call to the application roles: the live session calls it');
is($app->query_safe(q{SELECT outcome || ' ' || response::text FROM idempotency.idempotent_call('call', 'public.live_pay(jsonb)', '{"n": 2}', 'live')}),
	'replay {"n": 2}', 'and replays it');

# the stats grow at their end and keep their grants; forget_key and metrics
is($monitor->query_safe(q{EXECUTE named}), 't', 'a statement naming the stats\' columns keeps working');
$stale->query(q{EXECUTE whole});
like($stale->{stderr}, qr/cached plan must not change result type/,
	'one prepared as SELECT * fails as the upgrade notes say');
$stale->quit;
is($monitor->query_safe(q{SELECT keys_forgotten FROM idempotency.stats}), '0', 'the stats count forgotten keys');
is($node->safe_psql('postgres', q{SELECT begins_waited >= 0 FROM idempotency.stats}, extra_params => [ '-U', 'auditor' ]),
	't', 'grants on the stats view and its function made under 1.1 hold for the new columns');
is($node->safe_psql('postgres', q{SELECT idempotency.forget_key('app', 'call', 'live')}), 't',
	'an administrator forgets a key after the update');
is($app->query_safe(q{SELECT outcome FROM idempotency.idempotent_call('call', 'public.live_pay(jsonb)', '{"n": 3}', 'live')}),
	'execute', 'and the live session executes it again');
is($monitor->query_safe(q{SELECT records > 200 AND stalled_claims = 0 FROM idempotency.metrics}), 't',
	'the live monitoring session reads the metrics');
is($monitor->query_safe(q{SELECT keys_forgotten FROM idempotency.stats}), '1', 'and counts the forgotten key');
$app->quit;
$consumer->quit;
$monitor->quit;

done_testing();
