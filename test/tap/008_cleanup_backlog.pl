# A cleanup pass that lasts many seconds (a backlog far larger than the
# rate cap clears in five) never holds its database: DROP DATABASE and
# ALTER DATABASE ... RENAME of a database being cleaned succeed, whether the
# pass is pausing for the rate cap or deleting flat out, and the backlog in
# the other databases is still cleaned, at no more than the rate cap.
#
# Nothing here waits for time to pass: the pass's length follows from the
# rate cap and the size of the backlog, and the commands are run while
# cleanup_status or pg_stat_activity shows the pass in progress.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('backlog');
$node->init;
# off while the backlogs are set up; 50-row batches, 100 rows a second
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
idempotency.cleanup_batch_size = 50
idempotency.cleanup_max_rows_per_second = 100
});
$node->start;

# backlog(db, n): a database with n expired records and 5 live ones
sub backlog
{
	my ($db, $n) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, qq{
		CREATE EXTENSION idempotency;
		SELECT count(idempotency.idempotent_begin(('old-' || i)::idempotency.key, ttl => '1 hour', external => true))
		  FROM generate_series(1, $n) AS i;
		SELECT count(idempotency.idempotent_begin(('live-' || i)::idempotency.key, ttl => '1 hour', external => true))
		  FROM generate_series(1, 5) AS i;
		UPDATE idempotency.registry SET expires_at = now() - interval '1 minute'
		 WHERE key::text LIKE 'old-%';
	});
}

# pass_in_progress(db): cleanup_status shows a pass that has deleted rows
# and not finished
sub pass_in_progress
{
	my ($db) = @_;
	return $node->poll_query_until('postgres', qq{
		SELECT last_deleted > 0 AND (last_end IS NULL OR last_end < last_start)
		  FROM idempotency.cleanup_status WHERE datname = '$db'});
}

# Three databases, visited in this order (of OID), each a pass of about ten seconds
# at 100 rows a second.
backlog('dropped', 1000);
backlog('renamed', 1000);
backlog('other', 300);
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.cleanup_interval = '1s'; SELECT pg_reload_conf()});

ok(pass_in_progress('dropped'), 'a long pass is under way in the first database');
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE dropped');
is($ret, 0, 'DROP DATABASE of a database in the middle of a pass succeeds') or diag($stderr);

ok(pass_in_progress('renamed'), 'the next database is cleaned');
($ret, $stdout, $stderr) = $node->psql('postgres', 'ALTER DATABASE renamed RENAME TO renamed_later');
is($ret, 0, 'ALTER DATABASE ... RENAME of a database in the middle of a pass succeeds') or diag($stderr);

ok($node->poll_query_until('renamed_later',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'old-%'}),
	'the renamed database is cleaned to the end');
ok($node->poll_query_until('other',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'old-%'}),
	'and so is the other one');
is($node->safe_psql('renamed_later', q{SELECT count(*) FROM idempotency.registry}), '5',
	'live records stay');
is($node->safe_psql('other', q{SELECT count(*) FROM idempotency.registry}), '5',
	'live records stay there too');

# The rate cap holds across the workers a pass takes.  Once a pass over a
# database with 300 expired records is under way, the interval goes up to an
# hour, so that this pass is the last one and its figures stay: 300 rows at
# 100 a second take two seconds at least (the first 100 go at once).
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.cleanup_interval = 0; SELECT pg_reload_conf()});
backlog('paced', 300);
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.cleanup_interval = '1s'; SELECT pg_reload_conf()});
ok(pass_in_progress('paced'), 'a pass is under way in a database with 300 expired records');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.cleanup_interval = '1h'; SELECT pg_reload_conf()});
ok($node->poll_query_until('postgres', q{
		SELECT last_end > last_start FROM idempotency.cleanup_status WHERE datname = 'paced'}),
	'the pass finishes');
is($node->safe_psql('postgres', q{
		SELECT last_deleted || ' ' || failures || ' ' || (last_end - last_start >= interval '2 seconds')
		  FROM idempotency.cleanup_status WHERE datname = 'paced'}),
	'300 0 true', 'in one pass of several workers, no faster than the rate cap');
is($node->safe_psql('paced', q{SELECT count(*) FROM idempotency.registry}), '5',
	'and only the expired records went');

# Without a rate cap, each worker deletes flat out for about a second and
# the next one follows at once: a worker is connected nearly all the time.
# DROP DATABASE waits for that one worker only.
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET idempotency.cleanup_interval = 0;
	ALTER SYSTEM SET idempotency.cleanup_max_rows_per_second = 0;
	ALTER SYSTEM SET idempotency.cleanup_batch_size = 1;
	SELECT pg_reload_conf();
});
backlog('busy', 20000);
backlog('after', 100);
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.cleanup_interval = '1s'; SELECT pg_reload_conf()});
ok($node->poll_query_until('postgres', q{
		SELECT count(*) > 0 FROM pg_stat_activity
		 WHERE backend_type = 'idempotency cleanup' AND datname = 'busy'}),
	'a worker is deleting in a database with a large backlog, without a rate cap');
($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE busy');
is($ret, 0, 'DROP DATABASE while a worker is connected succeeds') or diag($stderr);
ok($node->poll_query_until('after',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'old-%'}),
	'the cleanup goes on in the next database');
ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM idempotency.cleanup_status WHERE datname IN ('dropped', 'busy')}),
	'dropped databases leave cleanup_status');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'}),
	'1', 'the launcher carries on');

$node->stop;
done_testing();
