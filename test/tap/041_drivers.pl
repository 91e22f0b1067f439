# The drivers of doc/drivers.md, each running its example
# (examples/drivers) directly and through PgBouncer in transaction mode:
# a key claimed and finished with an HTTP answer in one transaction, the
# answer replayed byte for byte on a second connection, and the key's reuse
# for another request refused with IK001, read from the driver's error.
#
# PgBouncer runs with one server connection, so the examples' two client
# connections share it: a driver that prepares named statements there
# (psycopg, asyncpg and pgJDBC do by default) meets its other connection's
# statements, which is why doc/drivers.md gives each its setting; this test shows
# the defaults failing too.  A driver that cannot be found is skipped,
# saying why (test/run_all.sh installs them all).

use strict;
use warnings FATAL => 'all';

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $examples = abs_path(dirname(__FILE__) . '/../../examples');
my $tmp = PostgreSQL::Test::Utils::tempdir;

my $node = PostgreSQL::Test::Cluster->new('drivers');
$node->init;
$node->append_conf('postgresql.conf', "listen_addresses = '127.0.0.1'");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	CREATE ROLE app LOGIN;
	SELECT idempotency.grant_usage('app');
});

# runs(COMMAND...): whether a command runs and exits 0
sub runs
{
	my ($out, $err);
	return eval { IPC::Run::run([@_], '>', \$out, '2>', \$err) } ? 1 : 0;
}

# PgBouncer, transaction mode, one server connection
my $bouncer_bin = (grep { -x $_ } '/usr/sbin/pgbouncer', '/usr/bin/pgbouncer')[0];
my ($bouncer, $bouncer_port);
if ($bouncer_bin)
{
	$bouncer_port = PostgreSQL::Test::Cluster::get_free_port();
	my $port = $node->port;

	# PgBouncer 1.21 and later can keep protocol-level prepared statements
	# apart in transaction mode (max_prepared_statements); the defaults
	# tested here are those of a pooler that does not, so turn it off there
	my ($version_out, $version_err) = ('', '');
	IPC::Run::run([ $bouncer_bin, '--version' ], '>', \$version_out, '2>', \$version_err);
	my ($major, $minor) = "$version_out$version_err" =~ /PgBouncer (\d+)\.(\d+)/;
	my $prepared = defined $minor && ($major > 1 || $minor >= 21)
	  ? "max_prepared_statements = 0\n" : '';
	PostgreSQL::Test::Utils::append_to_file("$tmp/users.txt", qq{"app" ""\n});
	PostgreSQL::Test::Utils::append_to_file("$tmp/pgbouncer.ini", qq{
[databases]
postgres = host=127.0.0.1 port=$port dbname=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = trust
auth_file = $tmp/users.txt
pool_mode = transaction
default_pool_size = 1
max_client_conn = 20
ignore_startup_parameters = extra_float_digits
logfile = $tmp/pgbouncer.log
$prepared});
	$bouncer = IPC::Run::start([ $bouncer_bin, "$tmp/pgbouncer.ini" ],
		'>', \my $bout, '2>', \my $berr);
	my $ready = 0;
	foreach (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		last if $ready = runs('psql', '-X', '-h', '127.0.0.1', '-p', $bouncer_port,
			'-U', 'app', '-d', 'postgres', '-c', 'SELECT 1');
		select(undef, undef, undef, 0.1);
	}
	ok($ready, 'PgBouncer accepts connections') or diag(slurp_file("$tmp/pgbouncer.log"));
}
else
{
	note 'PgBouncer is not installed: the examples run directly only';
}

# where each example connects: directly, and through PgBouncer; how many
# tests a driver has (its example on each, its defaults behind PgBouncer)
my @targets = ([ direct => $node->port ]);
push @targets, [ pgbouncer => $bouncer_port ] if $bouncer;
my $per_driver = $bouncer ? 3 : 1;

# example(NAME, PORT_TO_COMMAND): run one driver's example against each target
sub example
{
	my ($name, $command) = @_;
	foreach my $target (@targets)
	{
		my ($where, $port) = @$target;
		my ($out, $err) = ('', '');
		local %ENV = (%ENV, PGHOST => '127.0.0.1', PGPORT => $port,
			PGUSER => 'app', PGDATABASE => 'postgres');
		my $ok = IPC::Run::run($command->($port, "$name-$where"), '>', \$out, '2>', \$err,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
		ok($ok && $out =~ /8 keys executed/, "$name, $where: executed, replayed, IK001")
		  or diag("stdout: $out\nstderr: $err");
	}
}

# fails_behind_bouncer(NAME, COMMAND): a driver's default settings fail
# behind PgBouncer in transaction mode with a prepared statement's error.
# The command runs twice: asyncpg names its statements uniquely within a
# process, so it is the second process that meets the first one's
# statements on the shared server connection.
sub fails_behind_bouncer
{
	my ($name, $command) = @_;
	my ($out, $err) = ('', '');
	local %ENV = (%ENV, PGHOST => '127.0.0.1', PGPORT => $bouncer_port,
		PGUSER => 'app', PGDATABASE => 'postgres');
	foreach (1 .. 2)
	{
		last unless IPC::Run::run($command, '>', \$out, '2>', \$err,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
		($out, $err) = ('', '');
	}
	like("$out$err", qr/prepared statement "\w+" (already exists|does not exist)/,
		"$name with its default settings fails behind PgBouncer");
}

# Python: Debian's python3 has Debian's drivers
my ($python) = grep { runs($_, '-c', 'import sys') } '/usr/bin/python3', 'python3';
SKIP:
{
	skip 'psycopg is not installed (Debian: python3-psycopg)', $per_driver
	  unless $python && runs($python, '-c', 'import psycopg');
	example('psycopg', sub { [ $python, "$examples/drivers/psycopg_example.py", $_[1] ] });
	fails_behind_bouncer('psycopg', [ $python, '-c', q{
import psycopg
a, b = psycopg.connect(autocommit=True), psycopg.connect(autocommit=True)
for i in range(12):
    for c in (a, b):
        c.execute("SELECT %s::int", (i,))
} ]) if $bouncer;
}
SKIP:
{
	skip 'asyncpg is not installed (Debian: python3-asyncpg)', $per_driver
	  unless $python && runs($python, '-c', 'import asyncpg');
	example('asyncpg', sub { [ $python, "$examples/drivers/asyncpg_example.py", $_[1] ] });
	fails_behind_bouncer('asyncpg', [ $python, '-c', q{
import asyncio, asyncpg
async def main():
    a, b = await asyncpg.connect(), await asyncpg.connect()
    for i in range(12):
        for c in (a, b):
            await c.fetchval("SELECT $1::int", i)
asyncio.run(main())
} ]) if $bouncer;
}

# node-postgres, from the HTTP service's lock file
SKIP:
{
	skip 'node and npm are not installed', scalar @targets
	  unless runs('node', '--version') && runs('npm', '--version');
	system('cp', '-r', "$examples/http-service", "$tmp/npm") == 0 or die;
	system('rm', '-rf', "$tmp/npm/node_modules");
	my $npm_log;
	if (!IPC::Run::run([ 'npm', 'ci', '--prefer-offline', '--no-audit', '--no-fund' ],
			'>', \$npm_log, '2>&1', init => sub { chdir "$tmp/npm" }))
	{
		skip "npm ci failed: $npm_log", scalar @targets unless -d "$examples/http-service/node_modules";
		system('cp', '-r', "$examples/http-service/node_modules", "$tmp/npm") == 0 or die;
	}
	local $ENV{NODE_PATH} = "$tmp/npm/node_modules";
	example('node-postgres', sub { [ 'node', "$examples/drivers/node_postgres_example.js", $_[1] ] });
}

# pgJDBC: run from source by java (a JDK), with Debian's driver
my $jar = '/usr/share/java/postgresql.jar';
SKIP:
{
	skip 'pgJDBC or a JDK is not installed (Debian: libpostgresql-jdbc-java, default-jdk-headless)', $per_driver
	  unless -r $jar && runs('javac', '-version');
	my $jdbc = sub {
		my ($port, $prefix, $settings) = @_;
		[ 'java', '-cp', $jar, "$examples/drivers/IdempotencyExample.java",
		  "jdbc:postgresql://127.0.0.1:$port/postgres?user=app" . ($settings // '&prepareThreshold=0'),
		  $prefix ];
	};
	example('pgJDBC', $jdbc);
	fails_behind_bouncer('pgJDBC', $jdbc->($bouncer_port, 'pgJDBC-default', '')) if $bouncer;
}

$bouncer->kill_kill if $bouncer;

# every example's keys: one completed record each, with its headers
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE status = 'completed' AND headers ? 'Location') = count(*)
	  FROM idempotency.registry WHERE scope = 'drivers'}), 't',
	'every record the examples stored is complete, with its headers');

done_testing();
