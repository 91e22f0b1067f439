# The Node.js package (clients/node) as its users run it: its dependencies
# installed with npm ci from the committed lock file (Express and Fastify
# from npm), and its own tests (node --test) run against a real server
# through PgBouncer in transaction mode, with node-postgres's defaults.
# The tests start no database themselves; this test gives them one, with
# the extension, an application role and test/schema.sql's tables.  They
# drive the middleware on both frameworks with concurrent duplicates,
# clients that give up, and a worker killed mid-request; external work in
# steps with a take-over and fencing; the inbox consumer; and the outbox
# relay, as a library and as a command.  Afterwards the database has one
# effect per key, and one charge for every stored answer.
#
# Nothing depends on timing: "in flight" is a charge held by a trigger on
# an advisory lock that a test holds and releases (test/schema.sql).
#
# IDEMPOTENCY_EDITION=portable runs the same tests against the portable
# edition (make portable) instead of the C extension.  Skipped when node
# 20 or later, npm or pgbouncer is missing, or npm cannot install the
# dependencies.

use strict;
use warnings FATAL => 'all';

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $top = abs_path(dirname(__FILE__) . '/../..');
my $source = "$top/clients/node";
my $edition = $ENV{IDEMPOTENCY_EDITION} // 'c';
die "IDEMPOTENCY_EDITION is c or portable, not $edition"
  unless $edition eq 'c' || $edition eq 'portable';

# (IPC::Run dies, rather than fails, on a command that is not installed)
my ($node_version, $npm_version) = ('', '');
eval { IPC::Run::run([ 'node', '--version' ], '>', \$node_version, '2>', \my $e1) }
  or plan skip_all => 'node is not installed (test/lib.sh installs nodejs)';
eval { IPC::Run::run([ 'npm', '--version' ], '>', \$npm_version, '2>', \my $e2) }
  or plan skip_all => 'npm is not installed (test/lib.sh installs npm)';
# Fastify 5, which the tests run on, needs node 20
plan skip_all => "node 20 or later is needed, this is $node_version"
  unless $node_version =~ /^v(\d+)/ && $1 >= 20;
my ($pgbouncer) = grep { -x $_ } map { File::Spec->catfile($_, 'pgbouncer') }
  (File::Spec->path, '/usr/sbin', '/usr/local/sbin');
plan skip_all => 'pgbouncer is not installed (Debian package "pgbouncer")'
  unless defined $pgbouncer;

# the package in a directory of its own, its packages from the lock file:
# from npm's cache if they are there, else from the registry; a checkout
# whose node_modules are already installed serves offline
my $dir = PostgreSQL::Test::Utils::tempdir;
system('cp', '-r', "$source/.", $dir) == 0 or die "could not copy $source";
system('rm', '-rf', "$dir/node_modules");
my $npm_log;
if (!IPC::Run::run([ 'npm', 'ci', '--prefer-offline', '--no-audit', '--no-fund' ],
		'>', \$npm_log, '2>&1', init => sub { chdir $dir }))
{
	plan skip_all => "npm ci failed and no node_modules are installed: $npm_log"
	  unless -d "$source/node_modules";
	system('cp', '-r', "$source/node_modules", $dir) == 0
	  or die "could not copy $source/node_modules";
	note "npm ci failed, using the installed node_modules: $npm_log";
}

my $node = PostgreSQL::Test::Cluster->new('node_client');
$node->init;
$node->append_conf('postgresql.conf', "max_connections = 80\n");
# the portable edition runs where the library is never loaded
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'\n")
  if $edition eq 'c';
$node->start;
$node->safe_psql('postgres', q{
	CREATE ROLE owner LOGIN;
	CREATE ROLE app LOGIN;
	CREATE DATABASE app OWNER owner;
});
if ($edition eq 'c')
{
	$node->safe_psql('app', 'CREATE EXTENSION idempotency');
}
else
{
	# make portable: the script's path is the last line; the database's
	# owner runs it (doc/portable.md)
	my ($out, $err);
	IPC::Run::run([ 'make', '-s', '--no-print-directory', '-C', $top, 'portable' ],
		'>', \$out, '2>', \$err)
	  or BAIL_OUT("make portable failed: $err");
	my ($script) = $out =~ /([^\n]+)\n?\z/;
	my ($rc, $o, $e) = $node->psql('app', undef,
		extra_params => [ '-U', 'owner', '-v', 'ON_ERROR_STOP=1', '--single-transaction', '-f', $script ]);
	is($rc, 0, 'the portable edition is installed by the database owner') or BAIL_OUT($e);
}
my ($rc, $o, $e) = $node->psql('app', undef,
	extra_params => [ '-v', 'ON_ERROR_STOP=1', '-v', 'role=app', '-f', "$dir/test/schema.sql" ]);
is($rc, 0, "the tests' schema is made (test/schema.sql)") or BAIL_OUT($e);

# PgBouncer in transaction mode in front of the node, on a socket of its own
my $bouncer = PostgreSQL::Test::Cluster->new('bouncer');
my $bdir = PostgreSQL::Test::Utils::tempdir;
PostgreSQL::Test::Utils::append_to_file("$bdir/users.txt", qq{"app" ""\n});
PostgreSQL::Test::Utils::append_to_file("$bdir/pgbouncer.ini", sprintf(q{
[databases]
app = host=%s port=%d dbname=app

[pgbouncer]
listen_addr =
unix_socket_dir = %s
listen_port = %d
auth_type = trust
auth_file = %s/users.txt
pool_mode = transaction
default_pool_size = 20
max_client_conn = 300
logfile = %s/pgbouncer.log
pidfile = %s/pgbouncer.pid
ignore_startup_parameters = extra_float_digits
}, $node->host, $node->port, $bouncer->host, $bouncer->port, $bdir, $bdir, $bdir));
my ($bout, $berr) = ('', '');
my $bouncer_run = IPC::Run::start([ $pgbouncer, "$bdir/pgbouncer.ini" ], '>', \$bout, '2>', \$berr);
END
{
	$bouncer_run->kill_kill if $bouncer_run && $bouncer_run->pumpable;
}
{
	# PgBouncer knows only the application role (users.txt)
	local $ENV{PGUSER} = 'app';
	ok($bouncer->poll_query_until('app', 'SELECT true', 't'), 'PgBouncer serves the node');
}

# the package's tests, as its README runs them, through PgBouncer as the
# application role
my ($tout, $terr) = ('', '');
my $tests_ok;
{
	local %ENV = (%ENV, PGHOST => $bouncer->host, PGPORT => $bouncer->port,
		PGUSER => 'app', PGDATABASE => 'app', IDEMPOTENCY_EDITION => $edition);
	delete $ENV{$_} for qw(PGSERVICE PGOPTIONS PGPASSWORD);
	# a run that does not end in time is a failure, reported with what it
	# printed, not the end of this test
	$tests_ok = eval {
		IPC::Run::run(
			[ 'bash', '-c', 'exec node --test --test-reporter=tap --test-concurrency=1 --test-timeout=180000 test/*.test.js' ],
			'>', \$tout, '2>', \$terr, init => sub { chdir $dir },
			IPC::Run::timeout(2 * $PostgreSQL::Test::Utils::timeout_default));
	};
	$terr .= "\n$@" if $@;
}

# one check here for each test there ("suite: test"), with its failure
my @lines = split /\n/, $tout;
my ($suite, $count) = ('', 0);
for (my $i = 0; $i < @lines; $i++)
{
	if ($lines[$i] =~ /^# Subtest: (.*)$/)
	{
		$suite = $1;
	}
	elsif ($lines[$i] =~ /^    (not )?ok \d+ - (.*)$/)
	{
		my ($failed, $name) = ($1, $2);
		my $detail = '';
		$detail .= "$lines[$i]\n" while ++$i < @lines && $lines[$i] =~ /^      /;
		$i--;
		ok(!$failed, "$suite: $name") or diag($detail);
		$count++;
	}
	elsif ($lines[$i] =~ /^not ok \d+ - (.*)$/)
	{
		# a test file that failed outside its tests (it did not load)
		fail("node --test: $1");
	}
}
ok($count >= 20, "node --test ran the package's tests ($count)") or diag("$tout\n$terr");
like($tout, qr/^# fail 0$/m, 'none of them failed');
ok($tests_ok, 'node --test exits with 0') or diag($terr);

# the database's view: one charge per key and scope (a request without a
# key has none), none for an answer that was not stored, and one stored
# 201 for every key charged (its status code, or the one-statement
# mode's answer)
is($node->safe_psql('app', q{
	SELECT count(*) FROM (SELECT 1 FROM charges WHERE idempotency_key <> 'none'
						   GROUP BY idempotency_key, scope HAVING count(*) > 1) AS d}),
	'0', 'no key was charged twice');
is($node->safe_psql('app', q{SELECT count(*) FROM charges WHERE amount = 500 OR fail_with IS NOT NULL}),
	'0', 'nothing of an answer that was not stored was kept');
is($node->safe_psql('app', q{
	SELECT count(*) FROM charges AS c
	 WHERE c.idempotency_key <> 'none' AND NOT EXISTS (
		SELECT FROM idempotency.registry AS r
		 WHERE r.key = c.idempotency_key AND r.scope = c.scope
		   AND r.status = 'completed'
		   -- the one-statement mode stores its answer as the response
		   AND (r.status_code = 201 OR (r.status_code IS NULL AND (r.response->>'status')::int = 201)))}),
	'0', 'every charge has its stored 201');
ok($node->safe_psql('app', q{SELECT count(*) FROM charges WHERE idempotency_key <> 'none'}) >= 30,
	'and there are charges to count');
is($node->safe_psql('app', q{SELECT count(*) FROM (SELECT 1 FROM invoices GROUP BY message_id HAVING count(*) > 1) AS d}),
	'0', 'no message was applied twice');

$bouncer_run->kill_kill;
$node->stop;

done_testing();
