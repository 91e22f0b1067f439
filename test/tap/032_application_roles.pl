# Which role records belong to, decided by what grant_usage() wrote, kept by
# dump and restore and by updates, and never lost to an ordinary operation:
#
# - a dump of the previous release restored into this one (pg_restore loses
#   the one grant on idempotent_begin, whose arguments changed in 1.1): the
#   application's logins are refused (IK008) instead of each being an owner
#   of its own that finds none of the application's records, until
#   grant_usage() is run again; restored with --single-transaction into the
#   previous release's objects (CREATE EXTENSION ... VERSION first, as
#   doc/operations.md says) and then updated, every record is the
#   application's at once;
# - an administrator who revokes idempotent_begin from a consumer-only role:
#   every login of it, rotated or not, stays the consumer and its inbox
#   turns away what an earlier login processed;
# - a role holding part of the API that is no application role is refused
#   in autocommit, in a transaction, under a savepoint and in a PL/pgSQL
#   EXCEPTION block, and what the transaction does besides commits;
# - a dump of this release restored into it keeps the application roles.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('approles');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
});
$node->start;
my $dir = PostgreSQL::Test::Utils::tempdir;

# as(role, db, sql): run as a login role
sub as
{
	my ($role, $db, $sql) = @_;
	return $node->safe_psql($db, $sql, extra_params => [ '-U', $role ]);
}

# as_err(role, db, sql): the SQLSTATE a statement fails with, or 'ok'
sub as_err
{
	my ($role, $db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, "\\set VERBOSITY sqlstate\n$sql",
		extra_params => [ '-U', $role ]);
	return 'ok' if $ret == 0;
	return $err =~ /^(?:ERROR|psql:.*ERROR):\s+([0-9A-Z]{5})/m ? $1 : "unparsed: $err";
}

# what an application made under the previous release
$node->safe_psql('postgres', q{
	CREATE ROLE app NOLOGIN;
	CREATE ROLE app_login1 LOGIN IN ROLE app;
	CREATE ROLE consumer NOLOGIN;
	CREATE ROLE consumer_login1 LOGIN IN ROLE consumer;
	CREATE DATABASE v10;
});
$node->safe_psql('v10', q{
	CREATE EXTENSION idempotency VERSION '1.0';
	SELECT idempotency.grant_usage('app');
});
as('app_login1', 'v10', q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('pay-1', 'payments', '{"amount": 10}');
	SELECT idempotency.idempotent_finish('pay-1', '{"charged": 10}', 'payments');
	COMMIT;
	SELECT idempotency.inbox_receive('billing', 'msg-1');
	SELECT idempotency.outbox_send('shipments', '{"order": 1}', 'ORD-1');
});
my $token = as('app_login1', 'v10', q{SELECT idempotency.issue_token('checkout')});
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('v10'), '-f', "$dir/v10.dump" ],
	'pg_dump of the previous release');

# what the application sees of its records in a database
sub app_sees
{
	my ($db) = @_;
	return as('app_login1', $db, qq{
		SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('pay-1', 'payments', '{"amount": 10}', external => true);
		SELECT idempotency.inbox_receive('billing', 'msg-1');
		SELECT count(*) FROM idempotency.my_outbox;
		SELECT idempotency.consume_token('$token', 'checkout');
	});
}

# restored as it is: the grant on the previous idempotent_begin fails
$node->safe_psql('postgres', 'CREATE DATABASE plain');
my $rc = system('pg_restore', '-d', $node->connstr('plain'), "$dir/v10.dump");
isnt($rc, 0, 'pg_restore of the previous release\'s dump reports the grant it cannot restore');
is($node->safe_psql('plain', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
	'1.2', 'the restore created the extension at the new version');
is($node->safe_psql('plain', q{SELECT count(*) FROM idempotency.registry}), '1',
	'the records are restored');
is(as_err('app_login1', 'plain', q{SELECT idempotency.inbox_receive('billing', 'msg-1')}), 'IK008',
	'a login of the application is refused, not made an owner of its own that would process msg-1 again');
is(as_err('app_login1', 'plain', q{SELECT * FROM idempotency.lookup('pay-1', 'payments')}), 'IK008',
	'and so is a lookup of a completed key');
is(as_err('app_login1', 'plain', qq{SELECT idempotency.consume_token('$token', 'checkout')}), 'IK008',
	'and a token');
$node->safe_psql('plain', q{SELECT idempotency.grant_usage('app')});
is(app_sees('plain'), "replay {\"charged\": 10}\nf\n1\nt",
	'after grant_usage, the key replays, the message is a redelivery, the outbox and the unused token are the application\'s');

# --single-transaction into the previous release's objects, then updated
$node->safe_psql('postgres', 'CREATE DATABASE single');
$node->safe_psql('single', q{CREATE EXTENSION idempotency VERSION '1.0'});
$node->command_ok([ 'pg_restore', '--single-transaction', '--exit-on-error', '-d', $node->connstr('single'),
	"$dir/v10.dump" ], 'pg_restore --single-transaction into the previous release\'s objects');
$node->safe_psql('single', 'ALTER EXTENSION idempotency UPDATE');
is($node->safe_psql('single', q{SELECT string_agg(role_name, ',') FROM idempotency.application_roles}),
	'app', 'the update records the roles grant_usage was given to');
is(app_sees('single'), "replay {\"charged\": 10}\nf\n1\nt",
	'with nothing done by hand, every record is the application\'s');

# --single-transaction into a new installation restores nothing, and says so
$node->safe_psql('postgres', 'CREATE DATABASE single_new');
$rc = system('pg_restore', '--single-transaction', '-d', $node->connstr('single_new'), "$dir/v10.dump");
isnt($rc, 0, '--single-transaction into the new version fails on the grant');
is($node->safe_psql('single_new', q{SELECT count(*) FROM pg_extension WHERE extname = 'idempotency'}),
	'0', 'and restores nothing, the extension included');

# least privilege: a consumer that may not claim keys keeps its records
# across its logins
$node->safe_psql('single', q{
	SELECT idempotency.grant_usage('consumer');
	REVOKE EXECUTE ON FUNCTION idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean) FROM consumer;
});
is(as('consumer_login1', 'single', q{SELECT idempotency.inbox_receive('orders', 'evt-1')}), 't',
	'the first login processes evt-1');
$node->safe_psql('postgres', q{CREATE ROLE consumer_login2 LOGIN IN ROLE consumer});
is(as('consumer_login2', 'single', q{SELECT idempotency.inbox_receive('orders', 'evt-1')}), 'f',
	'the next login of the consumer turns evt-1 away');
is(as('consumer_login2', 'single', q{SELECT idempotency.owner_name()}), 'consumer',
	'its records are the consumer\'s');
is(as_err('consumer_login2', 'single', q{SELECT * FROM idempotency.idempotent_begin('k')}), '42501',
	'it may not claim keys');

# a role that holds part of the API but is no application role
$node->safe_psql('postgres', q{CREATE ROLE stray LOGIN});
$node->safe_psql('single', q{
	GRANT EXECUTE ON FUNCTION idempotency.inbox_receive(text, text, interval) TO stray;
	CREATE TABLE public.effects (what text);
	GRANT INSERT, SELECT ON public.effects TO stray;
});
is(as_err('stray', 'single', q{SELECT idempotency.inbox_receive('orders', 'evt-1')}), 'IK008',
	'refused in autocommit');
is(as_err('stray', 'single', q{BEGIN; SELECT idempotency.inbox_receive('orders', 'evt-1'); COMMIT;}), 'IK008',
	'refused in a transaction');
is(as('stray', 'single', q{
	BEGIN;
	INSERT INTO public.effects VALUES ('before');
	SAVEPOINT s;
	\set ON_ERROR_STOP 0
	SELECT idempotency.inbox_receive('orders', 'evt-1');
	ROLLBACK TO SAVEPOINT s;
	INSERT INTO public.effects VALUES ('after');
	COMMIT;
	SELECT string_agg(what, ',' ORDER BY what) FROM public.effects;
}), 'after,before', 'refused under a savepoint, and the rest of the transaction commits');
is(as('stray', 'single', q{
	DO $$
	BEGIN
		BEGIN
			PERFORM idempotency.inbox_receive('orders', 'evt-1');
		EXCEPTION WHEN SQLSTATE 'IK008' THEN
			INSERT INTO public.effects VALUES ('caught');
		END;
	END $$;
	SELECT count(*) FROM public.effects WHERE what = 'caught';
}), '1', 'refused in a PL/pgSQL EXCEPTION block, which catches IK008');
is($node->safe_psql('single', q{SELECT count(*) FROM idempotency.inbox WHERE owner = 'stray'}), '0',
	'nothing was stored under its name');
$node->safe_psql('single', q{SELECT idempotency.grant_usage('stray')});
is(as('stray', 'single', q{SELECT idempotency.inbox_receive('orders', 'evt-1')}), 't',
	'once grant_usage was given to it, it is an application of its own');

# this release's dump keeps the application roles
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('single'), '-f', "$dir/v12.dump" ],
	'pg_dump of this release');
$node->safe_psql('postgres', 'CREATE DATABASE again');
$node->command_ok([ 'pg_restore', '--single-transaction', '--exit-on-error', '-d', $node->connstr('again'),
	"$dir/v12.dump" ], 'restored with --single-transaction');
is($node->safe_psql('again', q{SELECT string_agg(role_name, ',' ORDER BY role_name) FROM idempotency.application_roles}),
	'app,consumer,stray', 'the application roles are restored');
is(as('consumer_login2', 'again', q{SELECT idempotency.inbox_receive('orders', 'evt-1')}), 'f',
	'the consumer\'s logins still turn evt-1 away');

done_testing();
