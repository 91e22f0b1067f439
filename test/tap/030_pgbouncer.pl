# A retry storm behind PgBouncer in transaction mode.  A duplicate of a claim
# whose transaction is still open waits for it while holding a server
# connection; without a bound, a storm of duplicates of one slow request
# parks every server connection of the pool until the first commits, and no
# other request gets through.  idempotency.max_wait bounds that wait when the
# caller passes no max_wait: each duplicate answers in_progress once the
# bound runs out and gives its connection back, so other keys keep
# executing, and after the first request commits the retries replay.
#
# Debian's pgbouncer package provides the pooler (test/lib.sh installs it);
# without it the test is skipped.

use strict;
use warnings FATAL => 'all';

use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my ($pgbouncer) = grep { -x $_ } map { File::Spec->catfile($_, 'pgbouncer') }
  (File::Spec->path, '/usr/sbin', '/usr/local/sbin');
plan skip_all => 'pgbouncer is not installed (Debian package "pgbouncer")'
  unless defined $pgbouncer;

my $pool_size = 4;
my $storm = 40;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
# the bound the duplicates get without passing max_wait, smaller than the
# shipped 5s so that a storm drains quickly through a pool of four
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
idempotency.max_wait = '250ms'
max_connections = 60
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

# PgBouncer listens on a socket of its own beside the node's; a node object
# that is never started gives the test's psql helpers its address
my $bouncer = PostgreSQL::Test::Cluster->new('bouncer');
my $dir = PostgreSQL::Test::Utils::tempdir;
my $user = $ENV{USER} // getpwuid($<);
PostgreSQL::Test::Utils::append_to_file("$dir/users.txt", qq{"$user" ""\n});
PostgreSQL::Test::Utils::append_to_file("$dir/pgbouncer.ini", sprintf(q{
[databases]
postgres = host=%s port=%d dbname=postgres

[pgbouncer]
listen_addr =
unix_socket_dir = %s
listen_port = %d
auth_type = trust
auth_file = %s/users.txt
pool_mode = transaction
default_pool_size = %d
max_client_conn = 200
logfile = %s/pgbouncer.log
pidfile = %s/pgbouncer.pid
ignore_startup_parameters = extra_float_digits
}, $node->host, $node->port, $bouncer->host, $bouncer->port, $dir, $pool_size, $dir, $dir));

my ($bout, $berr) = ('', '');
my $bouncer_run = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ],
	'>', \$bout, '2>', \$berr);

# the pooler and every client end with the test, even one that fails
my @clients;
END
{
	$_->{run}->kill_kill for grep { $_->{run}->pumpable } @clients;
	$bouncer_run->kill_kill if $bouncer_run && $bouncer_run->pumpable;
}
ok($bouncer->poll_query_until('postgres', 'SELECT true'), 'PgBouncer serves the node');

# through_bouncer(sql): start a psql client through PgBouncer; finish with
# collect()
sub through_bouncer
{
	my ($sql) = @_;
	my %c = (out => '', err => '');
	$c{run} = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-h', $bouncer->host, '-p', $bouncer->port,
			'-d', 'postgres', '-c', $sql
		],
		'>', \$c{out}, '2>', \$c{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	push @clients, \%c;
	return \%c;
}

# the answers of finished clients, counted: "answer x count, ..."
sub collect
{
	my %answers;
	for my $c (@_)
	{
		$c->{run}->finish;
		my $answer = $c->{out};
		chomp $answer;
		$answer = "error: $c->{err}" if $c->{run}->result != 0 || $answer eq '';
		$answers{$answer}++;
	}
	return join ', ', map { "$_ x $answers{$_}" } sort keys %answers;
}

my $dup_sql = q{SELECT outcome FROM idempotency.idempotent_begin('slow-1', request => '{"amount": 10}', external => true)};

# the slow request: its claim is open in a transaction that holds one of
# the pool's server connections
my $holder = $bouncer->background_psql('postgres');
is($holder->query_safe("BEGIN; $dup_sql;"), 'execute',
	'the first request claims its key through PgBouncer and keeps its transaction open');

# the retry storm: many more duplicates than the pool has connections
my @dups = map { through_bouncer($dup_sql) } 1 .. $storm;
ok( $node->poll_query_until('postgres', qq{
		SELECT begins_in_progress >= $pool_size FROM idempotency.stats}),
	'duplicates wait on the node for the first request, each until the bound runs out');

# another key gets a server connection while the first request is still open
my ($other, $other_err, $timed_out);
$bouncer->psql('postgres',
	q{SELECT outcome FROM idempotency.idempotent_begin('other-1', external => true)},
	stdout => \$other, stderr => \$other_err,
	timeout => $PostgreSQL::Test::Utils::timeout_default, timed_out => \$timed_out);
ok(!$timed_out, 'another key is not stuck behind the storm');
is($other, 'execute', 'another key executes through PgBouncer meanwhile');

is(collect(@dups), "in_progress x $storm",
	'every duplicate answers in_progress once the bound runs out');
is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_stat_activity
		 WHERE wait_event_type = 'Lock' AND query LIKE '%slow-1%'}),
	'0', 'and none is left waiting on the node');
is($holder->query_safe('SELECT 1'), '1', 'the first request\'s transaction is untouched');

# the first request finishes and commits: the retries replay its answer
$holder->query_safe(q{
	SELECT idempotency.idempotent_finish('slow-1', '{"charged": 10}');
	COMMIT;
});
@dups = map {
	through_bouncer(q{SELECT outcome || ' ' || response::text
						FROM idempotency.idempotent_begin('slow-1', request => '{"amount": 10}', external => true)})
} 1 .. $storm;
is(collect(@dups), "replay {\"charged\": 10} x $storm", 'after the first commits, the retries replay');
$holder->quit;

is( $node->safe_psql('postgres', q{
		SELECT string_agg(key::text || ' ' || status, ', ' ORDER BY key) FROM idempotency.registry}),
	'other-1 processing, slow-1 completed', 'one record per key');

$bouncer_run->kill_kill;

done_testing();
