# What later majors add to the background cleanup (src/compat.h):
# - 17+: the launcher's waits show in pg_stat_activity under names of their
#   own (its main loop, and its pause between two workers of a database
#   keeping to the rate cap); on 15 they are "Extension";
# - 18: pg_get_loaded_modules() names the library and its version;
# - 19 (BGWORKER_INTERRUPTIBLE, which 18 does not have): DROP DATABASE
#   terminates a cleanup worker connected to the database instead of
#   waiting for it and failing.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
# one row a second: a worker that has rows to delete stays a long time
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = '1s'
idempotency.cleanup_batch_size = 1
idempotency.cleanup_max_rows_per_second = 1
});
$node->start;
my $version = $node->safe_psql('postgres', 'SHOW server_version_num');

my $launcher_event = $version >= 170000 ? 'IdempotencyLauncherMain' : 'Extension';
my $worker_event = $version >= 170000 ? 'IdempotencyCleanupThrottle' : 'Extension';

ok( $node->poll_query_until('postgres', q{
		SELECT wait_event_type || ' ' || wait_event FROM pg_stat_activity
		 WHERE backend_type = 'idempotency launcher'}, "Extension $launcher_event"),
	"the launcher waits as \"$launcher_event\"");
my $launcher_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'});

# a database with far more expired records than a worker deletes in a while
$node->safe_psql('postgres', 'CREATE DATABASE busy');
$node->safe_psql('busy', q{
	CREATE EXTENSION idempotency;
	SELECT count(idempotency.idempotent_begin(('k-' || i)::idempotency.key, ttl => '1 hour', external => true))
	  FROM generate_series(1, 1000) AS i;
	UPDATE idempotency.registry SET expires_at = now() - interval '1 minute', attempt = attempt - 60;
});

# workers never pause (a pause would hold the database): the launcher,
# connected to none, keeps to the rate between two of them
ok( $node->poll_query_until('postgres', q{
		SELECT wait_event_type || ' ' || wait_event FROM pg_stat_activity
		 WHERE backend_type = 'idempotency launcher'},
		"Extension $worker_event"),
	"the launcher keeping a backlog to its rate waits as \"$worker_event\"");

SKIP:
{
	skip 'pg_get_loaded_modules() is new in 18', 1 if $version < 180000;

	is( $node->safe_psql('postgres', q{
			SELECT module_name || ' ' || version FROM pg_get_loaded_modules()
			 WHERE file_name LIKE 'idempotency%'}),
		'idempotency 1.2', 'the library tells its name and version');
}

SKIP:
{
	skip 'interruptible background workers are new after 18', 3 if $version < 190000;

	my $offset = -s $node->logfile;
	my ($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE busy');
	is($ret, 0, 'DROP DATABASE succeeds while a cleanup worker is connected to it')
	  or diag($stderr);
	ok( $node->wait_for_log(
			qr/terminating background worker "idempotency cleanup" due to administrator command/,
			$offset),
		'the worker was terminated');
	ok( $node->poll_query_until('postgres', qq{
			SELECT count(*) = 1 FROM pg_stat_activity
			 WHERE backend_type = 'idempotency launcher' AND pid = $launcher_pid}),
		'the launcher goes on');
}

$node->stop;
done_testing();
