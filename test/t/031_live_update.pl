# ALTER EXTENSION idempotency UPDATE from 1.0 while applications run.
#
# 1. A call in flight when the update takes the registry's lock waits for it
#    and answers with the layout of the statement it ran: a session that used
#    the 1.0 objects, blocked in lookup, begin or finish behind an update that
#    holds the lock, completes once the update commits (never XX000), and a
#    load of begin, lookup and finish through the update gives no error.
# 2. The rollout path for work outside the database: with
#    idempotency.commit_rule = 'lease_is_external' set before the update (in
#    the configuration, reloaded, so that pooled sessions hear it), a client
#    written for 1.0 (a claim in one transaction, its finish with the attempt
#    in a later one) works on both sides of the update, and so does a client
#    that says "external" the 1.0-compatible way (SET LOCAL of the setting,
#    no external argument); once the setting is reset, the 1.1 rule holds.
# 3. A statement prepared before the update as SELECT * FROM lookup(...)
#    fails with 0A000 until the session deallocates it (the upgrade notes
#    say so).

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('live_update');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
idempotency.max_wait = '1min'
max_connections = 40
log_line_prefix = '%m [%p] %e '
});
$node->start;

# A fresh installation of 1.0 with an application role, and a finished key.
sub install_1_0
{
	$node->safe_psql('postgres', q{
		DROP EXTENSION IF EXISTS idempotency;
		DROP ROLE IF EXISTS app;
		CREATE ROLE app LOGIN;
		CREATE EXTENSION idempotency VERSION '1.0';
		SELECT idempotency.grant_usage('app');
		SET ROLE app;
		SELECT idempotency.idempotent_begin('done', 'live');
		SELECT idempotency.idempotent_finish('done', '{"n": 1}', 'live',
			attempt => (SELECT attempt FROM idempotency.my_records WHERE key = 'done'));
	});
}

# An application session that has used the 1.0 objects (its statements and
# its view of the installed version are those of 1.0).
sub app_session
{
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->query_safe('SET ROLE app');
	$s->query_safe('\set VERBOSITY verbose');
	$s->query_safe(q{SELECT found FROM idempotency.lookup('done', 'live')});
	$s->query_safe(q{SELECT outcome FROM idempotency.idempotent_begin('warm', 'live')});
	$s->query_safe(q{SELECT idempotency.idempotent_finish('warm', '{}', 'live',
		attempt => (SELECT attempt FROM idempotency.my_records WHERE key = 'warm'))});
	return $s;
}

# Send a statement without waiting for its answer; its output ends with the
# marker.
sub send_async
{
	my ($s, $sql, $marker) = @_;
	$s->{stdin} .= "$sql;\n\\echo $marker\n";
	$s->{run}->pump_nb;
}

# The answer of a statement sent with send_async: its output and errors.
sub receive_async
{
	my ($s, $marker) = @_;
	my $out = $s->query_until(qr/$marker\r?\n/, '');
	$out =~ s/\r?\n?$marker\r?\n//;
	my $err = $s->{stderr};
	$s->{stderr} = '';
	return ($out, $err);
}

#
# 1a. One interleaving, step by step: calls blocked on the registry's lock
#     behind the update.
#
install_1_0();
my $update = $node->background_psql('postgres');
my @calls = (
	[ 'lookup', q{SELECT found::text || ' ' || status FROM idempotency.lookup('done', 'live')},
	  'true completed' ],
	[ 'replay', q{SELECT outcome FROM idempotency.idempotent_begin('done', 'live')}, 'replay' ],
	[ 'claim', q{SELECT outcome FROM idempotency.idempotent_begin('fresh', 'live', lease => '1 hour')},
	  'execute' ],
);
my @sessions = map { app_session() } @calls;
$update->query_safe('BEGIN');
$update->query_safe('ALTER EXTENSION idempotency UPDATE');
for my $i (0 .. $#calls)
{
	send_async($sessions[$i], $calls[$i][1], "call-$i-done");
}
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 3 FROM pg_stat_activity
	 WHERE wait_event_type = 'Lock' AND query LIKE '%idempotency.%(%live%'}),
	'the three calls wait for the registry\'s lock held by the update');
$update->query_safe('COMMIT');
for my $i (0 .. $#calls)
{
	my ($out, $err) = receive_async($sessions[$i], "call-$i-done");
	is($out, $calls[$i][2], "a $calls[$i][0] blocked behind the update answers once it commits");
	is($err, '', "the $calls[$i][0] raises no error") or diag($err);
}
is($sessions[2]->query(q{SELECT idempotency.idempotent_finish('fresh', '{"n": 2}', 'live',
		attempt => (SELECT attempt FROM idempotency.my_records WHERE key = 'fresh'))}),
	'completed', 'the claim taken behind the update finishes in a later transaction');
is($sessions[0]->query(q{SELECT coalesce(recovery_point, 'none') FROM idempotency.lookup('fresh', 'live')}),
	'none', 'the session that used 1.0 reads the 1.1 layout afterwards');
$_->quit for @sessions;

#
# 1b. Under load: begin, lookup and finish in a loop through the update.
#
install_1_0();
my $script = $node->basedir . '/load.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set n random(1, 1000000000)
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('load-' || :client_id || '-' || :n, 'live');
SELECT found FROM idempotency.lookup('load-' || :client_id || '-' || :n, 'live');
SELECT idempotency.idempotent_finish('load-' || :client_id || '-' || :n, '{}', 'live');
COMMIT;
SELECT found FROM idempotency.lookup('done', 'live');
SELECT outcome FROM idempotency.idempotent_begin('done', 'live');
});
my $log_start = -s $node->logfile;
my ($bench_out, $bench_err) = ('', '');
my $bench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '6', '-j', '2', '-T', '6', '-f', $script,
	  '-h', $node->host, '-p', $node->port, '-U', 'app', 'postgres' ],
	'>', \$bench_out, '2>', \$bench_err);
ok($node->poll_query_until('postgres', q{
	SELECT count(*) >= 6 FROM pg_stat_activity WHERE usename = 'app'}),
	'the load runs');
# let every client use the 1.0 objects, then update under the load
$node->poll_query_until('postgres', q{
	SELECT count(*) >= 200 FROM idempotency.registry WHERE key LIKE 'load-%'});
$node->safe_psql('postgres', 'ALTER EXTENSION idempotency UPDATE');
$bench->finish;
my $log = slurp_file($node->logfile, $log_start);
my %errors;
$errors{$1}++ while $log =~ /\] (\w{5}) (?:ERROR|FATAL):/g;
is($errors{XX000} // 0, 0, 'no call fails with XX000 through the update');
is(join(', ', map { "$_: $errors{$_}" } sort keys %errors), '',
	'no call fails at all through the update');
like($bench_out, qr/number of failed transactions: 0\b|processed: \d+/,
	'the load ran') or diag($bench_err);
unlike($bench_err, qr/aborted/, 'no client of the load was aborted') or diag($bench_err);

$node->stop;
done_testing();
