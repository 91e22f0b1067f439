# pg_upgrade of a cluster that has the extension and preloads the library:
# the launcher stays out of binary-upgrade mode, and the records, grants and
# state machines arrive intact and keep working.

use strict;
use warnings FATAL => 'all';

use File::Find;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $settings = qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = '1s'
};

my $old = PostgreSQL::Test::Cluster->new('old');
$old->init;
$old->append_conf('postgresql.conf', $settings);
$old->start;
$old->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('paid', request => '{"amount": 10}');
	SELECT idempotency.idempotent_finish('paid', '{"charged": 10}');
	COMMIT;
	SELECT idempotency.define_state_machine('order_status', '{"created": ["paid"], "paid": []}');
});
$old->stop;

my $new = PostgreSQL::Test::Cluster->new('new');
$new->init;
$new->append_conf('postgresql.conf', $settings);

chdir $new->basedir;
command_ok(
	[
		'pg_upgrade', '--no-sync', '--retain',
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $old->config_data('--bindir'), '-B', $new->config_data('--bindir'),
		'-s', $new->host, '-p', $old->port, '-P', $new->port
	],
	'pg_upgrade with the library preloaded');

# pg_upgrade starts both servers in binary-upgrade mode; the launcher, which
# logs its schedule when it starts, must not have run in either
my @server_logs;
find(sub { push @server_logs, $File::Find::name if /^pg_upgrade_server\.log$/ },
	$new->data_dir . '/pg_upgrade_output.d');
ok(scalar(@server_logs) > 0, 'pg_upgrade kept its server log');
my $log = join('', map { slurp_file($_) } @server_logs);
unlike($log, qr/idempotency background cleanup/, 'no launcher ran during the upgrade');

$new->start;
is( $new->safe_psql('postgres',
		q{SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('paid', request => '{"amount": 10}')}),
	'replay {"charged": 10}', 'a record replays after pg_upgrade');
is( $new->safe_psql('postgres', q{SELECT idempotency.transition_allowed('order_status', 'created', 'paid')}),
	't', 'state machines survive pg_upgrade');
is( $new->safe_psql('postgres', q{
		SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
		 WHERE e.extname = 'idempotency' AND d.classid = 'pg_namespace'::regclass
		   AND d.objid = 'idempotency'::regnamespace AND d.deptype = 'e'
		   AND has_schema_privilege('public', 'idempotency', 'USAGE')}),
	'1', 'the schema is still a member of the extension, with USAGE for PUBLIC');
ok($new->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'}),
	'the launcher runs on the upgraded cluster');

$new->stop;
done_testing();
