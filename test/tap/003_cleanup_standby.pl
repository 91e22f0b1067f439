# The background cleanup on a streaming standby: nothing runs there (no
# launcher, no writes, no errors), the replicated expired records stay until
# promotion, and after promotion the new primary cleans them.  A begin on
# the standby replays a finished key and refuses a claim (25006).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $settings = qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = '1s'
};

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', $settings);
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION idempotency');

$primary->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->start;

# Expired records made on the primary while its own cleanup is off, so that
# they reach the standby intact.
$primary->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.cleanup_interval = 0; SELECT pg_reload_conf()});
$primary->safe_psql('postgres', q{
	SELECT count(idempotency.idempotent_begin(('old-' || i)::idempotency.key, external => true)) FROM generate_series(1, 50) AS i;
	UPDATE idempotency.registry SET expires_at = now() - interval '1 minute', attempt = attempt - 60;
});
$primary->safe_psql('postgres', q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('done', 'standby');
	SELECT idempotency.idempotent_finish('done', '{"ok": true}', 'standby', status_code => 201);
	COMMIT;
});
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idempotency%'}),
	'0', 'no cleanup process runs on the standby');
is($standby->safe_psql('postgres', q{SELECT count(*) FROM idempotency.registry WHERE key::text LIKE 'old-%'}), '50',
	'the standby has the expired records');
my ($ret, $out, $err) = $standby->psql('postgres', 'SELECT idempotency.cleanup()');
like($err, qr/read-only transaction/, 'cleanup() by hand on the standby is refused as a write');

# A begin on the standby reads first, even in a session whose begins so far
# found no record (which claims first on a primary): a finished key
# replays; a claim is a write, refused with 25006.
is($standby->safe_psql('postgres', q{
	SELECT outcome || ' ' || status_code || ' ' || response
	  FROM idempotency.idempotent_begin('done', 'standby', external => true);
}), 'replay 201 {"ok": true}', 'a finished key replays on the standby');
($ret, $out, $err) = $standby->psql('postgres', q{
	SELECT outcome FROM idempotency.idempotent_begin('new', 'standby', external => true);
});
like($err, qr/cannot execute INSERT in a read-only transaction/,
	'a claim on the standby is refused as a write');

# Promotion: the launcher starts and cleans.
$standby->promote;
ok($standby->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'}),
	'the launcher starts after promotion');
ok($standby->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key::text LIKE 'old-%'}),
	'the promoted server cleans the expired records');
ok(!$standby->log_contains('idempotency.*(ERROR|FATAL)|(ERROR|FATAL).*idempotency'),
	'the standby logged no error from the extension');

$standby->stop;
$primary->stop;
done_testing();
