# The reference HTTP service (examples/http-service) against a real server,
# set up, started and driven by the commands of its README as they are
# written (on this server, and on a free port instead of 3000): its
# dependencies installed with npm ci from the committed lock file, the
# database, role and table made, the service started on a loopback port,
# the README's two curls answered alike, and test/drive.js sending it what
# unreliable clients send: no key, a key reused for another request,
# duplicates while the first request is in flight, clients that give up,
# and a storm of concurrent duplicates with retries.  Afterwards no key was
# charged twice, and every replay was byte for byte the first answer, its
# header lines in the same order.
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

# The README's shell blocks, in order: the set-up (after npm ci, done
# above), the service's start, the two curls, and the driver's run.  A
# command continued with a backslash is one command.
my $readme = do { local (@ARGV, $/) = "$source/README.md"; <> };
my @sh = map { s/\\\n\s*/ /gr } $readme =~ /^```sh\n(.*?)^```$/msg;
is(scalar @sh, 4, 'the README shows four shell blocks');
my ($setup, $start, $curls, $drive) = @sh;
like($setup, qr/^npm ci$/m, 'the README installs the dependencies with npm ci');

my $node = PostgreSQL::Test::Cluster->new('http');
$node->init;
$node->start;

# the README's commands as the administrator, on this server (PGHOST and
# PGPORT, as the README says)
my $admin = $node->safe_psql('postgres', 'SELECT current_user');
my %server = (PGHOST => $node->host, PGPORT => $node->port, PGUSER => $admin);
sub readme_commands
{
	my ($block, $what) = @_;
	foreach my $command (grep { /\S/ && !/^npm ci$/ } split /\n/, $block)
	{
		local %ENV = (%ENV, %server);
		my ($o, $e) = ('', '');
		my $ok = IPC::Run::run([ 'bash', '-c', $command ], '>', \$o, '2>', \$e,
			init => sub { chdir $dir });
		ok($ok, "$what: $command") or diag("$o$e");
	}
}
readme_commands($setup, 'the README sets up the database');

# the database the README made
my ($db) = $setup =~ /^createdb (\S+)$/m;
ok(defined $db, 'the README makes a database') or BAIL_OUT('no createdb in the README');

# what the driver controls (test/hold.sql), as the README's last block adds it
my ($hold) = grep { /hold\.sql/ } split /\n/, $drive;
ok(defined $hold, 'the README adds test/hold.sql before it drives the service');
readme_commands($hold // '', 'the README adds the test trigger');

# the service, started as the README starts it, on a free port
my $port = PostgreSQL::Test::Cluster::get_free_port();
my ($out, $err) = ('', '');
my $service;
like($start, qr/^PGUSER=app \S.* node server\.js$/m, 'the README starts the service as app');
(my $start_here = $start) =~ s/\bPORT=3000\b/PORT=$port/;
{
	local %ENV = (%ENV, PGHOST => $node->host, PGPORT => $node->port, HOST => '127.0.0.1');
	$service = IPC::Run::start([ 'bash', '-c', "exec env $start_here" ], '>', \$out, '2>', \$err,
		init => sub { chdir $dir });
}
my $timer = IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default);
$timer->start;
$service->pump until $out =~ /listening on/ || $timer->is_expired || !$service->pumpable;
like($out, qr/listening on 127\.0\.0\.1:$port/, 'the service listens on a loopback port')
  or BAIL_OUT("the service did not start: $err");

# the driver, run as the README runs it, against this service
my ($drive_command) = grep { /node test\/drive\.js/ } split /\n/, $drive;
ok(defined $drive_command, 'the README runs test/drive.js');
$drive_command //= '';
$drive_command =~ s{http://127\.0\.0\.1:3000}{http://127.0.0.1:$port};
my ($dout, $derr) = ('', '');
my $drive_ok;
{
	local %ENV = (%ENV, %server);
	$drive_ok = IPC::Run::run([ 'bash', '-c', "exec env $drive_command" ],
		'>', \$dout, '2>', \$derr, init => sub { chdir $dir },
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
ok($drive_ok, 'the driver exits with 0') or diag($derr);

# the README's curls: the second answer is the first, replayed
(my $curls_here = $curls) =~ s{http://127\.0\.0\.1:3000}{http://127.0.0.1:$port}g;
my @answers;
foreach my $curl (grep { /\S/ } split /\n/, $curls_here)
{
	my ($o, $e) = ('', '');
	IPC::Run::run([ 'bash', '-c', "$curl -sS" ], '>', \$o, '2>', \$e);
	$o =~ s/^(Date|Keep-Alive|Connection): .*\r\n//mg;
	push @answers, $o;
}
is(scalar @answers, 2, 'the README sends the charge twice');
like($answers[0] // '', qr{^HTTP/1\.1 201 .*\r\nLocation: /charges/\d+\r\nLink: .*\r\nLink: }s,
	'the first answer: 201, Location, Link twice');
is($answers[1], $answers[0], 'the second answer is the first, replayed');

$service->kill_kill;
is($err, '', 'the service logged no error');

# the database's view: one charge per key, and one completed record each
is($node->safe_psql($db,
		'SELECT count(*) FROM (SELECT idempotency_key FROM charges GROUP BY 1 HAVING count(*) > 1) AS d'),
	'0', 'no key was charged twice');
# (the README's two curls charged one key more)
is($node->safe_psql($db, 'SELECT count(DISTINCT idempotency_key) FROM charges'),
	defined $keys ? $keys + 1 : -1, 'every key the driver and the README charged has its charge');
is($node->safe_psql($db,
		q{SELECT count(*) FROM idempotency.registry WHERE scope = 'http' AND status = 'completed' AND status_code = 201}),
	defined $keys ? $keys + 1 : -1, 'and one completed record with its 201');

done_testing();
