# The reference HTTP service (examples/http-service) against a real server:
# its dependencies installed with npm ci from the committed lock file, the
# service started on a loopback port, and test/drive.js sending it what
# unreliable clients send: no key, a key reused for another request,
# duplicates while the first request is in flight, clients that give up,
# and a storm of concurrent duplicates with retries.  Afterwards no key was
# charged twice, and every replay was byte for byte the first answer.
#
# Nothing depends on timing: "in flight" is a request held on an advisory
# lock that the driver takes and releases (a trigger on the charges table
# waits for it), and 57014 is raised by the same trigger.  Skipped when node
# or npm is not installed, or npm cannot install the dependencies.

use strict;
use warnings FATAL => 'all';

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $source = abs_path(dirname(__FILE__) . '/../../examples/http-service');

# node 18 or later (for fetch), and npm
my ($node_version, $npm_version) = ('', '');
# (IPC::Run dies, rather than fails, on a command that is not installed)
eval { IPC::Run::run([ 'node', '--version' ], '>', \$node_version, '2>', \my $e1) }
  or plan skip_all => 'node is not installed (test/lib.sh installs nodejs)';
eval { IPC::Run::run([ 'npm', '--version' ], '>', \$npm_version, '2>', \my $e2) }
  or plan skip_all => 'npm is not installed (test/lib.sh installs npm)';
plan skip_all => "node 18 or later is needed, this is $node_version"
  unless $node_version =~ /^v(\d+)/ && $1 >= 18;

# the service in a directory of its own, its packages from the lock file:
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

my $node = PostgreSQL::Test::Cluster->new('http');
$node->init;
$node->start;

my $admin = $node->safe_psql('postgres', 'SELECT current_user');
$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	CREATE ROLE app LOGIN;
});
$node->command_ok([ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-v', 'role=app',
		'-d', $node->connstr('postgres'), '-f', "$dir/schema.sql" ],
	'schema.sql sets up the charges table and the role');

# what the driver controls: a request that reaches the charges table waits
# for advisory lock 4242 while the driver holds it, and an amount of 57014
# is a canceled statement
$node->safe_psql('postgres', q{
	CREATE FUNCTION charges_hold() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM pg_advisory_xact_lock_shared(4242);
		IF NEW.amount = 57014 THEN
			RAISE EXCEPTION 'canceling statement due to statement timeout'
				USING ERRCODE = 'query_canceled';
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER charges_hold BEFORE INSERT ON charges
		FOR EACH ROW EXECUTE FUNCTION charges_hold();
});

my $port = PostgreSQL::Test::Cluster::get_free_port();
my ($out, $err) = ('', '');
my $service;
{
	local %ENV = (%ENV, PGHOST => $node->host, PGPORT => $node->port,
		PGDATABASE => 'postgres', PGUSER => 'app', HOST => '127.0.0.1', PORT => $port);
	$service = IPC::Run::start([ 'node', "$dir/server.js" ], '>', \$out, '2>', \$err);
}
my $timer = IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default);
$timer->start;
$service->pump until $out =~ /listening on/ || $timer->is_expired || !$service->pumpable;
like($out, qr/listening on 127\.0\.0\.1:$port/, 'the service listens on a loopback port')
  or BAIL_OUT("the service did not start: $err");

my ($dout, $derr) = ('', '');
{
	local %ENV = (%ENV, PGHOST => $node->host, PGPORT => $node->port,
		PGDATABASE => 'postgres', PGUSER => $admin);
	IPC::Run::run([ 'node', "$dir/test/drive.js", "http://127.0.0.1:$port" ],
		'>', \$dout, '2>', \$derr,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
}
my $keys;
my @lines = split /\n/, $dout;
while (defined(my $line = shift @lines))
{
	if ($line =~ /^(not )?ok - (.*)$/)
	{
		my ($failed, $name) = ($1, $2);
		my $detail = @lines && $lines[0] =~ /^# / ? shift @lines : '';
		ok(!$failed, $name) or diag($detail);
	}
	elsif ($line =~ /^keys (\d+)$/)
	{
		$keys = $1;
	}
	else
	{
		diag($line);
	}
}
ok(defined $keys, 'the driver ran to its end') or diag($derr);

$service->kill_kill;
is($err, '', 'the service logged no error');

# the database's view: one charge per key, and one completed record each
is($node->safe_psql('postgres',
		'SELECT count(*) FROM (SELECT idempotency_key FROM charges GROUP BY 1 HAVING count(*) > 1) AS d'),
	'0', 'no key was charged twice');
is($node->safe_psql('postgres', 'SELECT count(DISTINCT idempotency_key) FROM charges'),
	$keys // -1, 'every key the driver charged has its charge');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM idempotency.registry WHERE scope = 'http' AND status = 'completed' AND status_code = 201}),
	$keys // -1, 'and one completed record with its 201');

done_testing();
