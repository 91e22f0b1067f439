# This version's library with the SQL objects of 1.0, as between a package
# upgrade and ALTER EXTENSION ... UPDATE: begin, finish, a take-over, lookup,
# my_records, the inbox, tokens, the outbox, cleanup() and the cleanup worker
# all work on the 1.0 registry, which lacks the recovery columns; the entry
# points of recovery points refuse with 55000 and the hint to update.  Then
# the extension is updated from another session while a pooled session stays
# connected, and that session records recovery points, renews a lease and
# takes over a claim with its recovery point, without reconnecting.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('before_update');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = '1s'
});
$node->start;

$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE EXTENSION idempotency VERSION '1.0';
	SELECT idempotency.grant_usage('app');
});
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
	'1.0', 'the 1.0 SQL objects are installed');

# the pooled session: connected as the application before anything below
my $pooled = $node->background_psql('postgres', on_error_stop => 0);
$pooled->query_safe('SET ROLE app');
is($pooled->query_safe(q{SELECT outcome FROM idempotency.idempotent_begin('pooled-1', lease => '1 hour')}),
	'execute', 'the pooled session claims a key on 1.0');

sub app_sql
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SET ROLE app;\n$sql");
}

# begin and finish, in one transaction and in two
is(app_sql(q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('one', 'pay', '{"amount": 1}');
	SELECT idempotency.idempotent_finish('one', '{"charged": 1}', 'pay');
	COMMIT;
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('one', 'pay', '{"amount": 1}');
}), "execute\ncompleted\nreplay {\"charged\": 1}", 'begin, finish and a replay on 1.0');
is(app_sql(q{
	SELECT outcome FROM idempotency.idempotent_begin('two', 'pay');
	SELECT idempotency.idempotent_finish('two', '{"charged": 2}', 'pay',
		attempt => (SELECT attempt FROM idempotency.my_records WHERE key = 'two'));
}), "execute\ncompleted",
	'on 1.0 a claim taken in autocommit commits on its own, and a later transaction finishes it with its attempt');

# a take-over of a lapsed lease
app_sql(q{SELECT idempotency.idempotent_begin('lapsed', 'pay')});
$node->safe_psql('postgres',
	q{UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'lapsed'});
is(app_sql(q{SELECT outcome || ' ' || previous_end FROM idempotency.idempotent_begin('lapsed', 'pay')}),
	'execute lease_expired', 'a take-over on 1.0');
is(app_sql(q{SELECT count(*) FROM pg_proc p, unnest(p.proargnames) AS a
			  WHERE p.oid = 'idempotency.idempotent_begin'::regproc AND a = 'recovery_point'}),
	'0', 'the 1.0 begin has no recovery_point column');

# lookup and my_records
is(app_sql(q{SELECT found::text || ' ' || status FROM idempotency.lookup('two', 'pay')}),
	'true completed', 'lookup on 1.0');
is(app_sql(q{SELECT string_agg(key || ':' || status, ',' ORDER BY key) FROM idempotency.my_records}),
	'lapsed:processing,one:completed,pooled-1:processing,two:completed', 'my_records on 1.0');

# the inbox, tokens and the outbox
is(app_sql(q{
	SELECT idempotency.inbox_receive('billing', 'm-1');
	SELECT idempotency.inbox_receive('billing', 'm-1');
}), "t\nf", 'the inbox on 1.0');
is(app_sql(q{
	SELECT idempotency.issue_token('pay') AS t \gset
	SELECT idempotency.consume_token(:'t', 'pay');
	SELECT idempotency.consume_token(:'t', 'pay');
}), "t\nf", 'tokens on 1.0');
is(app_sql(q{
	SELECT idempotency.outbox_send('orders', '{"id": 1}', message_id => 'o-1');
	SELECT count(*) FROM idempotency.outbox_fetch(10);
}), "o-1\n1", 'the outbox on 1.0');
is(app_sql(q{
	SELECT idempotency.outbox_ack(f.attempt, ARRAY[f.message_id]) FROM idempotency.outbox_fetch(10, '1 second') AS f;
}), '', 'outbox_ack on 1.0 (nothing left to fetch while leased)');

# cleanup() by hand and the cleanup worker
$node->safe_psql('postgres', q{
	UPDATE idempotency.registry SET expires_at = now() - interval '1 second', attempt = attempt - 100
	 WHERE key = 'one';
});
is($node->safe_psql('postgres', q{SELECT idempotency.cleanup()}), '1', 'cleanup() on 1.0');
$node->safe_psql('postgres', q{
	UPDATE idempotency.registry SET expires_at = now() - interval '1 second', attempt = attempt - 100
	 WHERE key = 'two';
});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idempotency.registry WHERE key = 'two'}),
	'the cleanup worker deletes an expired record on 1.0');

# the new entry points refuse until the update: their SQL functions do not
# exist yet, and a declaration made by hand reaches the library's check
my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT idempotency.idempotent_checkpoint('lapsed', 'step', scope => 'pay')});
like($err, qr/function idempotency\.idempotent_checkpoint.*does not exist/,
	'idempotent_checkpoint does not exist on 1.0');
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.checkpoint_by_hand(text, text, jsonb, text, int4) RETURNS text
		AS '$libdir/idempotency', 'idempotency_idempotent_checkpoint' LANGUAGE C;
	CREATE FUNCTION public.renew_by_hand(text, interval, text, int4) RETURNS timestamptz
		AS '$libdir/idempotency', 'idempotency_idempotent_renew' LANGUAGE C;
});
foreach my $call (
	q{SELECT public.checkpoint_by_hand('lapsed', 'step', NULL, 'pay', NULL)},
	q{SELECT public.renew_by_hand('lapsed', '1 minute', 'pay', NULL)})
{
	($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$call");
	like($err, qr/ERROR:  55000: (recording a recovery point|renewing a lease) needs version "1\.1" of extension "idempotency".*DETAIL:  The extension's SQL objects are version "1\.0"\..*HINT:  Run ALTER EXTENSION idempotency UPDATE\./s,
		"refused with 55000 and the hint to update: $call");
}
$node->safe_psql('postgres',
	'DROP FUNCTION public.checkpoint_by_hand(text, text, jsonb, text, int4), public.renew_by_hand(text, interval, text, int4)');

# the pooled session is still on 1.0 objects; another session updates
is($pooled->query_safe(q{SELECT outcome FROM idempotency.idempotent_begin('pooled-2')}),
	'execute', 'the pooled session works before the update');
$node->safe_psql('postgres', 'ALTER EXTENSION idempotency UPDATE');
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
	'1.2', 'the extension is updated');

# the pooled session, without reconnecting: a begin shows the recovery
# columns, and recovery points, renewals and take-overs work
is($pooled->query_safe(q{
	SELECT outcome || ' ' || coalesce(recovery_point, 'none')
	  FROM idempotency.idempotent_begin('pooled-3', lease => '1 hour', external => true)}),
	'execute none', 'the pooled session begins with the updated function');
is($pooled->query_safe(q{
	SELECT idempotency.idempotent_checkpoint('pooled-1', 'customer_created', '{"customer": "c_1"}',
		attempt => (SELECT attempt FROM idempotency.my_records WHERE key = 'pooled-1'))}),
	'customer_created', 'the pooled session records a recovery point of a claim taken on 1.0');
is($pooled->query_safe(q{
	SELECT idempotency.idempotent_renew('pooled-1', '2 hours',
		attempt => (SELECT attempt FROM idempotency.my_records WHERE key = 'pooled-1'))
		> now() + interval '90 minutes'}),
	't', 'the pooled session renews a lease');
$node->safe_psql('postgres',
	q{UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'pooled-1'});
is($pooled->query_safe(q{
	SELECT outcome || ' ' || recovery_point || ' ' || (recovery_state ->> 'customer')
	  FROM idempotency.idempotent_begin('pooled-1', external => true)}),
	'execute customer_created c_1', 'a take-over in the pooled session resumes from the recovery point');
is($pooled->query_safe(q{
	SELECT recovery_point FROM idempotency.lookup('pooled-1')}),
	'customer_created', 'lookup shows the recovery point');
is($pooled->query_safe(q{
	SELECT idempotency.idempotent_finish('pooled-1', '{"done": true}',
		attempt => (SELECT attempt FROM idempotency.my_records WHERE key = 'pooled-1'))}),
	'completed', 'the take-over finishes');
# records made on 1.0 read with the new columns NULL
is($pooled->query_safe(q{
	SELECT string_agg(key || ':' || coalesce(recovery_point, '-'), ',' ORDER BY key) FROM idempotency.my_records}),
	'lapsed:-,pooled-1:customer_created,pooled-2:-,pooled-3:-', 'my_records shows the recovery points');
$pooled->quit;

$node->stop;
done_testing();
