# Hostile installation against the background worker: a
# role that is not superuser but owns a database plants a schema named
# idempotency with a cleanup(integer) that makes it superuser, and a
# search_path for every session in its database full of look-alikes.
# CREATE EXTENSION refuses the planted schema; once installed, the worker
# (the bootstrap superuser) cleans through the extension's own code and
# never runs anything planted; and if a superuser renamed the extension's
# schema and the attacker put its own in its place, the worker refuses to
# run and says why in cleanup_status.  test/regress/sql/extension_hostile.sql does the same
# against the SQL API.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('hostile');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = '1s'
idempotency.cleanup_batch_size = 100
});
$node->start;

# the attacker owns the database "shop"; what it plants logs every call
$node->safe_psql('postgres', q{
	CREATE ROLE mallory LOGIN;
	CREATE DATABASE shop OWNER mallory;
});
my $plant = q{
	CREATE FUNCTION %1$s.cleanup(integer) RETURNS bigint LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO public.planted_calls VALUES ('%1$s.cleanup(integer)');
		ALTER ROLE mallory SUPERUSER;
		RETURN 0;
	END $$;
	CREATE FUNCTION %1$s.cleanup() RETURNS bigint LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO public.planted_calls VALUES ('%1$s.cleanup()');
		ALTER ROLE mallory SUPERUSER;
		RETURN 0;
	END $$;
	CREATE FUNCTION %1$s.texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO public.planted_calls VALUES ('%1$s.= (text, text)');
		RETURN true;
	END $$;
	CREATE OPERATOR %1$s.= (LEFTARG = text, RIGHTARG = text, FUNCTION = %1$s.texteq);
	CREATE TABLE %1$s.registry (owner text, scope text, key text, expires_at timestamptz);
	CREATE TABLE %1$s.inbox (owner text, consumer text, message_id text, expires_at timestamptz);
};
sub plant_sql
{
	my ($schema) = @_;
	return sprintf($plant, $schema);
}

sub planted_calls
{
	return $node->safe_psql('shop', 'SELECT count(*) FROM public.planted_calls');
}

sub mallory_is_superuser
{
	return $node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'});
}

$node->safe_psql('shop', q{
	CREATE TABLE public.planted_calls (what text);
	GRANT INSERT ON public.planted_calls TO PUBLIC;
}, extra_params => ['-U', 'mallory']);
$node->safe_psql('shop', 'CREATE SCHEMA idempotency;' . plant_sql('idempotency'),
	extra_params => ['-U', 'mallory']);

# CREATE EXTENSION refuses the planted schema
my ($ret, $out, $err) = $node->psql('shop', 'CREATE EXTENSION idempotency');
isnt($ret, 0, 'CREATE EXTENSION refuses a schema idempotency that it did not create');
like($err, qr/schema "idempotency" already exists.*\n.*It is owned by role "mallory", not by extension "idempotency".*\n.*HINT:  Drop or rename it; the extension must create its own schema\./,
	'and says whose schema it is and what to do');

# the attacker moves its schema aside; now the extension creates its own.
# Every session in "shop", the worker's included, gets a search_path that
# puts the attacker's look-alikes first.
$node->safe_psql('shop', q{
	ALTER SCHEMA idempotency RENAME TO lookalikes;
	ALTER DATABASE shop SET search_path = lookalikes, public;
}, extra_params => ['-U', 'mallory']);
$node->safe_psql('shop', 'CREATE EXTENSION idempotency');
is($node->safe_psql('shop', q{SELECT nspowner = 'mallory'::regrole FROM pg_namespace WHERE nspname = 'idempotency'}),
	'f', 'the extension\'s schema is not the attacker\'s');
$node->safe_psql('shop', plant_sql('public'), extra_params => ['-U', 'mallory']);

# nor can the attacker rename the extension's schema, or put a cleanup in it
($ret, $out, $err) = $node->psql('shop', 'ALTER SCHEMA idempotency RENAME TO mine',
	extra_params => ['-U', 'mallory']);
like($err, qr/must be owner of schema idempotency/, 'the attacker cannot rename the extension\'s schema');
($ret, $out, $err) = $node->psql('shop', plant_sql('idempotency'), extra_params => ['-U', 'mallory']);
like($err, qr/permission denied for schema idempotency/, 'nor create anything in it');

# the worker cleans with the extension's own code, through all of that
$node->safe_psql('shop', q{
	SELECT count(idempotency.idempotent_begin(('old-' || i)::idempotency.key, ttl => '1 hour', external => true))
	  FROM generate_series(1, 150) AS i;
	UPDATE idempotency.registry SET expires_at = now() - interval '1 minute';
	SELECT idempotency.inbox_receive('billing', 'm1');
	UPDATE idempotency.inbox SET expires_at = now() - interval '1 minute';
});
ok($node->poll_query_until('shop',
		q{SELECT (SELECT count(*) FROM idempotency.registry) + (SELECT count(*) FROM idempotency.inbox) = 0}),
	'the worker cleans the database of the attacker');
ok($node->poll_query_until('shop',
		q{SELECT total_deleted >= 151 AND last_error IS NULL FROM idempotency.cleanup_status WHERE datname = 'shop'}),
	'cleanup_status counts its rows, without error');
is(planted_calls(), '0', 'no look-alike ran');
is($node->safe_psql('shop', q{
	SELECT (SELECT count(*) FROM lookalikes.registry) + (SELECT count(*) FROM public.registry)
	     + (SELECT count(*) FROM lookalikes.inbox) + (SELECT count(*) FROM public.inbox)}),
	'0', 'no look-alike table received anything');
is(mallory_is_superuser(), 'f', 'the attacker is not superuser');

# The escalation through the worker, had a superuser renamed the extension's schema:
# the attacker creates a new "idempotency" with a cleanup(integer) that
# makes it superuser.  The worker refuses to run, and says why.
$node->safe_psql('shop', 'ALTER SCHEMA idempotency RENAME TO idempotency_real');
$node->safe_psql('shop', 'CREATE SCHEMA idempotency;' . plant_sql('idempotency'),
	extra_params => ['-U', 'mallory']);
# an expired record the worker would delete, were it willing
$node->safe_psql('shop', q{
	INSERT INTO idempotency_real.registry (owner, scope, key, status, attempt, created_at, updated_at, expires_at)
	VALUES ('someone', '', 'expired-1', 'completed', 1, now(), now(), now() - interval '1 minute');
});
ok($node->poll_query_until('shop',
		q{SELECT failures >= 1 AND last_error = 'schema "idempotency" does not belong to extension "idempotency"'
		    FROM idempotency_real.cleanup_status WHERE datname = 'shop'}),
	'the worker refuses to run when the schema named idempotency is not the extension\'s, and says so in cleanup_status');
ok($node->log_contains(qr/ERROR:  schema "idempotency" does not belong to extension "idempotency"/),
	'and in the log');
is(planted_calls(), '0', 'the planted cleanup(integer) never ran');
is(mallory_is_superuser(), 'f', 'the attacker is not superuser');
is($node->safe_psql('shop', 'SELECT count(*) FROM idempotency_real.registry'), '1',
	'the expired record is still there');

# the schemas put back: the worker cleans again
$node->safe_psql('shop', 'DROP SCHEMA idempotency CASCADE', extra_params => ['-U', 'mallory']);
$node->safe_psql('shop', 'ALTER SCHEMA idempotency_real RENAME TO idempotency');
ok($node->poll_query_until('shop', q{SELECT count(*) = 0 FROM idempotency.registry}),
	'once the extension\'s schema has its name back, the worker cleans');
ok($node->poll_query_until('shop',
		q{SELECT failures = 0 AND last_error IS NULL FROM idempotency.cleanup_status WHERE datname = 'shop'}),
	'and cleanup_status clears the failure');
is(planted_calls(), '0', 'no look-alike ran at any point');
is(mallory_is_superuser(), 'f', 'the attacker never became superuser');

$node->stop;
done_testing();
