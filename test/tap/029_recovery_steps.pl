# Work that spans several external calls, end to end: a three-step handler
# (two calls to a provider, simulated by another database reached through
# dblink, then a local write with the finish) whose workers are killed
# (pg_terminate_backend) at every step, recovered by a client's retry or by
# the reference completer of doc/long-running-work.md, run verbatim.
#
# Every request ends completed, with one receipt and one object of each kind
# at the provider; a step whose recovery point committed is never called
# again, and only the step in flight when its worker died is (the provider
# answers the repeat with the object it made the first time); a take-over
# answers with the last committed recovery point; nothing is left stalled.
# Leases run out by moving lease_until into the past, never by waiting.

use strict;
use warnings FATAL => 'all';

use File::Basename;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('steps');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
});
$node->start;

my $provider = 'host=' . $node->host . ' port=' . $node->port . ' dbname=provider';

# the provider: every call is logged; an idempotency key makes one object
$node->safe_psql('postgres', 'CREATE DATABASE provider');
$node->safe_psql('provider', q{
	CREATE TABLE provider_calls (operation text, idempotency_key text, n serial);
	CREATE TABLE provider_objects (idempotency_key text PRIMARY KEY, operation text, id text);
	CREATE FUNCTION provider_call(operation text, idempotency_key text) RETURNS text
	LANGUAGE sql AS $$
		INSERT INTO provider_calls (operation, idempotency_key) VALUES (operation, idempotency_key);
		INSERT INTO provider_objects VALUES (idempotency_key, operation,
				 operation || '_' || md5(idempotency_key))
			ON CONFLICT (idempotency_key) DO NOTHING;
		SELECT id FROM provider_objects AS o WHERE o.idempotency_key = provider_call.idempotency_key;
	$$;
});

# the application: the extension, then the SQL blocks of the document, in
# order, as they are written (the CALL example names a provider of its own)
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');
my $doc = dirname(__FILE__) . '/../../doc/long-running-work.md';
open(my $fh, '<', $doc) or die "could not open $doc: $!";
my $text = do { local $/; <$fh> };
close($fh);
my @blocks = $text =~ /^```sql\n(.*?)^```$/msg;
ok(@blocks >= 3, 'the document has SQL blocks');
my ($call) = grep { /^CALL complete_stalled/ } @blocks;
foreach my $block (grep { !/^CALL / } @blocks)
{
	my ($ret, $out, $err) = $node->psql('postgres', $block, on_error_stop => 1);
	is($ret, 0, 'a block of the document runs: ' . (split /\n/, $block)[0]) or diag($err);
}
ok(defined $call, 'the document shows the completer called');

# The Python handler's last transaction, which the workers below follow:
# the finish, the fencing check, comes before the receipt
my ($python) = $text =~ /^```python\n(.*?def charge_order\b.*?)^```$/ms;
ok(defined $python, 'the document shows the Python handler');
my ($last) = ($python // '') =~ /with conn\.transaction\(\):\n(.*)\z/s;
like($last // '', qr/idempotent_finish.*INSERT INTO receipts/s,
	'the Python handler finishes before it writes the receipt');

# A worker runs the steps as the Python handler of the document does, one
# transaction each, through its own session, and is killed (its backend
# terminated, its open transaction rolled back) once it has run $budget
# statements.  A worker that starts afresh runs: 1 begin, 2 the customer
# call, 3 its recovery point, 4 the charge call, 5 its recovery point, 6 the
# finish (in the last transaction, not yet committed), 7 the receipt and
# commit; one that takes over skips the steps before its recovery point.
my $admin = $node->background_psql('postgres');

sub worker
{
	my ($key, $budget) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my $state = q{(SELECT recovery_state FROM idempotency.lookup('KEY', 'payments'))} =~ s/KEY/$key/r;
	my ($outcome, $attempt, $point) = split /\|/, $s->query_safe(qq{
		SELECT outcome || '|' || attempt || '|' || coalesce(recovery_point, '')
		  FROM idempotency.idempotent_begin('$key', 'payments', '{"amount": 10}', lease => '1 hour', external => true)});
	my @steps;
	if ($outcome eq 'execute')
	{
		push @steps,
		  qq{SELECT call_provider('$provider', 'customer', '$key/customer') AS id \\gset},
		  qq{SELECT idempotency.idempotent_checkpoint('$key', 'customer_created',
				 jsonb_build_object('customer', :'id'), 'payments', $attempt)}
		  if $point eq '';
		push @steps,
		  qq{SELECT call_provider('$provider', 'charge', '$key/charge') AS id \\gset},
		  qq{SELECT idempotency.idempotent_checkpoint('$key', 'charged',
				 $state || jsonb_build_object('charge', :'id'), 'payments', $attempt)}
		  if $point ne 'charged';
		push @steps,
		  qq{BEGIN; SELECT idempotency.idempotent_finish('$key',
				 jsonb_build_object('charge', $state ->> 'charge'), 'payments', attempt => $attempt)},
		  qq{INSERT INTO receipts SELECT '$key', $state ->> 'charge'; COMMIT};
	}
	my $ran = 1;
	while (@steps && $ran < $budget)
	{
		$s->query_safe(shift @steps);
		$ran++;
	}
	if (@steps)
	{
		$admin->query_safe("SELECT pg_terminate_backend($pid, 60000)");
		eval { $s->quit; };
	}
	else
	{
		$s->quit;
	}
	return { outcome => $outcome, point => $point };
}

# the lease of every claim still processing runs out
sub leases_run_out
{
	$admin->query_safe(q{UPDATE idempotency.registry SET lease_until = now() - interval '1 second'
						  WHERE status = 'processing'});
}

my %expected_point = (0 => '', 1 => '', 2 => 'customer_created', 3 => 'customer_created',
	4 => 'charged', 5 => 'charged');
my %expected_calls = (
	0 => [ 1, 1 ], 1 => [ 2, 1 ], 2 => [ 1, 1 ], 3 => [ 1, 2 ], 4 => [ 1, 1 ], 5 => [ 1, 1 ],
	6 => [ 1, 1 ]);
my @requests;

# killed after every step, recovered by a client's retry
foreach my $k (0 .. 6)
{
	my $key = "retry-$k";
	push @requests, [ $key, $k ];
	worker($key, $k + 1);
	next if $k == 6;
	leases_run_out();
	my $answer = worker($key, 99);
	is("$answer->{outcome} $answer->{point}", "execute $expected_point{$k}",
		"killed after step $k: the retry resumes from the last recovery point");
}

# killed after every step, recovered by the completer
foreach my $k (0 .. 5)
{
	my $key = "completer-$k";
	push @requests, [ $key, $k ];
	worker($key, $k + 1);
}
# killed twice: after the customer's recovery point, then, taken over,
# after the charge call
push @requests, [ 'twice', 3 ];
worker('twice', 3);
leases_run_out();
worker('twice', 2);

leases_run_out();
is($node->safe_psql('postgres',
		q{SELECT string_agg(key || '=' || coalesce(recovery_point, '-'), ' ' ORDER BY key)
		    FROM idempotency.my_stalled_claims}),
	'completer-0=- completer-1=- completer-2=customer_created completer-3=customer_created '
	  . 'completer-4=charged completer-5=charged twice=customer_created',
	'the stalled claims and their recovery points');

# the reference completer, as the document calls it, with this provider
(my $completer_call = $call) =~ s/'dbname=provider'/'$provider'/;
my ($ret, $out, $err) = $node->psql('postgres', $completer_call);
is($ret, 0, 'the completer runs') or diag($err);
unlike($err, qr/WARNING/, 'the completer completes every claim');

# what every request came to
foreach my $r (@requests)
{
	my ($key, $k) = @$r;
	is($node->safe_psql('postgres', qq{SELECT status FROM idempotency.lookup('$key', 'payments')}),
		'completed', "$key: completed");
	is($node->safe_psql('postgres', qq{SELECT count(*) FROM receipts WHERE order_key = '$key'}),
		'1', "$key: one receipt");
	is($node->safe_psql('provider', qq{
			SELECT count(*) FILTER (WHERE operation = 'customer') || ' ' || count(*) FILTER (WHERE operation = 'charge')
			  FROM provider_objects WHERE idempotency_key LIKE '$key/%'}),
		'1 1', "$key: one customer and one charge at the provider");
	my $calls = $key eq 'twice' ? [ 1, 2 ] : $expected_calls{$k};
	is($node->safe_psql('provider', qq{
			SELECT count(*) FILTER (WHERE operation = 'customer') || ' ' || count(*) FILTER (WHERE operation = 'charge')
			  FROM provider_calls WHERE idempotency_key LIKE '$key/%'}),
		"$calls->[0] $calls->[1]",
		"$key: only the step in flight when its worker died was called again");
}
# A worker whose claim was taken over and finished by its successor, running
# the document's SQL handler to its end, is stopped by the finish's fence
# (IK004), not by the successor's receipt (23505), and changes nothing.
my $stale = $node->safe_psql('postgres', q{
	SELECT attempt FROM idempotency.idempotent_begin('stale', 'payments', external => true)});
leases_run_out();
my $successor = $node->safe_psql('postgres', q{
	SELECT attempt FROM idempotency.idempotent_begin('stale', 'payments', external => true)});
$node->safe_psql('postgres', qq{
	SELECT charge_order_steps('stale', 'payments', $successor, NULL, NULL, '$provider')});
my $charged = $node->safe_psql('postgres',
	q{SELECT recovery_state FROM idempotency.lookup('stale', 'payments')});
($ret, $out, $err) = $node->psql('postgres', qq{
	\\set VERBOSITY verbose
	SELECT charge_order_steps('stale', 'payments', $stale, 'charged', '$charged', '$provider')});
like($err, qr/ERROR:  IK004: attempt $stale of idempotency key "stale" in scope "payments"/,
	'a worker whose claim was taken over is stopped by the finish (IK004)');
unlike($err, qr/23505/, 'not by the receipt its successor wrote');
is($node->safe_psql('postgres', q{SELECT count(*) FROM receipts WHERE order_key = 'stale'}),
	'1', 'the taken-over worker wrote no receipt');

is($node->safe_psql('postgres', q{
		SELECT count(*) FROM idempotency.registry WHERE status <> 'completed'}),
	'0', 'nothing is left processing');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.my_stalled_claims}),
	'0', 'nothing is left stalled');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.claim_stalled()}),
	'0', 'the completer finds nothing more');

$admin->quit;
$node->stop;
done_testing();
