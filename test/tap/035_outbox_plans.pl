# The relay's statements on an outbox that has never been analyzed: a backlog
# that arrived in a burst (or while the relays were down) before autovacuum
# got to it.  Without statistics the planner guesses that few messages are
# undelivered and few are the owner's; a statement that offers it the index
# of undelivered messages by owner is then planned as a bitmap scan of all
# the owner's undelivered messages, for every batch fetched and every
# acknowledgement.  The fetch's and the acknowledgement's UPDATEs must find
# their rows by ctid (a TID scan), whatever the table's statistics, with
# custom plans and with the generic plan.  The plans are read with
# auto_explain, which shows the statements the functions run.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('outbox_plans');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
autovacuum = off
});
$node->start;

my $messages = 100000;
$node->safe_psql('postgres', qq{
CREATE EXTENSION idempotency;
SELECT count(idempotency.outbox_send('orders', jsonb_build_object('n', g), 'key-' || g % 1000))
  FROM generate_series(1, $messages) AS g;
});
is($node->safe_psql('postgres', q{
SELECT count(*) FROM pg_catalog.pg_statistic
 WHERE starelid = 'idempotency.outbox'::pg_catalog.regclass}),
	'0', 'the outbox has no statistics');

# relay BATCHES batches of 100 under plan_cache_mode MODE; returns the
# notices (the plans) and checks that every batch was acknowledged whole
sub relay
{
	my ($mode, $batches) = @_;
	my $relay = q{
SELECT idempotency.outbox_ack(b.attempt, b.ids)
  FROM (SELECT max(f.attempt) AS attempt, array_agg(f.message_id) AS ids
		  FROM idempotency.outbox_fetch(100, '1 minute') AS f) AS b;
} x $batches;
	my ($stdout, $stderr);
	$node->psql(
		'postgres', qq{
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_level = notice;
SET plan_cache_mode = $mode;
$relay},
		stdout => \$stdout,
		stderr => \$stderr,
		on_error_die => 1);
	is($stdout, join("\n", ('100') x $batches), "$mode: $batches batches of 100 relayed");
	return $stderr;
}

# the plans of the statements whose text matches $re
sub plans_of
{
	my ($notices, $re) = @_;
	return grep { /Query Text: [^\n]*$re/ } split /NOTICE:  duration: /, $notices;
}

foreach my $mode ('force_custom_plan', 'force_generic_plan', 'auto')
{
	my $notices = relay($mode, 7);
	my @fetch = plans_of($notices, qr/WITH RECURSIVE heads/);
	my @ack = plans_of($notices, qr/SET delivered_at = \$4/);
	is(scalar @fetch, 7, "$mode: the fetch's plans were logged");
	is(scalar @ack, 7, "$mode: the acknowledgement's plans were logged");
	foreach my $plan (@fetch, @ack)
	{
		my $what = $plan =~ /WITH RECURSIVE/ ? 'fetch' : 'acknowledgement';
		like($plan, qr/Tid Scan on outbox o\s/, "$mode: the $what updates by ctid");
		unlike($plan, qr/Bitmap Index Scan on outbox_pending_idx/,
			"$mode: the $what scans no range of the undelivered messages' index");
		unlike($plan, qr/Index Cond: \(owner = (?:\$1|'[^']*'::text)\)\s*\n/,
			"$mode: the $what has no index condition on the owner alone");
	}
	foreach my $plan (@ack)
	{
		like($plan, qr/on outbox_pkey/, "$mode: the acknowledgement finds the ids in the primary key");
	}
}

is($node->safe_psql('postgres', q{
SELECT count(*) FROM idempotency.outbox WHERE delivered_at IS NOT NULL}),
	'2100', 'every message handed out was acknowledged');

$node->stop;
done_testing();
