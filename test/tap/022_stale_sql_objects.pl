# A library newer than the SQL objects installed in a database: what runs
# between a package upgrade and ALTER EXTENSION ... UPDATE.  Three ways the
# catalog can be another version's: functions declared with fewer arguments
# than the library reads, an extversion that is not the library's, and the
# layout of an earlier build (the schema created by CREATE EXTENSION, not by
# the install script).  In each, idempotent_begin, idempotent_finish,
# idempotent_abandon and inbox_receive refuse with 55000 and the hint to
# update the extension (in autocommit, in a transaction, under a savepoint
# and in a PL/pgSQL EXCEPTION block), the server stays up, and the cleanup
# worker logs the reason once and skips the database without failing.  Once
# the catalog is put back, everything works again, the cleanup included.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stale');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = '1s'
});
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('done-1');
	SELECT idempotency.idempotent_finish('done-1', '{"n": 1}');
	COMMIT;
	SELECT outcome FROM idempotency.idempotent_begin('held-1', external => true);
});

# the four calls, each against a key or message that it would change
my %calls = (
	begin => q{SELECT * FROM idempotency.idempotent_begin('new-1')},
	finish => q{SELECT idempotency.idempotent_finish('held-1', '{"n": 2}')},
	abandon => q{SELECT idempotency.idempotent_abandon('held-1')},
	inbox_receive => q{SELECT idempotency.inbox_receive('billing', 'msg-1')},
);

# refused(call, message, what): the call fails with 55000, the message and the
# hint in every transaction context, and the server stays up
sub refused
{
	my ($name, $message, $what) = @_;
	my $sql = $calls{$name};
	my $plsql = $sql =~ s/^SELECT \* FROM |^SELECT /PERFORM /r;
	my %contexts = (
		'autocommit' => "$sql;",
		'a transaction' => "BEGIN; $sql; COMMIT;",
		'a savepoint' => "BEGIN; SAVEPOINT s; $sql; ROLLBACK TO SAVEPOINT s; SELECT 'usable'; COMMIT;",
		'a PL/pgSQL EXCEPTION block' => qq{DO \$\$ BEGIN $plsql;
			EXCEPTION WHEN object_not_in_prerequisite_state THEN
				RAISE NOTICE 'caught %: %', SQLSTATE, SQLERRM;
			END \$\$;},
	);
	foreach my $context (sort keys %contexts)
	{
		my ($ret, $out, $err) = $node->psql('postgres',
			"\\set VERBOSITY verbose\n" . $contexts{$context}, on_error_stop => 0);
		if ($context =~ /PL/)
		{
			like($err, qr/caught 55000: \Q$message\E/, "$what: $name is refused in $context");
		}
		else
		{
			like($err, qr/ERROR:  55000: \Q$message\E.*HINT:  Run ALTER EXTENSION idempotency UPDATE, then reconnect\./s,
				"$what: $name is refused with the hint to update in $context");
			like($out, qr/usable/, "$what: the transaction stays usable after $name under a savepoint")
			  if $context eq 'a savepoint';
		}
	}
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$what: the server is up after $name");
}

# the worker logs why it skips the database, once, and does not fail
sub worker_skips
{
	my ($message, $what, $offset) = @_;
	ok($node->wait_for_log(qr/LOG:  \Q$message\E(?:\n.*(?:DETAIL|CONTEXT).*)*\n.*HINT:  Run ALTER EXTENSION idempotency UPDATE, then reconnect\./, $offset),
		"$what: the cleanup worker logs why it skips the database");
	ok($node->poll_query_until('postgres',
			q{SELECT failures = 0 AND last_error LIKE '%' || $$} . $message . q{$$ || '%'
			    FROM idempotency.cleanup_status WHERE datname = 'postgres'}),
		"$what: cleanup_status shows the reason, and no failure");
	# a few more passes: still no failure, and the reason is logged only once
	my $seen = $node->safe_psql('postgres',
		q{SELECT last_end FROM idempotency.cleanup_status WHERE datname = 'postgres'});
	ok($node->poll_query_until('postgres',
			qq{SELECT last_end > '$seen'::timestamptz FROM idempotency.cleanup_status WHERE datname = 'postgres'}),
		"$what: the worker keeps its schedule");
	my $log = slurp_file($node->logfile, $offset);
	my $times = () = $log =~ /LOG:  \Q$message\E/g;
	is($times, 1, "$what: the reason is logged once");
	unlike($log, qr/"idempotency cleanup" \(PID \d+\) exited with exit code 1/,
		"$what: no cleanup worker failed");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM idempotency.registry'), '2',
		"$what: the worker deleted nothing");
}

# expire both records, so that the cleanup has work once it may run again
sub expire_all
{
	$node->safe_psql('postgres', q{
		UPDATE idempotency.registry SET expires_at = now() - interval '1 minute',
			   attempt = attempt - 60, lease_until = NULL});
}

#
# 1. Functions declared with fewer arguments than the library reads, as an
#    earlier script declared them.
#
my %current = (
	begin => 'idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean)',
	finish => 'idempotency.idempotent_finish(text, jsonb, text, integer, boolean, integer, bytea, interval, jsonb)',
	abandon => 'idempotency.idempotent_abandon(text, text, integer)',
	inbox_receive => 'idempotency.inbox_receive(text, text, interval)',
);
my %older = (
	begin => [ 'idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean)',
		q{idempotency.idempotent_begin(key text, scope text DEFAULT '', request jsonb DEFAULT NULL,
			ttl interval DEFAULT '24 hours', lease interval DEFAULT NULL, wait boolean DEFAULT true,
			OUT outcome text, OUT status text, OUT response jsonb, OUT attempt integer,
			OUT expires_at timestamptz) RETURNS record}, 'idempotency_idempotent_begin' ],
	finish => [ 'idempotency.idempotent_finish(text, jsonb, text, integer, boolean)',
		q{idempotency.idempotent_finish(key text, response jsonb, scope text DEFAULT '',
			attempt integer DEFAULT NULL, failed boolean DEFAULT false) RETURNS text},
		'idempotency_idempotent_finish' ],
	abandon => [ 'idempotency.idempotent_abandon(text, text)',
		q{idempotency.idempotent_abandon(key text, scope text DEFAULT '') RETURNS void},
		'idempotency_idempotent_abandon' ],
	inbox_receive => [ 'idempotency.inbox_receive(text, text)',
		q{idempotency.inbox_receive(consumer text, message_id text) RETURNS boolean},
		'idempotency_inbox_receive' ],
);
my %definition;
foreach my $name (sort keys %current)
{
	$definition{$name} = $node->safe_psql('postgres',
		"SELECT pg_get_functiondef('$current{$name}'::regprocedure)");
	my ($signature, $declaration, $symbol) = @{ $older{$name} };
	$node->safe_psql('postgres', qq{
		ALTER EXTENSION idempotency DROP FUNCTION $current{$name};
		DROP FUNCTION $current{$name};
		CREATE FUNCTION $declaration AS '\$libdir/idempotency', '$symbol' LANGUAGE C VOLATILE;
		ALTER EXTENSION idempotency ADD FUNCTION $signature;
	});
}

refused('begin', 'function idempotency.idempotent_begin(text,text,jsonb,interval,interval,boolean) does not match the library of extension "idempotency"', 'older signatures');
refused('finish', 'function idempotency.idempotent_finish(text,jsonb,text,integer,boolean) does not match the library of extension "idempotency"', 'older signatures');
refused('abandon', 'function idempotency.idempotent_abandon(text,text) does not match the library of extension "idempotency"', 'older signatures');
refused('inbox_receive', 'function idempotency.inbox_receive(text,text) does not match the library of extension "idempotency"', 'older signatures');
my (undef, undef, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$calls{finish}");
like($err, qr/DETAIL:  The function passes 5 arguments; version "1\.2" of the library takes 9\./,
	'older signatures: the detail says how many arguments each side has');

foreach my $name (sort keys %current)
{
	my ($signature) = @{ $older{$name} };
	$node->safe_psql('postgres', qq{
		ALTER EXTENSION idempotency DROP FUNCTION $signature;
		DROP FUNCTION $signature;
		$definition{$name};
		ALTER EXTENSION idempotency ADD FUNCTION $current{$name};
	});
}
is($node->safe_psql('postgres', q{
	SELECT string_agg(outcome || '/' || status, ' ' ORDER BY k)
	  FROM unnest(ARRAY['done-1', 'held-1', 'new-1']) AS k,
		   LATERAL idempotency.idempotent_begin(k, wait => false, external => true) AS b}),
	'replay/completed in_progress/processing execute/processing',
	'restored signatures: begin replays, sees the held claim and executes');
is($node->safe_psql('postgres', q{
	SELECT idempotency.idempotent_finish('held-1', '{"n": 2}', status_code => 201,
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'held-1'));
	SELECT status_code FROM idempotency.registry WHERE key = 'held-1'}),
	"completed\n201", 'restored signatures: finish stores the status code');
is($node->safe_psql('postgres', q{
	SELECT idempotency.idempotent_abandon('new-1',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'new-1'));
	SELECT status FROM idempotency.registry WHERE key = 'new-1'}),
	"\nabandoned", 'restored signatures: abandon gives up the claim');
is($node->safe_psql('postgres', q{
	SELECT idempotency.inbox_receive('billing', 'msg-1'), idempotency.inbox_receive('billing', 'msg-1')}),
	't|f', 'restored signatures: inbox_receive sees the message once');
$node->safe_psql('postgres', q{
	DELETE FROM idempotency.registry WHERE key = 'new-1';
	DELETE FROM idempotency.inbox;
});

#
# 2. Another version's SQL objects: extversion is not the library's.
#
my $offset = -s $node->logfile;
$node->safe_psql('postgres',
	q{UPDATE pg_extension SET extversion = '0.9' WHERE extname = 'idempotency'});
my $version_message = 'extension "idempotency" is installed at version "0.9", but its library is version "1.2"';
refused($_, $version_message, 'another version') foreach sort keys %calls;
expire_all();
worker_skips($version_message, 'another version', $offset);
$node->safe_psql('postgres',
	q{UPDATE pg_extension SET extversion = '1.2' WHERE extname = 'idempotency'});

#
# 3. The layout of an earlier build: the schema is the extension's namespace
#    (CREATE EXTENSION made it), not a member made by the install script.
#
$offset = -s $node->logfile;
$node->safe_psql('postgres', q{
	ALTER EXTENSION idempotency DROP SCHEMA idempotency;
	UPDATE pg_extension SET extnamespace = 'idempotency'::regnamespace WHERE extname = 'idempotency';
});
my $layout_message = 'the SQL objects of extension "idempotency" were installed by an earlier build';
refused($_, $layout_message, 'an earlier layout') foreach sort keys %calls;
worker_skips($layout_message, 'an earlier layout', $offset);
$node->safe_psql('postgres', q{
	UPDATE pg_extension SET extnamespace = 'pg_catalog'::regnamespace WHERE extname = 'idempotency';
	ALTER EXTENSION idempotency ADD SCHEMA idempotency;
});

# put back: the cleanup runs again and clears its reason, the API works
ok($node->poll_query_until('postgres', q{
	SELECT (SELECT count(*) FROM idempotency.registry) = 0
	   AND (SELECT last_error IS NULL FROM idempotency.cleanup_status WHERE datname = 'postgres')}),
	'put back: the cleanup deletes the expired records and clears its reason');
is($node->safe_psql('postgres', q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('done-1');
	SELECT idempotency.idempotent_finish('done-1', '{"n": 3}');
	COMMIT;
	SELECT outcome FROM idempotency.idempotent_begin('done-1')}),
	"execute\ncompleted\nreplay", 'put back: begin and finish work');

$node->stop;
done_testing();
