# Recovery points and lease renewal through the Citus coordinator: both are
# distributed by the key, as idempotent_finish, and reach the key's shard; a
# take-over answers with the recovery point; a stale attempt is fenced; the
# completer's batch refuses on a distributed registry.  Then an installation
# set up with Citus at 1.0 is updated: citus_setup() run again adds the new
# columns to the registry's shards and distributes the new functions, and
# recovery points work there too.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CitusCluster;

my @nodes = citus_cluster();
my ($coord, @workers) = @nodes;

# set_up(DBNAME, VERSION): a database with Citus on every node, the workers
# added, and the extension at VERSION, distributed
sub set_up
{
	my ($db, $version) = @_;
	if ($db ne 'postgres')
	{
		$_->safe_psql('postgres', "CREATE DATABASE $db") for @nodes;
	}
	citus_join($db, $coord, @workers);
	$coord->safe_psql($db, qq{
		CREATE EXTENSION idempotency VERSION '$version';
		SELECT idempotency.citus_setup();
	});
}

my $distributed = q{
	SELECT string_agg(p.proname || ' ' || o.distribution_argument_index, ', ' ORDER BY p.proname)
	  FROM pg_dist_object AS o JOIN pg_proc AS p ON o.classid = 'pg_proc'::regclass AND o.objid = p.oid
	 WHERE p.proname = ANY (ARRAY['idempotent_checkpoint', 'idempotent_renew', 'idempotent_finish'])};

set_up('postgres', '1.1');
$coord->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	SELECT idempotency.grant_usage('app');
});
is($coord->safe_psql('postgres', $distributed),
	'idempotent_checkpoint 0, idempotent_finish 0, idempotent_renew 0',
	'idempotent_checkpoint and idempotent_renew are distributed by the key, as idempotent_finish');

sub app
{
	my ($db, $sql) = @_;
	return $coord->safe_psql($db, "SET ROLE app;\n$sql");
}

sub attempt_of
{
	my ($db, $key) = @_;
	return $coord->safe_psql($db,
		qq{SELECT attempt FROM idempotency.registry WHERE key = '$key' AND scope = 'pay'});
}

# checks(DBNAME): recovery points and renewal through the coordinator
sub checks
{
	my ($db) = @_;

	# in the claim's own transaction, the attempt implied
	is(app($db, q{
		BEGIN;
		SELECT outcome FROM idempotency.idempotent_begin('rp-1', 'pay', '{"amount": 1}', lease => '1 hour', external => true);
		SELECT idempotency.idempotent_checkpoint('rp-1', 'customer_created', '{"customer": "c_1"}', 'pay');
		COMMIT;}),
		"execute\ncustomer_created", "$db: a recovery point in the claim's transaction");
	my $first = attempt_of($db, 'rp-1');
	# in a later transaction, with the attempt
	is(app($db, qq{
		SELECT idempotency.idempotent_checkpoint('rp-1', 'charged', '{"customer": "c_1", "charge": "ch_1"}',
												 'pay', $first)}),
		'charged', "$db: a recovery point in a later transaction");
	is(app($db, qq{SELECT idempotency.idempotent_renew('rp-1', '2 hours', 'pay', $first) > now() + interval '90 minutes'}),
		't', "$db: a renewal");
	is(app($db, q{SELECT recovery_point || ' ' || (recovery_state ->> 'charge') FROM idempotency.lookup('rp-1', 'pay')}),
		'charged ch_1', "$db: lookup shows the recovery point");
	is(app($db, q{SELECT recovery_point FROM idempotency.my_records WHERE key = 'rp-1'}),
		'charged', "$db: my_records shows it");
	# the row on the key's shard has it
	is($coord->safe_psql($db, q{
			SELECT result FROM run_command_on_shards('idempotency.registry',
				$$SELECT string_agg(recovery_point, ',') FROM %s WHERE key = 'rp-1'$$)
			 WHERE result <> ''}),
		'charged', "$db: the key's shard holds the recovery point");

	# the lease runs out; the take-over resumes from the recovery point
	$coord->safe_psql($db,
		q{UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'rp-1'});
	is(app($db, q{
		SELECT outcome || ' ' || previous_end || ' ' || recovery_point
		  FROM idempotency.idempotent_begin('rp-1', 'pay', '{"amount": 1}', external => true)}),
		'execute lease_expired charged', "$db: a take-over answers with the recovery point");
	my ($ret, $out, $err) = $coord->psql($db, qq{
		SET ROLE app;
		\\set VERBOSITY sqlstate
		SELECT idempotency.idempotent_checkpoint('rp-1', 'late', NULL, 'pay', $first);
		SELECT idempotency.idempotent_renew('rp-1', '1 minute', 'pay', $first);
		SELECT idempotency.idempotent_checkpoint('rp-1', 'late', NULL, 'pay');
		SELECT idempotency.idempotent_checkpoint('rp-none', 'late', NULL, 'pay', 1);
		SELECT * FROM idempotency.claim_stalled();}, on_error_stop => 0);
	is($err =~ s/psql:<stdin>:\d+: //gr, "ERROR:  IK004\nERROR:  IK004\nERROR:  IK006\nERROR:  IK002\nERROR:  0A000",
		"$db: a stale attempt, no attempt, an unknown key and the completer's batch are refused");
	my $second = attempt_of($db, 'rp-1');
	is(app($db, qq{
		SELECT idempotency.idempotent_finish('rp-1', '{"done": true}', 'pay', $second)}),
		'completed', "$db: the new attempt finishes");
	is(app($db, q{SELECT status || ' ' || recovery_point FROM idempotency.lookup('rp-1', 'pay')}),
		'completed charged', "$db: the finished record keeps its last recovery point");
}

checks('postgres');

# an installation set up at 1.0, then updated
set_up('updated', '1.0');
$coord->safe_psql('updated', q{
	SELECT idempotency.grant_usage('app');
	SELECT outcome FROM idempotency.idempotent_begin('before', 'pay');
});
$coord->safe_psql('updated', 'ALTER EXTENSION idempotency UPDATE');
is($workers[0]->safe_psql('updated',
		q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
	'1.2', 'the update reached the workers');
$coord->safe_psql('updated', 'SELECT idempotency.citus_setup()');
is($coord->safe_psql('updated', $distributed),
	'idempotent_checkpoint 0, idempotent_finish 0, idempotent_renew 0',
	'after the update, citus_setup() distributes the new functions');
is($coord->safe_psql('updated', q{
		SELECT count(*) FROM run_command_on_shards('idempotency.registry',
			$$SELECT count(*) FROM pg_attribute WHERE attrelid = '%s'::regclass
				AND attname = ANY (ARRAY['recovery_point', 'recovery_state'])$$)
		 WHERE result <> '2'}),
	'0', 'after the update, citus_setup() gave every shard of the registry the new columns');
is($coord->safe_psql('updated', q{SELECT key || ' ' || coalesce(recovery_point, '-') FROM idempotency.my_records}),
	'before -', 'a record made before the update reads with no recovery point');
checks('updated');

$_->stop for @nodes;
done_testing();
