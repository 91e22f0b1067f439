# The background cleanup: expired records disappear within a few intervals,
# live records and claims held by live transactions never do; databases
# created later are visited; DROP DATABASE, ALTER DATABASE RENAME and CREATE
# DATABASE ... TEMPLATE are not held up; SIGHUP changes the schedule; the
# launcher survives kill -9 and exits on SIGTERM; a shortage of worker slots
# is logged and the manual path keeps working.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = '1s'
idempotency.cleanup_batch_size = 100
restart_after_crash = on
});
$node->start;

ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'}),
	'the launcher shows in pg_stat_activity under its own backend_type');

# make_records(db, prefix, n, expired): n finished records, past or within their ttl
sub make_records
{
	my ($db, $prefix, $n, $expired) = @_;
	$node->safe_psql($db, qq{
		BEGIN;
		SELECT count(idempotency.idempotent_begin(('$prefix-' || i)::idempotency.key, ttl => '1 hour', external => true))
		  FROM generate_series(1, $n) AS i;
		SELECT count(idempotency.idempotent_finish(('$prefix-' || i)::idempotency.key, '{}'))
		  FROM generate_series(1, $n) AS i;
		COMMIT;
	});
	$node->safe_psql($db, qq{
		UPDATE idempotency.registry SET expires_at = now() - interval '1 minute', attempt = attempt - 60
		 WHERE key::text LIKE '$prefix-%';
	}) if $expired;
}

sub count_records
{
	my ($db, $prefix) = @_;
	return $node->safe_psql($db,
		"SELECT count(*) FROM idempotency.registry WHERE key::text LIKE '$prefix-%'");
}

$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');
make_records('postgres', 'live', 200, 0);

# A claim that a live transaction holds when it expires: it is finishing
# the claim (the row is locked) as the expiry passes.  The cleanup must pass
# over it, neither waiting for that transaction nor deleting under it.
$node->safe_psql('postgres',
	q{SELECT idempotency.idempotent_begin('held-1', ttl => '3 seconds', lease => '1 second', external => true)});
my $expiry = $node->safe_psql('postgres',
	q{SELECT expires_at FROM idempotency.registry WHERE key = 'held-1'});
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT idempotency.idempotent_finish('held-1', '{"late": true}',
	attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'held-1'))});

make_records('postgres', 'old', 350, 1);
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'old-%'}),
	'expired records disappear, over several batches of 100');
is(count_records('postgres', 'live'), '200', 'live records stay');

# wait for a whole pass that started after the held claim expired
ok($node->poll_query_until('postgres',
		qq{SELECT last_start > '$expiry'::timestamptz AND last_end > last_start
		     FROM idempotency.cleanup_status WHERE datname = 'postgres'}),
	'a cleanup pass ran after the held claim expired');
is(count_records('postgres', 'held'), '1', 'a claim held by a live transaction is passed over');
$holder->query_safe('COMMIT');
$holder->quit;
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'held-%'}),
	'once its transaction ends, the expired record goes too');

ok($node->poll_query_until('postgres',
		q{SELECT total_deleted >= 350 AND last_error IS NULL AND failures = 0
		    FROM idempotency.cleanup_status WHERE datname = 'postgres'}),
	'cleanup_status counts the deleted rows');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM idempotency.cleanup_status WHERE last_start IS NULL OR last_end < last_start}),
	'0', 'cleanup_status has start and end times of finished passes');

# A database created after start-up is visited too.
$node->safe_psql('postgres', 'CREATE DATABASE later');
$node->safe_psql('later', 'CREATE EXTENSION idempotency');
make_records('later', 'old', 120, 1);
make_records('later', 'live', 5, 0);
ok($node->poll_query_until('later',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'old-%'}),
	'a database created after start-up is cleaned');
is(count_records('later', 'live'), '5', 'its live records stay');

# Commands that need a database to themselves are not held up: the
# worker's visits are short and the commands' own wait absorbs them.
$node->safe_psql('postgres', q{SET statement_timeout = '30s'; CREATE DATABASE copied TEMPLATE later});
is($node->safe_psql('copied', q{SELECT count(*) FROM idempotency.registry}), '5',
	'CREATE DATABASE ... TEMPLATE of a cleaned database');
$node->safe_psql('postgres', q{SET statement_timeout = '30s'; ALTER DATABASE later RENAME TO renamed});
pass('ALTER DATABASE RENAME of a cleaned database');
$node->safe_psql('postgres', q{SET statement_timeout = '30s'; DROP DATABASE renamed});
$node->safe_psql('postgres', q{SET statement_timeout = '30s'; DROP DATABASE copied});
pass('DROP DATABASE of cleaned databases');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idempotency.cleanup_status WHERE datname IN ('renamed', 'copied', 'later')}),
	'dropped databases leave cleanup_status');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'}),
	'the launcher carries on after the drops');

# SIGHUP: the interval and the batch size change without a restart.
my $offset = -s $node->logfile;
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.cleanup_batch_size = 7; SELECT pg_reload_conf()});
ok($node->wait_for_log(qr/idempotency background cleanup runs every 1 s in batches of 7 records/, $offset),
	'a reload changes the batch size');
make_records('postgres', 'small', 20, 1);
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'small-%'}),
	'records are cleaned in the smaller batches');

$offset = -s $node->logfile;
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.cleanup_interval = 0; SELECT pg_reload_conf()});
ok($node->wait_for_log(qr/idempotency background cleanup is off/, $offset),
	'a reload turns the cleanup off');
make_records('postgres', 'kept', 10, 1);
# Showing that nothing happens needs time to pass: three of the old intervals,
# measured on the server's clock.
my $t0 = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
$node->poll_query_until('postgres', qq{SELECT clock_timestamp() > '$t0'::timestamptz + interval '3 seconds'});
is(count_records('postgres', 'kept'), '10', 'with the interval at 0 nothing is deleted');

$offset = -s $node->logfile;
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.cleanup_interval = '1s'; SELECT pg_reload_conf()});
ok($node->wait_for_log(qr/idempotency background cleanup runs every 1 s/, $offset),
	'a reload turns it on again');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'kept-%'}),
	'and the records expired meanwhile are cleaned');

# The cleanup role needs LOGIN and CONNECT on the database and nothing in
# it: the worker runs the cleanup's C code, whose deletes run as the
# registry's owner, so no grant per database.  A role that lacks either gets
# a failed pass, recorded with the role and the missing grant and retried
# with backoff; the grant mends the next try.
$node->safe_psql('postgres', q{
	CREATE ROLE regress_cleaner NOLOGIN;
	ALTER SYSTEM SET idempotency.cleanup_role = 'regress_cleaner';
	SELECT pg_reload_conf();
});
make_records('postgres', 'denied', 10, 1);
ok($node->poll_query_until('postgres',
		q{SELECT failures >= 1 AND next_run > last_end
		     AND last_error = 'role "regress_cleaner" named by "idempotency.cleanup_role" is not permitted to log in: it needs ALTER ROLE regress_cleaner LOGIN'
		    FROM idempotency.cleanup_status WHERE datname = 'postgres'}),
	'a role without LOGIN: the failed pass shows in cleanup_status with the missing ALTER ROLE and a later next run');
is(count_records('postgres', 'denied'), '10', 'nothing was deleted by the failed pass');
$node->safe_psql('postgres', q{
	ALTER ROLE regress_cleaner LOGIN;
	REVOKE CONNECT ON DATABASE postgres FROM PUBLIC;
});
ok($node->poll_query_until('postgres',
		q{SELECT last_error = 'role "regress_cleaner" named by "idempotency.cleanup_role" has no CONNECT privilege on database "postgres": it needs GRANT CONNECT ON DATABASE postgres TO regress_cleaner'
		    FROM idempotency.cleanup_status WHERE datname = 'postgres'}),
	'a role without CONNECT: cleanup_status names the missing GRANT CONNECT');
is(count_records('postgres', 'denied'), '10', 'still nothing deleted');
$node->safe_psql('postgres', 'GRANT CONNECT ON DATABASE postgres TO regress_cleaner');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'denied-%'}),
	'with LOGIN and CONNECT, the cleanup role cleans');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_proc p
	 WHERE p.pronamespace = 'idempotency'::regnamespace
	   AND has_function_privilege('regress_cleaner', p.oid, 'EXECUTE')
	   AND NOT has_function_privilege('public', p.oid, 'EXECUTE')}),
	'0', 'and it holds no privilege in the database beyond what PUBLIC has');
ok($node->poll_query_until('postgres',
		q{SELECT failures = 0 AND last_error IS NULL FROM idempotency.cleanup_status WHERE datname = 'postgres'}),
	'and the failure count is back to zero');
$node->safe_psql('postgres', q{
	GRANT CONNECT ON DATABASE postgres TO PUBLIC;
	REVOKE CONNECT ON DATABASE postgres FROM regress_cleaner;
	ALTER SYSTEM RESET idempotency.cleanup_role;
	SELECT pg_reload_conf();
});

# Dropping the extension: the workers find nothing to do there, and say nothing.
$node->safe_psql('postgres', 'CREATE DATABASE dropper');
$node->safe_psql('dropper', 'CREATE EXTENSION idempotency');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM idempotency.cleanup_status WHERE datname = 'dropper' AND last_end IS NOT NULL}),
	'a database with the extension is visited');
$offset = -s $node->logfile;
$node->safe_psql('dropper', 'DROP EXTENSION idempotency');
my $t1 = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
ok($node->poll_query_until('postgres',
		qq{SELECT last_end > '$t1' FROM idempotency.cleanup_status WHERE datname = 'postgres'}),
	'passes go on after DROP EXTENSION elsewhere');
ok(!$node->log_contains('ERROR|FATAL', $offset), 'and log no error');
$node->safe_psql('postgres', q{SET statement_timeout = '30s'; DROP DATABASE dropper});

# SIGTERM: the launcher exits promptly (the postmaster restarts it later).
my $launcher = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'});
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $launcher"),
	'the launcher exits on SIGTERM');

# kill -9: the postmaster restarts everything, the launcher included.
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'}),
	'the launcher is restarted after SIGTERM');
$launcher = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'});
kill 'KILL', $launcher;
ok($node->poll_query_until('postgres',
		qq{SELECT count(*) = 1 FROM pg_stat_activity
		    WHERE backend_type = 'idempotency launcher' AND pid <> $launcher}),
	'after kill -9 of the launcher, a new one runs');
make_records('postgres', 'after-crash', 30, 1);
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'after-crash-%'}),
	'and it carries on cleaning');

# No free worker slot: logged, and the manual path still works.
# one slot, taken by the launcher itself
$node->append_conf('postgresql.conf', "max_worker_processes = 1\nmax_logical_replication_workers = 0");
$offset = -s $node->logfile;
$node->restart;
make_records('postgres', 'manual', 40, 1);
ok($node->wait_for_log(qr/could not start an idempotency cleanup worker: no background worker slot is free/, $offset),
	'a shortage of worker slots is logged');
is($node->safe_psql('postgres', 'SELECT idempotency.cleanup(25)'), '25', 'cleanup() by hand deletes one batch');
is($node->safe_psql('postgres', 'SELECT idempotency.cleanup()'), '7', 'without an argument, a batch of idempotency.cleanup_batch_size');
is($node->safe_psql('postgres', 'SELECT idempotency.cleanup(100)'), '8', 'and the rest');
is(count_records('postgres', 'manual'), '0', 'nothing expired is left');

$node->stop;
done_testing();
