# Concurrent replays of one finished key with a bounded wait (wait =>
# false: 1 ms) all replay: a begin that finds the key's lock held for a
# moment by another begin reading the same finished record reads the
# record instead of waiting for the lock, so none answers in_progress.
# pgbench's clients fail (1/0) on any answer but replay.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('replays');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	BEGIN;
	SELECT idempotency.idempotent_begin('done');
	SELECT idempotency.idempotent_finish('done', '{"ok": true}');
	COMMIT;
});
my $n = 0;
for my $bound ('wait => false', q{max_wait => '0'})
{
	$n++;
	$node->pgbench('--no-vacuum --client=8 --jobs=2 --transactions=400', 0,
		[qr/actually processed: 3200\/3200/], [qr/^$/],
		"8 clients replaying one finished key with $bound: every answer a replay",
		{ "replays_$n" => "SELECT 1 / (outcome = 'replay')::int FROM idempotency.idempotent_begin('done', $bound);" });
}
$node->stop;
done_testing();
