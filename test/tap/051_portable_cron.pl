# Expiry in the portable edition, where no background worker runs: the
# schedule doc/portable.md gives, run as it is written by the database
# owner who installed the portable edition (not a superuser) in a server
# that never loads the C library, with pg_cron.  Once pg_cron has run the
# job (its schedule is by the minute: up to a minute and a half), the
# expired records, inbox entries and tokens are gone, and the live ones
# are not; and cleanup() keeps to the worker's rate cap.
#
# Debian's postgresql-NN-cron provides pg_cron (test/lib.sh installs it on
# this machine's major); without it the test is skipped.

use strict;
use warnings FATAL => 'all';

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $top = abs_path(dirname(__FILE__) . '/../..');

my $node = PostgreSQL::Test::Cluster->new('cron');
my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
plan skip_all => 'pg_cron is not installed (Debian package "postgresql-NN-cron")'
  unless -f "$sharedir/extension/pg_cron.control";

# the schedule, as doc/portable.md writes it
my $doc = do { local (@ARGV, $/) = "$top/doc/portable.md"; <> };
my ($schedule) = $doc =~ /^\s*```sql\n\s*(SELECT cron\.schedule\(.*?\);)\n\s*```/ms;
ok(defined $schedule, 'doc/portable.md gives the pg_cron schedule') or BAIL_OUT('no schedule in doc/portable.md');

my $script = `make -s -C $top portable | tail -n 1`;
chomp $script;
ok(-f $script, 'make portable wrote the script');

$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'app'
cron.use_background_workers = on
max_worker_processes = 16
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE ROLE owner LOGIN;
	CREATE DATABASE app OWNER owner;
	CREATE ROLE app1 LOGIN;
});
my ($rc, $out, $err) = $node->psql('app', undef, extra_params => [ '-U', 'owner', '--single-transaction', '-v', 'ON_ERROR_STOP=1', '-f', $script ]);
is($rc, 0, 'the database owner installs the portable edition') or diag($err);
$node->safe_psql('app', q{
	CREATE EXTENSION pg_cron;
	GRANT USAGE ON SCHEMA cron TO owner;
});
$node->safe_psql('app', q{SELECT idempotency.grant_usage('app1')}, extra_params => [ '-U', 'owner' ]);

# records, inbox entries and tokens: expired, and live
$node->safe_psql('app', q{
	SELECT idempotency.idempotent_begin('old-' || g, external => true) FROM generate_series(1, 30) AS g;
	SELECT idempotency.idempotent_begin('live', external => true);
	SELECT idempotency.inbox_receive('c', 'old-' || g) FROM generate_series(1, 20) AS g;
	SELECT idempotency.inbox_receive('c', 'live');
	SELECT idempotency.issue_token() FROM generate_series(1, 10);
}, extra_params => [ '-U', 'app1' ]);
$node->safe_psql('app', q{
	UPDATE idempotency.registry SET expires_at = now() - interval '1 minute', attempt = attempt - 10
	 WHERE key LIKE 'old-%';
	UPDATE idempotency.inbox SET expires_at = now() - interval '1 minute' WHERE message_id LIKE 'old-%';
	UPDATE idempotency.tokens SET expires_at = now() - interval '1 minute';
}, extra_params => [ '-U', 'owner' ]);

# the schedule, as the owner, verbatim
($rc, $out, $err) = $node->psql('app', $schedule, extra_params => [ '-U', 'owner', '-v', 'ON_ERROR_STOP=1' ]);
is($rc, 0, "the owner schedules it as doc/portable.md says: $schedule") or diag($err);
is($node->safe_psql('app', q{SELECT username || ' ' || database || ' ' || command FROM cron.job}),
	'owner app SELECT idempotency.cleanup()', 'the job runs the cleanup in the database, as the owner');

ok($node->poll_query_until('app', q{SELECT count(*) > 0 FROM cron.job_run_details WHERE status IN ('succeeded', 'failed')}),
	'pg_cron ran the job');
is($node->safe_psql('app', q{SELECT status || ' ' || return_message FROM cron.job_run_details ORDER BY start_time LIMIT 1}),
	'succeeded SELECT 1', 'the cleanup succeeded');
is($node->safe_psql('app', q{
	SELECT (SELECT string_agg(key, ',') FROM idempotency.registry) || ' '
		|| (SELECT string_agg(message_id, ',') FROM idempotency.inbox) || ' '
		|| (SELECT count(*) FROM idempotency.tokens)}), 'live live 0',
	'the expired records, inbox entries and tokens are gone, the live ones stay');

# the background worker's cap, which a scheduler's call (no batch size)
# keeps to: no more rows per second than it allows since the last call that
# ran; a call that names its batch size is uncapped
$node->safe_psql('app', q{SELECT cron.unschedule('idempotency-cleanup')}, extra_params => [ '-U', 'owner' ]);
sub expire_200
{
	$node->safe_psql('app', q{
		SELECT count(*) FROM (SELECT idempotency.idempotent_begin('cap-' || g, external => true)
								FROM generate_series(1, 200) AS g) AS claimed;
	}, extra_params => [ '-U', 'app1' ]);
	$node->safe_psql('app', q{
		UPDATE idempotency.registry SET expires_at = now() - interval '1 minute', attempt = attempt - 10
		 WHERE key LIKE 'cap-%';
	}, extra_params => [ '-U', 'owner' ]);
}
expire_200();
is($node->safe_psql('app', q{
	SET idempotency.cleanup_max_rows_per_second = 10;
	UPDATE idempotency.portable_cleanup SET last_run = clock_timestamp() - interval '3 seconds';
	SELECT idempotency.cleanup() BETWEEN 30 AND 39, idempotency.cleanup();
	SELECT count(*) BETWEEN 161 AND 170 FROM idempotency.registry WHERE key LIKE 'cap-%';
}, extra_params => [ '-U', 'owner' ]), "t|0\nt",
	'cleanup() deletes as many rows as cleanup_max_rows_per_second allows since the last call, then none');
is($node->safe_psql('app', q{
	SET idempotency.cleanup_max_rows_per_second = 10;
	SELECT idempotency.cleanup(1000) >= 161;
	SELECT count(*) FROM idempotency.registry WHERE key LIKE 'cap-%';
}, extra_params => [ '-U', 'owner' ]), "t\n0", 'a call that names its batch size is uncapped');
expire_200();
is($node->safe_psql('app', q{
	SET idempotency.cleanup_max_rows_per_second = 0;
	SELECT idempotency.cleanup() >= 200, idempotency.cleanup() = 0;
}, extra_params => [ '-U', 'owner' ]), "t|t", 'cleanup_max_rows_per_second = 0: no cap');
# a scheduler's call while another one runs does nothing
my $holder = $node->background_psql('app', extra_params => [ '-U', 'owner' ]);
$holder->query_safe('BEGIN; SELECT * FROM idempotency.portable_cleanup FOR UPDATE;');
expire_200();
is($node->safe_psql('app', q{SET idempotency.cleanup_max_rows_per_second = 0; SELECT idempotency.cleanup()},
	extra_params => [ '-U', 'owner' ]), '0', 'a call while another one runs returns 0 at once');
$holder->query_safe('COMMIT');
$holder->quit;
is($node->safe_psql('app', q{SET idempotency.cleanup_max_rows_per_second = 0; SELECT idempotency.cleanup()},
	extra_params => [ '-U', 'owner' ]), '200', 'and the next call deletes them');

$node->stop;
done_testing();
