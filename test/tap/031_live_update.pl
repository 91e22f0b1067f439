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
#    A statement prepared before the update as SELECT * FROM lookup(...)
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
\set n random(1, 9000000000000000000)
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
note("the load through the update:\n$bench_out");
my $log = slurp_file($node->logfile, $log_start);
my %errors;
$errors{$1}++ while $log =~ /\] (\w{5}) (?:ERROR|FATAL):/g;
is($errors{XX000} // 0, 0, 'no call fails with XX000 through the update');
is(join(', ', map { "$_: $errors{$_}" } sort keys %errors), '',
	'no call fails at all through the update');
like($bench_out, qr/number of failed transactions: 0\b|processed: \d+/,
	'the load ran') or diag($bench_err);
unlike($bench_err, qr/aborted/, 'no client of the load was aborted') or diag($bench_err);

#
# 2. The rollout for work outside the database, with live sessions.
#
install_1_0();
my $pooled = app_session();

# the 1.0 pattern: claim in one transaction (autocommit), do the work
# outside, finish with the attempt in a later one; 'ok' or the SQLSTATE
sub pattern_1_0
{
	my ($s, $key) = @_;
	$s->{stderr} = '';
	my ($attempt, $err) = $s->query(
		qq{SELECT attempt FROM idempotency.idempotent_begin('$key', 'ext', lease => '1 hour')});
	return $1 if $s->{stderr} =~ /ERROR:  (\w{5}):/;
	return 'no claim' unless $attempt =~ /^\d+$/;
	my $done = $s->query(qq{SELECT idempotency.idempotent_finish('$key', '{"sent": true}', 'ext',
		attempt => $attempt)});
	return $1 if $s->{stderr} =~ /ERROR:  (\w{5}):/;
	return $done eq 'completed' ? 'ok' : "finish: $done";
}

# the same client saying "external" the way both versions accept: the
# setting for its claim's transaction, and no external argument
sub pattern_compatible
{
	my ($s, $key) = @_;
	$s->{stderr} = '';
	my $attempt = $s->query(qq{BEGIN;
		SET LOCAL idempotency.commit_rule = 'lease_is_external';
		SELECT attempt FROM idempotency.idempotent_begin('$key', 'ext', lease => '1 hour');
		COMMIT;});
	return $1 if $s->{stderr} =~ /ERROR:  (\w{5}):/;
	my $done = $s->query(qq{SELECT idempotency.idempotent_finish('$key', '{"sent": true}', 'ext',
		attempt => $attempt)});
	return $1 if $s->{stderr} =~ /ERROR:  (\w{5}):/;
	return $done eq 'completed' ? 'ok' : "finish: $done";
}

# a statement prepared on 1.0 that reads lookup's whole row, and one that
# names its columns
$pooled->query_safe(q{PREPARE lookup_all AS SELECT * FROM idempotency.lookup('done', 'live')});
$pooled->query_safe(q{PREPARE lookup_named AS SELECT found, status FROM idempotency.lookup('done', 'live')});
$pooled->query_safe(q{PREPARE begin_named AS SELECT outcome FROM idempotency.idempotent_begin('done', 'live')});

# step 1: the operator keeps 1.0's rule everywhere, sessions already
# connected included (the configuration file and a reload: ALTER ROLE and
# ALTER DATABASE reach only new sessions)
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.commit_rule = 'lease_is_external';
	SELECT pg_reload_conf();});
my $seen = '';
for (1 .. 100)
{
	$seen = $pooled->query_safe('SHOW idempotency.commit_rule');
	last if $seen eq 'lease_is_external';
	select(undef, undef, undef, 0.1);
}
is($seen, 'lease_is_external', 'a pooled session hears the setting after a reload');
is(pattern_1_0($pooled, 'a-1'), 'ok', 'before the update: the 1.0 pattern works');
is(pattern_compatible($pooled, 'a-2'), 'ok', 'before the update: the compatible pattern works');
my ($out, $err) = $pooled->query(
	q{SELECT outcome FROM idempotency.idempotent_begin('a-3', 'ext', external => true)});
like($pooled->{stderr}, qr/ERROR:  42883:/,
	'before the update: external => true does not exist (42883), as documented');
$pooled->{stderr} = '';

# step 2: the update, while the pooled session stays connected
$node->safe_psql('postgres', 'ALTER EXTENSION idempotency UPDATE');

# step 3: clients of both kinds on the 1.1 objects, the setting still on
is(pattern_1_0($pooled, 'b-1'), 'ok',
	'after the update, with the setting: the 1.0 pattern works in a session connected before');
is(pattern_compatible($pooled, 'b-2'), 'ok', 'after the update: the compatible pattern works');
my $fresh = $node->background_psql('postgres', on_error_stop => 0);
$fresh->query_safe('SET ROLE app');
$fresh->query_safe('\set VERBOSITY verbose');
is(pattern_1_0($fresh, 'b-3'), 'ok', 'after the update, with the setting: and in a new session');
is($fresh->query(q{BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('b-4', 'ext', external => true);
	COMMIT;
	SELECT idempotency.idempotent_finish('b-4', '{}', 'ext',
		attempt => (SELECT attempt FROM idempotency.my_records WHERE key = 'b-4'));}),
	"execute\ncompleted", 'a client updated to 1.1 passes external => true');
is($fresh->query(q{BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('b-5', 'db');
	SELECT idempotency.idempotent_finish('b-5', '{}', 'db');
	COMMIT;}), "execute\ncompleted", 'and finishes a transactional claim in its transaction');
is($fresh->query(q{BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('b-6', 'db', defer_claim => true);
	COMMIT;}), 'execute', 'a deferred claim is not made external by the setting');
like($fresh->{stderr}, qr/ERROR:  2D000:/, 'its commit without a finish still fails with 2D000');
$fresh->{stderr} = '';

# the prepared statement of 1.0's lookup: 0A000 until it is deallocated
($out, $err) = $pooled->query('EXECUTE lookup_all');
like($pooled->{stderr}, qr/ERROR:  0A000: cached plan must not change result type/,
	'a statement prepared on 1.0 as SELECT * FROM lookup() fails with 0A000');
$pooled->{stderr} = '';
is($pooled->query_safe(q{DEALLOCATE lookup_all;
	PREPARE lookup_all AS SELECT * FROM idempotency.lookup('done', 'live');
	EXECUTE lookup_all;} ) =~ /completed/ ? 'replays' : 'no', 'replays',
	'prepared again, it reads the 1.1 row');

is($pooled->query_safe('EXECUTE lookup_named'), 't|completed',
	'a statement prepared on 1.0 that names its columns keeps working');
is($pooled->query_safe('EXECUTE begin_named'), 'replay',
	'and so does a prepared begin that names its columns');

# step 4: once every client is on 1.1, the setting is reset: 1.1's rule
$node->safe_psql('postgres', q{ALTER SYSTEM RESET idempotency.commit_rule;
	SELECT pg_reload_conf();});
for (1 .. 100)
{
	$seen = $pooled->query_safe('SHOW idempotency.commit_rule');
	last if $seen eq 'external_required';
	select(undef, undef, undef, 0.1);
}
is($seen, 'external_required', 'the pooled session hears the reset');
is(pattern_1_0($pooled, 'c-1'), '2D000',
	'after the reset, the 1.0 pattern fails with 2D000: the 1.1 rule holds');
is(pattern_compatible($pooled, 'c-2'), 'ok', 'the compatible pattern still works');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.registry WHERE key = 'c-1'}),
	'0', 'the refused claim was not committed');

# per role, for new sessions
$node->safe_psql('postgres', q{ALTER ROLE app SET idempotency.commit_rule = 'lease_is_external'});
my $role_session = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'app' ]);
$role_session->query_safe('\set VERBOSITY verbose');
is(pattern_1_0($role_session, 'c-3'), 'ok', 'ALTER ROLE ... SET keeps 1.0\'s rule for the role\'s new sessions');
is($node->safe_psql('postgres', q{SELECT string_agg(key || ':' || status, ',' ORDER BY key)
	FROM idempotency.registry WHERE scope = 'ext'}),
	'a-1:completed,a-2:completed,b-1:completed,b-2:completed,b-3:completed,b-4:completed,'
	  . 'c-2:completed,c-3:completed',
	'every claim of the rollout finished');
$_->quit for ($pooled, $fresh, $role_session);

$node->stop;
done_testing();
