# pg_upgrade from PostgreSQL 15 to the major under test (17, 18): every
# record, definition and grant arrives intact, the extension works on the new
# server, and ALTER EXTENSION ... UPDATE afterwards changes nothing.
#
# The old binaries come from IDEMPOTENCY_UPGRADE_FROM, the installation
# directory of a PostgreSQL 15 that has the extension installed (with bin/
# and lib/).  test/matrix.sh sets it inside the Debian roots of 17 and 18;
# elsewhere the test skips (test/tap/005_pg_upgrade.pl covers 15 to 15).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Facts;

my $old_install = $ENV{IDEMPOTENCY_UPGRADE_FROM} // '';
plan skip_all => 'IDEMPOTENCY_UPGRADE_FROM names no older PostgreSQL (test/matrix.sh sets it)'
  if $old_install eq '';

my $settings = qq{
shared_preload_libraries = 'idempotency'
};

# checksums on both sides: 18's initdb turns them on by default, 15's off
my $old = PostgreSQL::Test::Cluster->new('old', install_path => $old_install);
$old->init(extra => ['--data-checksums']);
$old->append_conf('postgresql.conf', $settings);
$old->start;

my $old_version = $old->safe_psql('postgres', 'SHOW server_version');
my $new = PostgreSQL::Test::Cluster->new('new');
ok($new->pg_version > $old->pg_version,
	"upgrading from $old_version to " . $new->pg_version);

# Something of every kind the extension keeps: records in each state, inbox
# entries, tokens, a state machine with history, a user table with the key
# type and the triggers, and the grants that grant_usage and an
# administrator give.
$old->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE cleaner LOGIN;
	CREATE EXTENSION idempotency;
	SELECT idempotency.grant_usage('app');
	GRANT EXECUTE ON FUNCTION idempotency.cleanup(integer) TO cleaner;
	GRANT pg_monitor TO cleaner;

	SELECT idempotency.define_state_machine('order_status',
		'{"created": ["paid", "cancelled"], "paid": ["refunded"]}');
	CREATE TABLE public.orders (id int PRIMARY KEY, k idempotency.key UNIQUE, status text,
		version int NOT NULL DEFAULT 1);
	CREATE TRIGGER orders_status BEFORE INSERT OR UPDATE ON public.orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
	CREATE TRIGGER orders_history AFTER INSERT OR UPDATE ON public.orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
	CREATE TRIGGER orders_version BEFORE UPDATE ON public.orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
	GRANT SELECT, INSERT, UPDATE ON public.orders TO app;
	INSERT INTO public.orders VALUES (1, idempotency.make_key('order', '1', 'pay'), 'created');
	UPDATE public.orders SET status = 'paid' WHERE id = 1;

	SET ROLE app;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('done', 'pay', '{"amount": 10}');
	SELECT idempotency.idempotent_finish('done', '{"charged": 10}', 'pay');
	SELECT outcome FROM idempotency.idempotent_begin('failed', 'pay', '{"amount": 20}');
	SELECT idempotency.idempotent_finish('failed', '{"error": "declined"}', 'pay', failed => true);
	COMMIT;
	SELECT outcome FROM idempotency.idempotent_begin('held', 'pay', lease => '1 hour', external => true);
	SELECT idempotency.inbox_receive('billing', 'msg-1');
	SELECT count(*) FROM idempotency.inbox_receive_batch('billing', ARRAY['msg-2', 'msg-3']);
	SELECT idempotency.issue_token('checkout') IS NOT NULL;
	RESET ROLE;
});

my $before = fingerprint($old, 'postgres');
like($before, qr/^data idempotency\.registry 3 /m, 'the fingerprint counts the records');
like($before, qr/^function idempotency\.idempotent_begin\(.*acl .*app EXECUTE/m,
	'the fingerprint has the grants');
$old->stop;

$new->init(extra => ['--data-checksums']);
$new->append_conf('postgresql.conf', $settings);

chdir $new->basedir;
command_ok(
	[
		'pg_upgrade', '--no-sync',
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $old->config_data('--bindir'), '-B', $new->config_data('--bindir'),
		'-s', $new->host, '-p', $old->port, '-P', $new->port
	],
	"pg_upgrade from $old_version with the library preloaded");

$new->start;
my $after = fingerprint($new, 'postgres');
ok($after eq $before, 'every record, definition and grant is the same after pg_upgrade')
  or diag_difference($before, $after);

# the extension works: records replay for their owner, the held claim is
# still in progress, the inbox remembers, the state machine still refuses
is( $new->safe_psql('postgres', q{
		SET ROLE app;
		SELECT outcome || ' ' || response::text
		  FROM idempotency.idempotent_begin('done', 'pay', '{"amount": 10}')}),
	'replay {"charged": 10}', 'a record replays after pg_upgrade');
is( $new->safe_psql('postgres', q{
		SET ROLE app;
		SELECT outcome FROM idempotency.idempotent_begin('held', 'pay')}),
	'in_progress', 'a held claim is still in progress');
is( $new->safe_psql('postgres', q{
		SET ROLE app;
		SELECT idempotency.inbox_receive('billing', 'msg-1')}),
	'f', 'the inbox still knows its messages');
my ($ret, $stdout, $stderr) = $new->psql('postgres',
	q{SET ROLE app; UPDATE public.orders SET status = 'created' WHERE id = 1});
like($stderr, qr/transition from "paid" to "created" is not allowed/,
	'the state machine still refuses a transition');
ok($new->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'}),
	'the launcher runs on the upgraded cluster');

# the library on disk is the version the catalog has: UPDATE is a no-op
$before = fingerprint($new, 'postgres');
($ret, $stdout, $stderr) = $new->psql('postgres', 'ALTER EXTENSION idempotency UPDATE');
is($ret, 0, 'ALTER EXTENSION idempotency UPDATE succeeds');
like($stderr, qr/version "1\.2" of extension "idempotency" is already installed/,
	'ALTER EXTENSION idempotency UPDATE finds nothing to do');
$after = fingerprint($new, 'postgres');
ok($after eq $before, 'and changes nothing') or diag_difference($before, $after);

$new->stop;
done_testing();
