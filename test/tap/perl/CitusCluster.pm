# CitusCluster.pm: the cluster the Citus TAP tests run on: a coordinator and
# two workers on this machine, each with Citus and the extension preloaded.
# A test file that uses it is skipped where Citus is not installed in the
# PostgreSQL under test.

package CitusCluster;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use Test::More;

our @EXPORT = qw(citus_cluster citus_join);

# citus_cluster(CONF): start the three nodes, CONF added to each one's
# postgresql.conf; returns the coordinator and the workers.  Skips the whole
# test file where Citus is not installed.
sub citus_cluster
{
	my ($conf) = @_;
	my $pkglibdir = `pg_config --pkglibdir`;
	chomp $pkglibdir;
	plan skip_all => "Citus is not installed in this PostgreSQL ($pkglibdir/citus.so)"
	  unless -f "$pkglibdir/citus.so";

	my @nodes;
	for my $name (qw(coordinator worker1 worker2))
	{
		my $node = PostgreSQL::Test::Cluster->new($name);
		$node->init;
		$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'citus,idempotency'
listen_addresses = '127.0.0.1'
max_connections = 100
max_prepared_transactions = 100
max_worker_processes = 20
idempotency.cleanup_interval = 0
} . ($conf // ''));
		$node->start;
		push @nodes, $node;
	}
	return @nodes;
}

# citus_join(DBNAME, COORDINATOR, WORKERS...): Citus in DBNAME on every node,
# the coordinator's host set and the workers added
sub citus_join
{
	my ($db, $coord, @workers) = @_;
	$_->safe_psql($db, 'CREATE EXTENSION citus') for (@workers, $coord);
	$coord->safe_psql($db,
		"SELECT citus_set_coordinator_host('127.0.0.1', " . $coord->port . ")");
	$coord->safe_psql($db, "SELECT citus_add_node('127.0.0.1', " . $_->port . ")")
	  for @workers;
	return;
}

1;
