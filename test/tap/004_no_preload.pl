# Without shared_preload_libraries: the registry and the manual cleanup work,
# no launcher runs, and cleanup_status says why it is empty instead of failing.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('plain');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');
is($node->safe_psql('postgres', q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('k');
	SELECT idempotency.idempotent_finish('k', '{"ok": true}');
	COMMIT;
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('k');
}), "execute\ncompleted\nreplay {\"ok\": true}", 'begin, finish and replay work without preloading');

is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idempotency%'}),
	'0', 'no launcher runs');

my ($ret, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM idempotency.cleanup_status');
is($ret, 0, 'cleanup_status does not fail');
is($out, '0', 'it has no rows');
like($err, qr/background cleanup is not running because "idempotency" is not in "shared_preload_libraries"/,
	'and a notice says why');

($ret, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM idempotency.stats');
is($out, '0', 'the stats view has no rows');
like($err, qr/statistics are not kept because "idempotency" is not in "shared_preload_libraries"/,
	'and says why');

($ret, $out, $err) = $node->psql('postgres', 'SELECT idempotency.stats_reset()');
isnt($ret, 0, 'stats_reset() fails instead of silently doing nothing');
like($err, qr/ERROR:  statistics are not kept because "idempotency" is not in "shared_preload_libraries"/,
	'and says why');
like($node->safe_psql('postgres', q{
	DO $$ BEGIN PERFORM idempotency.stats_reset();
	EXCEPTION WHEN object_not_in_prerequisite_state THEN RAISE NOTICE 'caught %', SQLSTATE; END $$;
	SELECT 'went on'}), qr/went on/, 'with SQLSTATE 55000, and the transaction can go on after catching it');

$node->safe_psql('postgres',
	q{UPDATE idempotency.registry SET expires_at = now() - interval '1 minute', attempt = attempt - 60});
is($node->safe_psql('postgres', 'SELECT idempotency.cleanup()'), '1',
	'cleanup() by hand is the way to remove expired records');

# the hint at grant_usage() (idempotency.permission_hints) comes from the
# library: not preloaded, it is there only if something loaded the library
# before core's permission check (here the key's input function, for a key
# passed to idempotent_begin)
$node->safe_psql('postgres', q{
	CREATE ROLE regress_stranger LOGIN;
	LOAD 'idempotency';
	ALTER SYSTEM SET idempotency.permission_hints = on;
	SELECT pg_reload_conf();
});
($ret, $out, $err) = $node->psql('postgres', q{SELECT idempotency.issue_token()},
	extra_params => ['-U', 'regress_stranger']);
like($err, qr/permission denied for function issue_token/, 'an ungranted role is refused');
unlike($err, qr/HINT/, 'with no hint when nothing loaded the library');
($ret, $out, $err) = $node->psql('postgres', q{SELECT idempotency.idempotent_begin('k'::idempotency.key)},
	extra_params => ['-U', 'regress_stranger']);
like($err, qr/HINT:  If it belongs to extension "idempotency", an administrator grants it with SELECT idempotency.grant_usage\('role_name'\)\./,
	'with the hint once the key type loaded it');

$node->stop;
done_testing();
