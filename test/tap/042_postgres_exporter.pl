# The monitoring recipe: postgres_exporter with the project's queries file
# (examples/monitoring/postgres_exporter.yaml), connected as a role that
# holds pg_monitor only, scraped over HTTP.  Every metric the file defines
# comes out with the value the database holds (counters after known calls,
# gauges of records, stalled claims, expired records, a claim held in
# memory, the outbox), no query fails, and no key or role name appears in
# the output.
#
# Debian's prometheus-postgres-exporter package provides the exporter
# (test/lib.sh installs it); without it the test is skipped.

use strict;
use warnings FATAL => 'all';

use File::Basename qw(dirname);
use File::Spec;
use HTTP::Tiny;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my ($exporter) = grep { -x $_ } map { File::Spec->catfile($_, 'prometheus-postgres-exporter') }
  (File::Spec->path, '/usr/bin');
plan skip_all => 'postgres_exporter is not installed (Debian package "prometheus-postgres-exporter")'
  unless defined $exporter;

my $queries = File::Spec->rel2abs(dirname(__FILE__) . '/../../examples/monitoring/postgres_exporter.yaml');
ok(-r $queries, 'the queries file is in the tree');

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 1
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION idempotency;
CREATE ROLE app;
CREATE ROLE exporter LOGIN IN ROLE pg_monitor;
SELECT idempotency.grant_usage('app');
});
# one cleanup pass, for cleanup_status's row; then none, so that the expired
# record below stays for the gauges
$node->poll_query_until('postgres',
	q{SELECT count(*) > 0 FROM idempotency.cleanup_status WHERE datname = 'postgres' AND last_end IS NOT NULL})
  or die 'no cleanup pass';
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.cleanup_interval = 0; SELECT pg_reload_conf();});

# known work: three executes (one finished twice over a replay), a stalled
# external claim, an expired record, a request mismatch, a forgotten key,
# an inbox duplicate, two outbox messages of which a relay holds one
$node->safe_psql('postgres', q{
SET ROLE app;
BEGIN;
SELECT idempotency.idempotent_begin('secret-key-1', request => '{"a": 1}');
SELECT idempotency.idempotent_finish('secret-key-1', '{"ok": true}');
COMMIT;
SELECT idempotency.idempotent_begin('secret-key-1', request => '{"a": 1}');
SELECT idempotency.idempotent_begin('secret-stalled', external => true, lease => '1 hour');
BEGIN;
SELECT idempotency.idempotent_begin('secret-expired');
SELECT idempotency.idempotent_finish('secret-expired', '{}');
COMMIT;
SELECT idempotency.inbox_receive('consumer', 'm1'), idempotency.inbox_receive('consumer', 'm1');
SELECT idempotency.outbox_send('orders', '{"n": 1}', ordering_key => 'secret-order');
SELECT idempotency.outbox_send('orders', '{"n": 2}', ordering_key => 'secret-order');
SELECT count(*) FROM idempotency.outbox_fetch(1);
RESET ROLE;
UPDATE idempotency.registry SET lease_until = now() - interval '1 minute' WHERE key = 'secret-stalled';
UPDATE idempotency.registry SET expires_at = now() - interval '1 minute' WHERE key = 'secret-expired';
UPDATE idempotency.outbox SET sent_at = now() - interval '2 minutes';
});
my ($rc, $out, $err) = $node->psql('postgres', q{SET ROLE app;
SELECT idempotency.idempotent_begin('secret-key-1', request => '{"a": 2}');});
like($err, qr/IK001|another request|different/, 'a request mismatch, for its counter');
$node->safe_psql('postgres', q{
BEGIN;
SET LOCAL ROLE app;
SELECT idempotency.idempotent_begin('secret-forget');
SELECT idempotency.idempotent_finish('secret-forget', '{}');
COMMIT;
SELECT idempotency.forget_key('app', 'secret-forget');
});

# a claim held in memory while the exporter scrapes: a transaction left open
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SET LOCAL ROLE app; SELECT idempotency.idempotent_begin('secret-held');});

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $dsn = sprintf('host=%s port=%d user=exporter dbname=postgres sslmode=disable',
	$node->host, $node->port);
my $log = PostgreSQL::Test::Utils::tempdir . '/exporter.log';
local $ENV{DATA_SOURCE_NAME} = $dsn;
my $run = IPC::Run::start(
	[
		$exporter, '--extend.query-path', $queries,
		'--disable-default-metrics', '--disable-settings-metrics',
		'--web.listen-address', "127.0.0.1:$port"
	],
	'>', $log, '2>&1');

my $http = HTTP::Tiny->new(timeout => 10);
my $body;
for (my $i = 0; $i < 10 * $PostgreSQL::Test::Utils::timeout_default; $i++)
{
	my $res = $http->get("http://127.0.0.1:$port/metrics");
	if ($res->{success} && $res->{content} =~ /^idempotency_metrics_records/m)
	{
		$body = $res->{content};
		last;
	}
	select(undef, undef, undef, 0.1);
}
ok(defined $body, 'the exporter answers with the extension\'s metrics')
  or diag(PostgreSQL::Test::Utils::slurp_file($log));
$body //= '';

# metric NAME: its value in the scrape (the first series of that name)
sub metric
{
	my ($name) = @_;
	return $body =~ /^\Q$name\E(?:\{[^}]*\})? (\S+)$/m ? $1 + 0 : undef;
}

my %want = (
	idempotency_stats_begins_execute => 4,
	idempotency_stats_begins_replay => 1,
	idempotency_stats_request_mismatches => 1,
	idempotency_stats_finishes => 3,
	idempotency_stats_keys_forgotten => 1,
	idempotency_stats_inbox_new => 1,
	idempotency_stats_inbox_duplicates => 1,
	idempotency_metrics_records => 3,
	idempotency_metrics_claims_processing => 1,
	idempotency_metrics_stalled_claims => 1,
	idempotency_metrics_expired_records => 1,
	idempotency_metrics_claims_in_memory => 1,
	idempotency_metrics_claims_waiting => 0,
	idempotency_metrics_inbox_entries => 1,
	idempotency_metrics_outbox_pending => 2,
	idempotency_metrics_outbox_in_flight => 1,
	idempotency_cleanup_failures => 0,);
is(metric($_), $want{$_}, "$_ is $want{$_}") for sort keys %want;
cmp_ok(metric('idempotency_metrics_expired_lag_seconds'), '>=', 60, 'the cleanup lag is the oldest expired record\'s age');
cmp_ok(metric('idempotency_metrics_outbox_pending_age_seconds'), '>=', 120, 'the outbox\'s age is its oldest undelivered message\'s');
like($body, qr/^idempotency_metrics_records\{[^}]*datname="postgres"/m, 'the database is a label');

# every metric the file defines came out, and no query failed
my @defined = PostgreSQL::Test::Utils::slurp_file($queries) =~ /^\s+- (\w+):$/mg;
my %labels = map { $_ => 1 } qw(datname);
my @groups = PostgreSQL::Test::Utils::slurp_file($queries) =~ /^(idempotency_\w+):$/mg;
my @missing;
for my $column (grep { !$labels{$_} } @defined)
{
	push @missing, $column unless grep { $body =~ /^${_}_\Q$column\E[{ ]/m } @groups;
}
is_deeply(\@missing, [], 'every column of the queries file is a metric');
is(metric('pg_exporter_last_scrape_error'), 0, 'the last scrape had no error');
unlike($body, qr/secret|"app"/, 'no key, ordering key or role name in the metrics');

$holder->quit;
$run->kill_kill;
$node->stop;
done_testing();
