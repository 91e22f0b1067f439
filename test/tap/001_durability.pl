# Durability of the registry: a committed result survives a crash (kill -9
# of the postmaster and all its children) and a pg_dump / pg_restore round
# trip, and still replays.  Also the binary input path of the key type, which
# SQL alone cannot reach: COPY ... (FORMAT binary) runs key_recv.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

# A committed result, an open claim, and a claim whose transaction is still
# running when the server dies.
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('paid', request => '{"amount": 10}', external => true);
	SELECT idempotency.idempotent_finish('paid', '{"charged": 10}');
	COMMIT;
});
my $open_attempt = $node->safe_psql('postgres',
	q{SELECT attempt FROM idempotency.idempotent_begin('open', external => true)});

my $inflight = $node->background_psql('postgres');
$inflight->query_safe(q{BEGIN; SELECT idempotency.idempotent_begin('in-flight', external => true);});

# Crash: kill -9 every process the postmaster started, then the postmaster
# itself, so nothing gets to write a checkpoint or flush anything on the way.
my $postmaster = $node->{_pid};
my @children = grep { /^\d+$/ } split /\s+/, `ps -o pid= --ppid $postmaster`;
kill 'KILL', @children;
$node->kill9;
eval { $inflight->quit; };

# SIGKILL is delivered asynchronously: wait (bounded) until every process is
# gone, or the new postmaster would find the old one's lock still held.
my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
while (grep { kill 0, $_ } $postmaster, @children)
{
	die "processes of the killed server are still alive" if time() > $deadline;
	Time::HiRes::usleep(50_000);
}

my $log_offset = -s $node->logfile;
$node->start;
ok( $node->log_contains('database system was interrupted|was not properly shut down', $log_offset),
	'the restart ran crash recovery');

is( $node->safe_psql('postgres',
		q{SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('paid', request => '{"amount": 10}', external => true)}),
	'replay {"charged": 10}',
	'a finished result survives kill -9 and replays');
is( $node->safe_psql('postgres',
		q{SELECT outcome || ' ' || attempt FROM idempotency.idempotent_begin('open', external => true)}),
	"in_progress $open_attempt",
	'a committed claim survives kill -9, with its attempt');
is( $node->safe_psql('postgres',
		q{SELECT outcome FROM idempotency.idempotent_begin('in-flight', external => true)}),
	'execute',
	'a claim whose transaction died with the server is gone');
is( $node->safe_psql('postgres',
		q{SELECT relpersistence FROM pg_class WHERE oid = 'idempotency.registry'::regclass}),
	'p', 'the registry is a WAL-logged (permanent) table');

# pg_dump / pg_restore: the records come along, and replay in the copy.
$node->safe_psql('postgres', q{
	CREATE ROLE regress_app;
	SELECT idempotency.grant_usage('regress_app');
	SET ROLE regress_app;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('app-key', scope => 'orders', external => true);
	SELECT idempotency.idempotent_finish('app-key', '{"order": 1}', scope => 'orders');
	COMMIT;
});
$node->safe_psql('postgres', q{
	SELECT idempotency.define_state_machine('order_status', '{"created": ["paid"], "paid": []}');
	CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL);
	CREATE TRIGGER orders_status BEFORE INSERT OR UPDATE ON orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
	CREATE TRIGGER orders_history AFTER INSERT OR UPDATE ON orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
	INSERT INTO orders VALUES (1, 'created');
	UPDATE orders SET status = 'paid';
});
my $dump = $node->basedir . '/registry.dump';
$node->command_ok(
	[ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ],
	'pg_dump of a database with the extension');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'pg_restore into a new database');
is( $node->safe_psql('restored',
		q{SELECT count(*) FROM idempotency.registry}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.registry}),
	'every record is restored');
is( $node->safe_psql('restored',
		q{SET ROLE regress_app; SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('app-key', scope => 'orders', external => true)}),
	'replay {"order": 1}',
	'a restored record replays for its owner, and the grants came along');
is( $node->safe_psql('restored',
		q{SELECT outcome FROM idempotency.idempotent_begin('paid', request => '{"amount": 10}', external => true)}),
	'replay', 'a restored record replays');
is( $node->safe_psql('restored',
		q{SELECT idempotency.transition_allowed('order_status', 'created', 'paid')}),
	't', 'state machine definitions are restored');
is( $node->safe_psql('restored', q{SELECT count(*) FROM idempotency.state_history}),
	'2', 'and so is the state history');
# the extension's schema: a member of the extension in the copy too (it is
# created by the install script that pg_restore runs, not dumped on its own),
# with its grant to PUBLIC
my $schema_check = q{
	SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
	 WHERE e.extname = 'idempotency' AND d.classid = 'pg_namespace'::regclass
	   AND d.objid = 'idempotency'::regnamespace AND d.deptype = 'e'
	   AND has_schema_privilege('public', 'idempotency', 'USAGE')};
is($node->safe_psql('restored', $schema_check), '1',
	'the restored schema belongs to the extension and keeps its USAGE for PUBLIC');
my ($rc, $o, $e) = $node->psql('restored', q{UPDATE orders SET status = 'created'});
like($e, qr/transition from "paid" to "created" is not allowed/,
	'the restored trigger enforces the restored definition');

# Binary input: COPY FROM a binary file runs key_recv, which must apply the
# same checks as key_in.
$node->safe_psql('postgres', 'CREATE TABLE keys (k idempotency.key)');

# write_copy_file(path, value...): a COPY BINARY file with one column
sub write_copy_file
{
	my ($path, @values) = @_;
	open my $fh, '>:raw', $path or die "could not open $path: $!";
	print $fh "PGCOPY\n\377\r\n\0", pack('NN', 0, 0);
	print $fh pack('nN', 1, length $_), $_ foreach @values;
	print $fh pack('n', 0xffff);
	close $fh;
}

my $copyfile = $node->basedir . '/keys.copy';
write_copy_file($copyfile, 'order:1', 'ключ');
$node->safe_psql('postgres', "COPY keys FROM '$copyfile' (FORMAT binary)");
is($node->safe_psql('postgres', 'SELECT string_agg(k::text, \',\' ORDER BY k) FROM keys'),
	'order:1,ключ', 'valid keys arrive through binary COPY');

my %bad = (
	'empty'            => '',
	'control character' => "bad\x01key",
	'leading space'    => ' lead',
	'trailing space'   => 'trail ',
	'too long'         => 'x' x 256);
foreach my $case (sort keys %bad)
{
	write_copy_file($copyfile, $bad{$case});
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nCOPY keys FROM '$copyfile' (FORMAT binary)");
	like($stderr, qr/22P02: invalid input syntax for type idempotency\.key/,
		"binary input rejects a key with $case");
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM keys'), '2',
	'rejected binary input wrote nothing');

# binary output round-trips through binary input
$node->safe_psql('postgres', qq{
	COPY keys TO '$copyfile.out' (FORMAT binary);
	TRUNCATE keys;
	COPY keys FROM '$copyfile.out' (FORMAT binary);
});
is($node->safe_psql('postgres', 'SELECT string_agg(k::text, \',\' ORDER BY k) FROM keys'),
	'order:1,ключ', 'binary output reads back through binary input');

$node->stop;
done_testing();
