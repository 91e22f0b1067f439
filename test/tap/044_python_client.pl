# The Python client package (clients/python) against a real server, as its
# users run it: its own tests (python3 -m tests, from the source tree),
# through PgBouncer in transaction mode, on connections with psycopg's
# defaults.  The tests start Starlette, FastAPI and Django servers (uvicorn;
# Django's threaded WSGI server) and send them what unreliable clients send;
# each test is one line here.  Afterwards, from the database's side: no key
# was charged twice, every stored answer has its one charge, and no message
# had its effect twice.
#
# IDEMPOTENCY_EDITION picks the edition under test: c (the default) or
# portable (the script of make portable, in sql/built).  Skipped when
# PgBouncer or one of the Python packages that test/lib.sh's client_packages
# lists is missing, saying which.

use strict;
use warnings FATAL => 'all';

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = abs_path(dirname(__FILE__) . '/../..');
my $client = "$root/clients/python";
my $edition = $ENV{IDEMPOTENCY_EDITION} // 'c';
die "IDEMPOTENCY_EDITION is c or portable, not $edition" unless $edition =~ /^(c|portable)$/;
my $portable_script = "$root/sql/built/idempotency-portable--1.2.sql";
plan skip_all => "the portable edition is not built (make portable): $portable_script"
  if $edition eq 'portable' && !-r $portable_script;

my ($pgbouncer) = grep { -x $_ } map { File::Spec->catfile($_, 'pgbouncer') }
  (File::Spec->path, '/usr/sbin', '/usr/local/sbin');
plan skip_all => 'pgbouncer is not installed (Debian package "pgbouncer")'
  unless defined $pgbouncer;

# Debian's python3, which has Debian's packages (another python3 on the PATH
# may not)
my $python = (grep { -x $_ } '/usr/bin/python3')[0] // 'python3';
my %modules = (
	psycopg => 'python3-psycopg',
	httpx => 'python3-httpx',
	starlette => 'python3-starlette',
	fastapi => 'python3-fastapi',
	uvicorn => 'python3-uvicorn',
	django => 'python3-django',
	psycopg2 => 'python3-psycopg2 (Django\'s PostgreSQL driver up to Django 4.1)');
my @missing = grep {
	my ($o, $e);
	!eval { IPC::Run::run([ $python, '-c', "import $_" ], '>', \$o, '2>', \$e) }
} sort keys %modules;
plan skip_all => 'missing Python packages: ' . join(', ', map { $modules{$_} } @missing)
  . ' (test/lib.sh client_packages)' if @missing;

my $node = PostgreSQL::Test::Cluster->new('python');
$node->init;
$node->append_conf('postgresql.conf', qq{
idempotency.cleanup_interval = 0
max_connections = 100
});
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'")
  if $edition eq 'c';
$node->start;
if ($edition eq 'c')
{
	$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');
}
else
{
	$node->command_ok([ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '--single-transaction',
			'-d', $node->connstr('postgres'), '-f', $portable_script ],
		'the portable edition installs');
}
$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	SELECT idempotency.grant_usage('app');
	GRANT CREATE ON SCHEMA public TO app;
});

# PgBouncer in transaction mode on a socket of its own: a pool larger than
# the tests' concurrent transactions (eight duplicates of a held request
# and the test's hold), so that a wait is for the database, not the pool.
# 1.21 and later keep protocol-level prepared statements apart when
# max_prepared_statements is set; turned off here, as Debian 12's 1.18
# cannot, so that a client that prepares fails as it would there.
my $bouncer = PostgreSQL::Test::Cluster->new('bouncer');
my $dir = PostgreSQL::Test::Utils::tempdir;
my ($version_out, $version_err) = ('', '');
IPC::Run::run([ $pgbouncer, '--version' ], '>', \$version_out, '2>', \$version_err);
my ($major, $minor) = "$version_out$version_err" =~ /PgBouncer (\d+)\.(\d+)/;
my $prepared = defined $minor && ($major > 1 || $minor >= 21) ? "max_prepared_statements = 0\n" : '';
my $user = $ENV{USER} // getpwuid($<);
PostgreSQL::Test::Utils::append_to_file("$dir/users.txt", qq{"app" ""\n"$user" ""\n});
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
default_pool_size = 30
max_client_conn = 200
logfile = %s/pgbouncer.log
pidfile = %s/pgbouncer.pid
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
%s}, $node->host, $node->port, $bouncer->host, $bouncer->port, $dir, $dir, $dir, $prepared));
# its output to a file: a pipe that nobody reads while the tests run would
# fill up and stop PgBouncer at its next log line
my $bouncer_run = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ],
	'>', "$dir/pgbouncer.out", '2>&1');
END { $bouncer_run->kill_kill if $bouncer_run && $bouncer_run->pumpable; }
ok($bouncer->poll_query_until('postgres', 'SELECT true'), 'PgBouncer serves the node');

my %env = (
	PGHOST => $bouncer->host, PGPORT => $bouncer->port, PGUSER => 'app', PGDATABASE => 'postgres',
	PYTHONPATH => $client, PYTHONDONTWRITEBYTECODE => 1, IDEMPOTENCY_EDITION => $edition,
	IDEMPOTENCY_TEST_DEADLINE => $PostgreSQL::Test::Utils::timeout_default);

# what the package avoids: psycopg's defaults prepare from a statement's
# fifth execution, and behind this PgBouncer two connections then meet each
# other's statements on the server connection they share
{
	local %ENV = (%ENV, %env);
	my ($out, $err) = ('', '');
	IPC::Run::run([ $python, '-c', q{
import psycopg
a, b = psycopg.connect(autocommit=True), psycopg.connect(autocommit=True)
for i in range(12):
    for c in (a, b):
        c.execute("SELECT %s::int", (i,))
} ], '>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	like("$out$err", qr/prepared statement "\w+" (already exists|does not exist)/,
		'behind this PgBouncer, statements that psycopg prepares fail');
}

# the package's tests, one line each
my ($out, $err) = ('', '');
my $ran;
{
	local %ENV = (%ENV, %env);
	# (a run past the time-out dies: its lines so far are still reported)
	$ran = eval {
		IPC::Run::run([ $python, '-m', 'tests' ], '>', \$out, '2>', \$err,
			init => sub { chdir $client },
			IPC::Run::timeout(2 * $PostgreSQL::Test::Utils::timeout_default));
	};
	$err .= $@ if $@;
}
my ($passed, $skipped) = (0, 0);
my @lines = split /\n/, $out;
while (defined(my $line = shift @lines))
{
	if ($line =~ /^(ok|not ok|skip) - (.*)$/)
	{
		my ($status, $name) = ($1, $2);
		my @detail;
		push @detail, substr(shift @lines, 2) while @lines && $lines[0] =~ /^# /;
		if ($status eq 'skip')
		{
			$skipped++;
			note "skipped $name: @detail";
			next;
		}
		$passed++ if $status eq 'ok';
		ok($status eq 'ok', $name) or diag(join "\n", @detail);
	}
	else
	{
		diag($line);
	}
}
ok($ran, 'the package\'s tests exit with 0') or diag($err);
# every test ran on the C edition; the portable edition skips those whose
# functions it does not have yet, saying so
cmp_ok($edition eq 'c' ? $passed : $passed + $skipped, '>=', 40,
	"the package's tests ran ($passed passed, $skipped skipped)");
note "test output on stderr:\n$err" if $err ne '';

# the database's view of what the clients did: as many charges of a key as
# it has stored answers (one per scope: a test uses a key on two routes),
# and no charge without its stored answer
is($node->safe_psql('postgres', q{
	SELECT count(*)
	  FROM (SELECT key::text AS key, count(*) AS answers FROM idempotency.registry
	         WHERE scope LIKE 'POST %' AND status = 'completed' GROUP BY 1) AS r
	  FULL JOIN (SELECT idempotency_key AS key, count(*) AS charges FROM py_charges GROUP BY 1) AS c
	    USING (key)
	 WHERE r.answers IS DISTINCT FROM c.charges}),
	'0', 'every key was charged once per stored answer, and never without one');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT message_id FROM py_effects GROUP BY 1 HAVING count(*) > 1) AS d}),
	'0', 'no message had its effect twice');

$bouncer_run->kill_kill;
done_testing();
