# The portable edition: make portable writes one script that the database's
# owner, not a superuser, runs with psql into a database of a server that
# never loads the C library.  It creates the C edition's API: every function
# with the same arguments, defaults and result, every view with the same
# columns, every table, but for the C key type's support functions (I/O,
# comparison, hashing: the domain has text's); a function it does not carry
# yet raises feature_not_supported; the tables stay the installer's, and an
# application role gets what grant_usage grants and nothing else.

use strict;
use warnings FATAL => 'all';

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $top = File::Spec->rel2abs(dirname(__FILE__) . '/../..');

# make portable: the script's path is the last line
my ($stdout, $stderr);
my $built = IPC::Run::run([ 'make', '-s', '--no-print-directory', '-C', $top, 'portable' ],
	'>', \$stdout, '2>', \$stderr);
ok($built, 'make portable builds the script') or diag($stderr);
my ($script) = $stdout =~ /([^\n]+)\n?\z/;
ok(defined $script && -r $script, 'and prints its path last');
my $text = PostgreSQL::Test::Utils::slurp_file($script);
unlike($text, qr/MODULE_PATHNAME|LANGUAGE\s+C\b|\$libdir/, 'it names no C library');

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
	CREATE ROLE owner LOGIN;
	CREATE DATABASE app OWNER owner;
	CREATE DATABASE c_edition;
	CREATE ROLE app_role LOGIN;
	CREATE ROLE nobody LOGIN;
	CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
});
$node->safe_psql('c_edition', 'CREATE EXTENSION idempotency');

# the database's owner installs it, as a migration would
my ($rc, $out, $err) = $node->psql('app', undef,
	extra_params => [ '-U', 'owner', '-v', 'ON_ERROR_STOP=1', '--single-transaction', '-f', $script ]);
is($rc, 0, 'the database owner runs the script with ON_ERROR_STOP, in one transaction') or diag($err);
is($node->safe_psql('app', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'owner'}), 'f',
	'who is not a superuser');
($rc, $out, $err) = $node->psql('app', undef,
	extra_params => [ '-U', 'owner', '-v', 'ON_ERROR_STOP=1', '-f', $script ]);
like($err, qr/schema "idempotency" already exists.*portable edition is installed already/s,
	'a second run changes nothing: the schema is there');
# and run as a newcomer might, without ON_ERROR_STOP and statement by
# statement: psql goes on past the refusal, and every statement after it
# fails in a read-only transaction instead of overwriting the installation
my $installed = q{
	SELECT count(*) || ' ' || md5(string_agg(p.oid::regprocedure::text || p.prosrc || coalesce(p.proacl::text, ''), ',' ORDER BY p.oid))
		   || ' ' || (SELECT count(*) FROM idempotency.portable_secret)
		   || ' ' || (SELECT md5(string_agg(c.relname || coalesce(c.relacl::text, '') || c.relnatts, ',' ORDER BY c.oid))
						FROM pg_class AS c WHERE c.relnamespace = 'idempotency'::regnamespace)
	  FROM pg_proc AS p WHERE p.pronamespace = 'idempotency'::regnamespace};
my $before = $node->safe_psql('app', $installed, extra_params => [ '-U', 'owner' ]);
($rc, $out, $err) = $node->psql('app', undef, on_error_stop => 0, extra_params => [ '-U', 'owner', '-f', $script ]);
my @errors = $err =~ /ERROR:  ([^\n]*)/g;
is($errors[0], 'schema "idempotency" already exists', 'without ON_ERROR_STOP, the second run is refused first');
ok(scalar(grep { /read-only transaction/ } @errors) > 100, 'and the statements after it fail in a read-only transaction');
is($node->safe_psql('app', $installed, extra_params => [ '-U', 'owner' ]), $before,
	'so that no function, table, grant or secret changed');
# in one transaction under psql's ON_ERROR_ROLLBACK, which runs each
# statement in a savepoint and undoes a failed one alone: the refusal would
# not stop the statements after it, so it ends the session instead
($rc, $out, $err) = $node->psql('app', undef, on_error_stop => 0,
	extra_params => [ '-U', 'owner', '-v', 'ON_ERROR_ROLLBACK=on', '--single-transaction', '-f', $script ]);
like($err, qr/WARNING:  the script is refused \(schema "idempotency" already exists\), and each of its statements runs in a savepoint of its own/,
	'under ON_ERROR_ROLLBACK, a second run is refused');
like($err, qr/FATAL:  terminating connection/, 'and ends the session, before the statements after it');
is($node->safe_psql('app', $installed, extra_params => [ '-U', 'owner' ]), $before,
	'so that nothing changed');

# the same API as the C edition's
my $functions = q{
	SELECT p.proname || '(' || pg_get_function_arguments(p.oid) || ') ' || pg_get_function_result(p.oid)
		   || ' ' || p.provolatile::text || p.proparallel::text || CASE WHEN p.proisstrict THEN ' strict' ELSE '' END
		   || CASE WHEN p.proretset THEN ' setof' ELSE '' END
	  FROM pg_proc AS p WHERE p.pronamespace = 'idempotency'::regnamespace ORDER BY 1};
my %c = map { $_ => 1 } split /\n/, $node->safe_psql('c_edition', $functions);
my %portable = map { $_ => 1 } split /\n/, $node->safe_psql('app', $functions);
my $type_support = qr/^(key_(cmp|eq|ne|lt|le|gt|ge|hash|hash_extended|hash_text|hash_text_extended|in|out|recv|send)|key_text_\w+|text_key_\w+|text_bytewise_\w+)\(/;
my @missing = grep { !$portable{$_} && $_ !~ $type_support } sort keys %c;
my @extra = grep { !$c{$_} && !/^(not_portable|portable_\w+)\(/ } sort keys %portable;
is_deeply(\@missing, [], 'every function of the C edition, with its arguments, defaults, result and volatility')
  or diag(explain(\@missing));
is_deeply(\@extra, [], 'and none it lacks but not_portable and the portable_ helpers') or diag(explain(\@extra));
ok(scalar(grep { $_ =~ $type_support } keys %c) >= 30, 'the C type\'s support functions are what is left out');

my $relations = q{
	SELECT c.relname || ' ' || c.relkind::text || ': ' || string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
	  FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
	 WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind IN ('r', 'v')
	   AND c.relname NOT LIKE 'portable\_%'
	 GROUP BY c.relname, c.relkind ORDER BY 1};
is($node->safe_psql('app', $relations), $node->safe_psql('c_edition', $relations),
	'every table and view, with the same columns');
is($node->safe_psql('app', q{SELECT format_type(typbasetype, NULL) || ' ' || (SELECT collname FROM pg_collation WHERE oid = typcollation) FROM pg_type WHERE oid = 'idempotency.key'::regtype}),
	'text C', 'the key is a domain over text compared bytewise');

# nothing of the library in a backend that uses it (where a backend of the C
# edition's database shows it)
sub maps_of
{
	my ($backend) = @_;
	return eval { PostgreSQL::Test::Utils::slurp_file("/proc/$backend/maps") } // '';
}
my $c_session = $node->background_psql('c_edition');
my $c_backend = $c_session->query_safe(q{SELECT pg_backend_pid()});
$c_session->query_safe(q{SELECT idempotency.make_key('a', 'b', 'c')});
my $c_maps = maps_of($c_backend);
$c_session->quit;
my $maps_session = $node->background_psql('app', on_error_stop => 0, extra_params => [ '-U', 'owner' ]);
my $backend = $maps_session->query_safe(q{SELECT pg_backend_pid()});
$maps_session->query_safe(q{SELECT count(*) FROM idempotency.metrics});
$maps_session->query(q{SELECT idempotency.make_key('a', 'b', 'c')});
my $maps = maps_of($backend);
SKIP:
{
	skip 'no /proc to read', 2 unless $maps && $c_maps;
	like($c_maps, qr/idempotency\.so/, 'a backend of the C edition maps the library');
	unlike($maps, qr/idempotency\.so/, 'one that used the portable edition never loaded it');
}
$maps_session->quit;

# what the portable edition carries answers as the C edition does: each
# input, its result or its error (SQLSTATE, message, detail), in both
my $same_answers = q{
CREATE FUNCTION pg_temp.answer(call text, arg text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	result text;
	st text;
	msg text;
	detail text;
BEGIN
	EXECUTE call INTO result USING arg;
	RETURN 'ok ' || coalesce(result, 'NULL');
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
	RETURN st || ' ' || msg || ' / ' || coalesce(detail, '');
END $$;
SELECT c.call || ' ' || coalesce(a.arg, 'NULL') || ': ' || pg_temp.answer(c.call, a.arg)
  FROM (VALUES ('SELECT idempotency.key($1)::text'), ('SELECT idempotency.text(idempotency.key($1))'),
			   ('SELECT idempotency.make_key($1, ''b'', ''c'')::text'), ('SELECT idempotency.make_key(''a'', $1, ''c'', ''v2'')::text'),
			   ('SELECT idempotency.make_key(''a'', ''b'', $1)::text'), ('SELECT idempotency.make_key(''a'', ''b'', ''c'', $1)::text'),
			   ('SELECT string_agg(row(p.*)::text, '';'') FROM idempotency.parse_key($1) AS p'),
			   ('SELECT string_agg(row(p.*)::text, '';'') FROM idempotency.parse_key(idempotency.make_key(''p'', $1, ''o'')) AS p')) AS c(call),
	   (VALUES ('abc'), ('order-42'), (''), (' a'), ('a '), ('a b'), (repeat('x', 255)), (repeat('x', 256)),
			   (repeat('é', 128)), (E'a\tb'), (E'a\x01b'), (E'a\x7fb'), (E'a\u0085b'), (E'a\u00adb'),
			   (E'a\u2028b'), (E'a\ufdd0b'), (E'a\uffffb'), (E'\u200bz'), (E'a\u00a0b'), (E'\u00a0a'),
			   (E'a\u3000'), (E'a\\b'), ('é'), (E'\U0001F600'), (E'\U000E0041x'), (E'\u2066x'),
			   (repeat('é', 40) || E'\u0001'), (repeat('ab', 40) || ' '), (NULL),
			   ('a:b'), (':'), ('pay:42:charge:v1:0d3ad7d4'), ('pay:42:charge:v1:0D3AD7D4'), ('pay:42:charge:v1:zz3ad7d4'),
			   ('pay:42:charge:v1:0d3ad7d'), ('pay::charge:v1:0d3ad7d4'), ('a:b:c:d:e:f'), (repeat('y', 250))) AS a(arg)
 ORDER BY c.call, a.arg COLLATE "C"};
my $key_answers = $node->safe_psql('c_edition', $same_answers);
my %c_answer = map { $_ => 1 } split /\n/, $key_answers;
my @portable_answers = split /\n/, $node->safe_psql('app', $same_answers, extra_params => [ '-U', 'owner' ]);
is_deeply([ grep { !$c_answer{$_} } @portable_answers ], [],
	'key(), text(), make_key() and parse_key() answer every input, valid and not, as the C edition does');
is(scalar(@portable_answers), scalar(keys %c_answer), '(as many answers)');
like($key_answers, qr/22P02 invalid input syntax for type idempotency\.key: "a\\xc2\\x85b" \/ An idempotency key must not contain control characters: U\+0085 at position 2\./,
	'(the comparison sees the C edition\'s messages)');

# whose records a call works on: owner_name() for each kind of caller, in
# both editions (grant_usage given in the same order in both)
$node->safe_psql('postgres', q{
	CREATE ROLE app1;
	CREATE ROLE app2;
	CREATE ROLE l1 LOGIN IN ROLE app1;
	CREATE ROLE l12 LOGIN IN ROLE app1, app2;
	CREATE ROLE lnone LOGIN;
	CREATE ROLE lapi LOGIN;
	CREATE ROLE lnoinherit LOGIN NOINHERIT IN ROLE app1;
	CREATE ROLE root LOGIN SUPERUSER;
});
my $setup_owners = q{
	SELECT idempotency.grant_usage('app1');
	SELECT idempotency.grant_usage('app2');
	GRANT EXECUTE ON FUNCTION idempotency.lookup(text, text, jsonb) TO lapi;
};
$node->safe_psql('c_edition', $setup_owners);
$node->safe_psql('app', $setup_owners, extra_params => [ '-U', 'owner' ]);
my $owner_answer = q{
	CREATE FUNCTION pg_temp.owner() RETURNS text LANGUAGE plpgsql AS $$
	DECLARE st text; msg text; detail text; hint text;
	BEGIN
		RETURN 'ok ' || idempotency.owner_name();
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
		RETURN st || ' ' || msg || ' / ' || detail || ' / ' || hint;
	END $$;
	SELECT pg_temp.owner();
};
for my $who ([ 'l1', '' ], [ 'l12', '' ], [ 'l12', 'SET ROLE app2;' ], [ 'lnone', '' ], [ 'lapi', '' ],
	[ 'lnoinherit', '' ], [ 'root', '' ], [ 'root', 'SET ROLE l1;' ], [ 'l1', 'SET ROLE app1;' ])
{
	my ($login, $set) = @$who;
	my $c_owner = $node->safe_psql('c_edition', $set . $owner_answer, extra_params => [ '-U', $login ]);
	# (the one difference: who runs grant_usage, which a hint names)
	(my $portable_owner = $c_owner) =~ s/As a superuser, run/As the database owner who installed idempotency, run/;
	is($node->safe_psql('app', $set . $owner_answer, extra_params => [ '-U', $login ]), $portable_owner,
		"owner_name() for $login $set: $c_owner");
}
# Whose call it is inside another role's SECURITY DEFINER function: the C
# edition sees that function's owner; the portable edition too when the
# session has that owner's privileges, and otherwise refuses (it cannot
# tell the owner's call from the session's: doc/portable.md)
my $definer = q{
	CREATE FUNCTION public.as_app1() RETURNS text LANGUAGE sql SECURITY DEFINER
		AS 'SELECT idempotency.owner_name()';
	CREATE FUNCTION public.token_as_app1() RETURNS text LANGUAGE sql SECURITY DEFINER
		AS $$SELECT count(*) || ' ' || idempotency.consume_token(idempotency.issue_token()) FROM idempotency.my_tokens$$;
	ALTER FUNCTION public.as_app1() OWNER TO app1;
	ALTER FUNCTION public.token_as_app1() OWNER TO app1;
	GRANT EXECUTE ON FUNCTION public.as_app1(), public.token_as_app1() TO lnone, l1;
};
$node->safe_psql($_, $definer) for qw(c_edition app);
for my $db (qw(c_edition app))
{
	is($node->safe_psql($db, 'SELECT public.as_app1() || public.token_as_app1()', extra_params => [ '-U', 'l1' ]),
		'app10 true', "$db: app1's SECURITY DEFINER function in a session of app1's login works on app1's records");
}
is($node->safe_psql('c_edition', 'SELECT public.as_app1() || public.token_as_app1()', extra_params => [ '-U', 'lnone' ]),
	'app11 true', 'C edition: in a session of another role too');
my $refused = q{
	CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
	DECLARE st text; msg text;
	BEGIN
		EXECUTE q;
		RETURN 'ok';
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
		RETURN st || ' ' || msg;
	END $$;
};
my $in_session = 'the portable edition of idempotency cannot work for role "app1" in a session of role "lnone"';
for my $call ('SELECT public.as_app1()', 'SELECT public.token_as_app1()',
	q{SELECT idempotency.portable_owner_name('app1')},
	q{SELECT idempotency.portable_issue_token('app1', '', '1 hour')},
	q{SELECT * FROM idempotency.portable_lookup('app1', 'lk1', '', NULL)})
{
	(my $quoted = $call) =~ s/'/''/g;
	is($node->safe_psql('app', "$refused SELECT pg_temp.try('$quoted')", extra_params => [ '-U', 'lnone' ]),
		"42501 $in_session", "portable edition, in a session of another role: $call refused");
}
is($node->safe_psql('app', q{SELECT count(*) FROM idempotency.tokens WHERE owner = 'lnone'}), '0',
	'and nothing was stored under the session\'s role');
# (the tokens above are not part of the comparisons below)
$node->safe_psql('c_edition', 'DELETE FROM idempotency.tokens');
$node->safe_psql('app', 'DELETE FROM idempotency.tokens', extra_params => [ '-U', 'owner' ]);
# a body called directly is no way around a grant an administrator trimmed
$node->safe_psql('postgres', 'CREATE ROLE app4; CREATE ROLE l4 LOGIN IN ROLE app4;');
my $trim = q{
	SELECT idempotency.grant_usage('app4');
	REVOKE EXECUTE ON FUNCTION idempotency.issue_token(text, interval) FROM app4;
};
$node->safe_psql('c_edition', $trim);
$node->safe_psql('app', $trim, extra_params => [ '-U', 'owner' ]);
my $c_trimmed = $node->safe_psql('c_edition', "$refused SELECT pg_temp.try('SELECT idempotency.issue_token()')", extra_params => [ '-U', 'l4' ]);
is($c_trimmed, '42501 permission denied for function issue_token', 'C edition: a trimmed grant refuses the call');
for my $call ('SELECT idempotency.issue_token()', q{SELECT idempotency.portable_issue_token(current_user, '''', ''1 hour'')})
{
	is($node->safe_psql('app', "$refused SELECT pg_temp.try('$call')", extra_params => [ '-U', 'l4' ]),
		$c_trimmed, "portable edition: so does it, for $call");
}
is($node->safe_psql('app', q{SELECT count(*) FROM idempotency.my_records}, extra_params => [ '-U', 'l1' ]),
	'0', 'an application\'s login reads its own records through my_records');

# lookup: records the C edition wrote, copied into the portable edition's
# registry, read by both; the fingerprints match their requests in both
$node->safe_psql('c_edition', q{
	BEGIN;
	SELECT idempotency.idempotent_begin('lk1', request => '{"b": [1, 2.50, "x\"y", null], "a": {"z": false, "é": true}, "": 1e2}');
	SELECT idempotency.idempotent_finish('lk1', '{"ok": 1}', status_code => 201, body => '\x68656c6c6f',
										 headers => '[["Link", "<a>"], ["Link", "<b>"]]');
	SELECT idempotency.idempotent_begin('lk2', request => '5.0');
	SELECT idempotency.idempotent_finish('lk2', '"scalar"');
	SELECT idempotency.idempotent_begin('lk6', scope => 'POST /x');
	SELECT idempotency.idempotent_finish('lk6', '{}', scope => 'POST /x');
	COMMIT;
	SELECT idempotency.idempotent_begin('lk3', external => true, lease => '1 hour');
	BEGIN;
	SELECT idempotency.idempotent_begin('lk4');
	SELECT idempotency.idempotent_finish('lk4', '{}');
	COMMIT;
	SELECT idempotency.idempotent_begin('lk5', external => true);
	SELECT idempotency.idempotent_abandon('lk5', attempt => (SELECT attempt FROM idempotency.my_records WHERE key = 'lk5'));
}, extra_params => [ '-U', 'l1' ]);
$node->safe_psql('c_edition', q{
	UPDATE idempotency.registry SET expires_at = now() - interval '1 second' WHERE key = 'lk4';
});
my $rows = $node->safe_psql('c_edition', q{SELECT to_jsonb(r) FROM idempotency.registry AS r WHERE key LIKE 'lk%'});
for my $row (split /\n/, $rows)
{
	(my $quoted = $row) =~ s/'/''/g;
	$node->safe_psql('app', "INSERT INTO idempotency.registry SELECT * FROM jsonb_populate_record(NULL::idempotency.registry, '$quoted')");
}
my $lookups = q{
	SELECT c.k || ' ' || c.scope || ' ' || coalesce(c.request::text, 'NULL') || ': ' || row(l.*)::text
	  FROM (VALUES ('lk1', '', NULL::jsonb),
				   ('lk1', '', '{"": 100, "a": {"é": true, "z": false}, "b": [1.0, 2.5, "x\"y", null]}'),
				   ('lk1', '', '{"b": [1, 2.5, "x\"y", null], "a": {"z": false, "é": true}, "": 100.001}'),
				   ('lk2', '', '5'), ('lk2', '', '"5"'), ('lk3', '', NULL), ('lk4', '', NULL),
				   ('lk5', '', NULL), ('lk6', 'POST /x', '{}'), ('lk6', '', NULL), ('none', '', NULL)) AS c(k, scope, request),
		   LATERAL idempotency.lookup(c.k, c.scope, c.request) AS l
	 ORDER BY 1};
my $c_lookups = $node->safe_psql('c_edition', $lookups, extra_params => [ '-U', 'l1' ]);
is($node->safe_psql('app', $lookups, extra_params => [ '-U', 'l1' ]), $c_lookups,
	'lookup() answers as the C edition does, request_matches included');
like($c_lookups, qr/^lk1  \{"": 100.*\(t,completed,.*,t,,\)$/m, '(a request equal as jsonb matches)');
like($c_lookups, qr/^lk1  \{"": 100\.001.*,f,,\)$/m, '(a different one does not)');
is($node->safe_psql('app', q{SELECT count(*) FROM idempotency.registry AS r
	WHERE r.fingerprint IS NOT NULL AND r.key IN ('lk1', 'lk2')
	  AND r.fingerprint = idempotency.portable_fingerprint(CASE r.key WHEN 'lk1' THEN
		'{"b": [1, 2.50, "x\"y", null], "a": {"z": false, "é": true}, "": 1e2}'::jsonb ELSE '5.0'::jsonb END)}),
	'2', 'the portable fingerprint of a request is the C edition\'s, byte for byte');
my $lookup_errors = q{
	CREATE FUNCTION pg_temp.answer(call text) RETURNS text LANGUAGE plpgsql AS $$
	DECLARE st text; msg text; detail text; result text;
	BEGIN
		EXECUTE call INTO result;
		RETURN 'ok ' || result;
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
		RETURN st || ' ' || msg || ' / ' || detail;
	END $$;
	SELECT c || ': ' || pg_temp.answer(c) FROM (VALUES
		('SELECT found::text FROM idempotency.lookup(NULL)'),
		('SELECT found::text FROM idempotency.lookup(''k'', NULL)'),
		('SELECT found::text FROM idempotency.lookup('' k'')'),
		('SELECT found::text FROM idempotency.lookup(''k'', repeat(''s'', 256))')) AS v(c) ORDER BY 1};
is($node->safe_psql('app', $lookup_errors, extra_params => [ '-U', 'l1' ]),
	$node->safe_psql('c_edition', $lookup_errors, extra_params => [ '-U', 'l1' ]),
	'and refuses bad arguments as the C edition does');

# the inbox: the same calls in both editions, one after another, with the
# same answers (errors as SQLSTATE, message and detail)
my $answer_fn = q{
	CREATE FUNCTION pg_temp.answer(call text) RETURNS text LANGUAGE plpgsql AS $$
	DECLARE st text; msg text; detail text; result text;
	BEGIN
		EXECUTE call INTO result;
		RETURN 'ok ' || coalesce(result, 'NULL');
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
		RETURN st || ' ' || msg || ' / ' || detail;
	END $$;
};
my @inbox_steps = (
	[ 'l1', q{SELECT idempotency.inbox_receive('c1', 'm1')::text} ],
	[ 'l1', q{SELECT idempotency.inbox_receive('c1', 'm1')::text} ],
	[ 'l1', q{SELECT idempotency.inbox_receive('c2', 'm1')::text} ],
	[ 'l12', q{SELECT idempotency.inbox_receive('c1', 'm1')::text} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch('c1', ARRAY['m3', 'm1', 'm2', 'm3', 'm4']) AS x} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch('c1', ARRAY['m2', 'm5', 'm5']) AS x} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch('c1', '{}') AS x} ],
	[ 'postgres', q{SELECT count(*)::text FROM (UPDATE idempotency.inbox SET expires_at = now() - interval '1 second' WHERE message_id IN ('m2', 'm3') RETURNING 1) AS u} ],
	[ 'l1', q{SELECT idempotency.inbox_receive('c1', 'm2')::text} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch('c1', ARRAY['m4', 'm3', 'm6']) AS x} ],
	[ 'l1', q{SELECT idempotency.inbox_receive(NULL, 'm')::text} ],
	[ 'l1', q{SELECT idempotency.inbox_receive('', 'm')::text} ],
	[ 'l1', q{SELECT idempotency.inbox_receive('c', repeat('x', 256))::text} ],
	[ 'l1', q{SELECT idempotency.inbox_receive('c', 'm', '0 seconds')::text} ],
	[ 'l1', q{SELECT idempotency.inbox_receive('c', 'm', NULL)::text} ],
	[ 'l1', q{SELECT idempotency.inbox_receive('c', 'm', '-1 day')::text} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch('c', NULL) AS x} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch('c', ARRAY[['a', 'b'], ['c', 'd']]) AS x} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch('c', ARRAY['a', NULL]) AS x} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch('c', ARRAY['']) AS x} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch('c', array_fill('x'::text, ARRAY[10001])) AS x} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch(NULL, ARRAY['a']) AS x} ],
	[ 'l1', q{SELECT string_agg(x, ',') FROM idempotency.inbox_receive_batch('c', ARRAY['a'], '0 seconds') AS x} ],
	[ 'postgres', q{SELECT string_agg(owner || '/' || consumer || '/' || message_id, ' ' ORDER BY owner, consumer, message_id COLLATE "C") FROM idempotency.inbox} ],
	# tokens: each edition draws its own, so the steps name the latest
	[ 'l1', q{SELECT (idempotency.issue_token() ~ '^tk_[0-9a-f]{32}$')::text} ],
	[ 'l1', q{SELECT idempotency.consume_token((SELECT token FROM idempotency.my_tokens ORDER BY issued_at DESC LIMIT 1))::text} ],
	[ 'l1', q{SELECT idempotency.consume_token((SELECT token FROM idempotency.my_tokens ORDER BY issued_at DESC LIMIT 1))::text} ],
	[ 'l1', q{SELECT string_agg(state, ',') FROM idempotency.my_tokens} ],
	[ 'l1', q{SELECT (idempotency.issue_token('checkout', '1 hour') IS NOT NULL)::text} ],
	[ 'l1', q{SELECT idempotency.consume_token((SELECT token FROM idempotency.my_tokens WHERE scope = 'checkout'))::text} ],
	[ 'l1', q{SELECT (idempotency.issue_token('checkout') IS NOT NULL)::text} ],
	[ 'lnone', q{SELECT idempotency.consume_token('tk_00000000000000000000000000000000')::text} ],
	[ 'postgres', q{SELECT count(*)::text FROM (UPDATE idempotency.tokens SET expires_at = now() - interval '1 second' WHERE consumed_at IS NULL RETURNING 1) AS u} ],
	[ 'l1', q{SELECT idempotency.consume_token((SELECT token FROM idempotency.my_tokens WHERE consumed_at IS NULL LIMIT 1), 'checkout')::text} ],
	[ 'l1', q{SELECT string_agg(state, ',' ORDER BY state) FROM idempotency.my_tokens} ],
	[ 'l1', q{SELECT idempotency.consume_token('unknown')::text} ],
	[ 'l1', q{SELECT idempotency.consume_token(NULL)::text} ],
	[ 'l1', q{SELECT idempotency.consume_token(' t')::text} ],
	[ 'l1', q{SELECT idempotency.consume_token('t', NULL)::text} ],
	[ 'l1', q{SELECT idempotency.issue_token(NULL)::text} ],
	[ 'l1', q{SELECT idempotency.issue_token('', NULL)::text} ],
	[ 'l1', q{SELECT idempotency.issue_token('', '-1 minute')::text} ],
	[ 'l1', q{SELECT idempotency.issue_token(repeat('s', 256))::text} ],
	[ 'l12', q{SELECT idempotency.issue_token()::text} ],
	[ 'l1', q{SELECT idempotency.try_lock('k1')::text} ],
	[ 'l1', q{SELECT idempotency.lock(NULL)::text} ],
	[ 'l1', q{SELECT idempotency.lock(' k', NULL)::text} ],
	[ 'l1', q{SELECT idempotency.try_lock('k', NULL)::text} ],
	[ 'l1', q{SELECT idempotency.try_lock('k', repeat('s', 256))::text} ],
	[ 'l12', q{SELECT idempotency.try_lock(' k')::text} ],
	# an administrator's resets, on the records copied from the C edition above
	[ 'postgres', q{SELECT idempotency.forget_key('app1', 'lk1')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key('app1', 'lk1')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key('app1', 'lk3')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key('app1', 'lk3', force => true)::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key('app1', 'lk4')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key('app1', 'lk6', 'POST /x')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key(NULL, 'k')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key('', 'k')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key(repeat('r', 64), 'k')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key('app1', NULL)::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key('app1', ' k')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key('app1', 'k', NULL)::text} ],
	[ 'postgres', q{SELECT idempotency.forget_key('app1', 'k', '', NULL)::text} ],
	[ 'l1', q{SELECT idempotency.forget_key('app1', 'lk2')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_role(NULL)::text} ],
	[ 'postgres', q{SELECT idempotency.forget_role('')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_role('no_such_role')::text} ],
	[ 'postgres', q{SELECT idempotency.forget_role('app1')::text} ],
	[ 'postgres', q{SELECT (SELECT count(*) FROM idempotency.registry) || ' ' || (SELECT count(*) FROM idempotency.inbox) || ' ' || (SELECT count(*) FROM idempotency.tokens) || ' ' || (SELECT string_agg(role_name, ',' ORDER BY role_name) FROM idempotency.application_roles)} ]);
my (@c_inbox, @portable_inbox);
for my $step (@inbox_steps)
{
	my ($login, $call) = @$step;
	(my $quoted = $call) =~ s/'/''/g;
	push @c_inbox, "$login: $call: " . $node->safe_psql('c_edition', "$answer_fn SELECT pg_temp.answer('$quoted')", extra_params => [ '-U', $login ]);
	push @portable_inbox, "$login: $call: " . $node->safe_psql('app', "$answer_fn SELECT pg_temp.answer('$quoted')", extra_params => [ '-U', $login ]);
}
is_deeply(\@portable_inbox, \@c_inbox, 'the inbox, tokens, key locks, forget_key and forget_role answer every call as the C edition does')
  or diag(explain([ grep { $portable_inbox[$_] ne $c_inbox[$_] } 0 .. $#c_inbox ]));
like($c_inbox[4], qr/ok m3,m2,m4$/, '(a batch gives its new ids in input order, each once)');
like(join("\n", @c_inbox), qr/lk3'\)::text\}?: 55006 idempotency key "lk3" in scope "" of role "app1" is claimed and not finished/,
	'(forget_key refuses a claim not finished in both)');
# The claim protocol: begin, finish and abandon, the same calls in both
# editions, each a transaction of its own (pg_temp.seq runs several
# statements in one), with the same answers.  Attempt numbers come from
# each edition's clock: shown as "A" in the answers.
my $claim_fns = $answer_fn . q{
	CREATE FUNCTION pg_temp.seq(VARIADIC calls text[]) RETURNS text LANGUAGE plpgsql AS $$
	DECLARE c text; result text; answers text[] := '{}';
	BEGIN
		FOREACH c IN ARRAY calls LOOP
			EXECUTE c INTO result;
			answers := answers || coalesce(result, 'NULL');
		END LOOP;
		RETURN array_to_string(answers, ' | ');
	END $$;
};
my $att = q{(SELECT attempt FROM idempotency.my_records WHERE key = '%s' AND scope = '')};
# a begin's answer, its times as whether they are there
sub begin_sql
{
	return q{SELECT concat_ws(' ', r.outcome, r.status, r.response, r.status_code, encode(r.body, 'hex'), r.headers,
		CASE WHEN r.attempt > 0 THEN 'A' ELSE r.attempt::text END, r.previous_end,
		CASE WHEN r.previous_attempt > 0 THEN 'A' END, r.lease_until IS NULL, r.expires_at IS NULL,
		CASE WHEN r.retry_after > 3590 THEN 'hour' WHEN r.retry_after > 200 THEN 'minutes' ELSE r.retry_after::text END,
		r.recovery_point, r.recovery_state) FROM idempotency.idempotent_begin(} . $_[0] . ') AS r';
}
# several statements in one transaction
sub seq
{
	return 'SELECT pg_temp.seq(' . join(', ', map { (my $q = $_) =~ s/'/''/g; "'$q'" } @_) . ')';
}
my $fin = q{SELECT idempotency.idempotent_finish};
my @claim_steps = (
	seq(begin_sql(q{'a1', request => '{"x": 1}'}), qq{$fin('a1', '{"r": 1}', status_code => 201, body => '\\x01ff', headers => '{"Location": "/a/1"}')}),
	begin_sql(q{'a1', request => '{"x": 1.0}'}),
	begin_sql(q{'a1', request => '{"x": 2}'}),
	begin_sql(q{'a1'}),
	begin_sql(q{'a1', 'other scope'}),
	begin_sql(q{'a2', external => true, lease => '1 hour'}),
	begin_sql(q{'a2'}),
	begin_sql(q{'a2', wait => false}),
	qq{$fin('a2', '{}')},
	q{SELECT idempotency.idempotent_abandon('a2')::text},
	qq{$fin('a2', '{}', attempt => 0)},
	qq{$fin('a2', '{}', attempt => -5)},
	qq{$fin('a2', '{}', attempt => 2000000000)},
	qq{$fin('a2', '{}', attempt => 7)},
	sprintf(qq{$fin('a2', '[1]', attempt => %s, headers => '[["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]]')}, sprintf($att, 'a2')),
	sprintf(qq{$fin('a2', '[1]', attempt => %s, headers => '[["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]]')}, sprintf($att, 'a2')),
	sprintf(qq{$fin('a2', '[2]', attempt => %s)}, sprintf($att, 'a2')),
	sprintf(q{SELECT idempotency.idempotent_abandon('a2', attempt => %s)::text}, sprintf($att, 'a2')),
	begin_sql(q{'a2'}),
	begin_sql(q{'a3', external => true}),
	sprintf(q{SELECT idempotency.idempotent_abandon('a3', attempt => %s)::text}, sprintf($att, 'a3')),
	sprintf(qq{$fin('a3', '{}', attempt => %s)}, sprintf($att, 'a3')),
	seq(begin_sql(q{'a3'}), qq{$fin('a3', NULL, failed => true, status_code => 402, ttl => '1 hour')}),
	begin_sql(q{'a3'}),
	begin_sql(q{'a4', external => true, lease => '1 hour'}),
	[ 'postgres', q{SELECT count(*)::text FROM (UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'a4' RETURNING 1) AS u} ],
	begin_sql(q{'a4', external => true}),
	qq{$fin('a4', '{}', attempt => (SELECT attempt - 1 FROM idempotency.my_records WHERE key = 'a4'))},
	[ 'postgres', q{SELECT count(*)::text FROM (UPDATE idempotency.registry SET expires_at = now() - interval '1 second' WHERE key IN ('a1', 'a4') RETURNING 1) AS u} ],
	sprintf(qq{$fin('a4', '{}', attempt => %s)}, sprintf($att, 'a4')),
	seq(begin_sql(q{'a1', request => '{"x": 1}'}), qq{$fin('a1', '"again"')}),
	seq(begin_sql(q{'a4'}), q{SELECT idempotency.idempotent_abandon('a4')::text}, begin_sql(q{'a4'}), begin_sql(q{'a4'}), qq{$fin('a4', '{}')}),
	seq(begin_sql(q{'a5', defer_claim => true}), qq{$fin('a5', '{}')}, begin_sql(q{'a5'})),
	seq(q{SELECT (idempotency.issue_token('pay') IS NOT NULL)::text},
		begin_sql(q{(SELECT token FROM idempotency.my_tokens WHERE scope = 'pay'), 'pay', require_token => true}),
		qq{$fin((SELECT token FROM idempotency.my_tokens WHERE scope = 'pay'), '{}', 'pay')}),
	begin_sql(q{(SELECT token FROM idempotency.my_tokens WHERE scope = 'pay'), 'pay', require_token => true}),
	begin_sql(q{'tk_0123', 'pay', require_token => true}),
	begin_sql(q{NULL}),
	begin_sql(q{' k'}),
	begin_sql(q{'k', NULL}),
	begin_sql(q{'k', repeat('s', 256)}),
	begin_sql(q{'k', ttl => NULL}),
	begin_sql(q{'k', ttl => '-1 hour'}),
	begin_sql(q{'k', lease => '0 seconds'}),
	begin_sql(q{'k', wait => NULL}),
	begin_sql(q{'k', require_token => NULL}),
	begin_sql(q{'k', max_wait => '-1 second'}),
	begin_sql(q{'k', defer_claim => NULL}),
	begin_sql(q{'k', external => NULL}),
	begin_sql(q{'k', defer_claim => true, external => true}),
	qq{$fin(NULL, '{}')},
	qq{$fin('k', '{}', NULL)},
	qq{$fin('k', '{}', failed => NULL)},
	qq{$fin('k', '{}', status_code => 99)},
	qq{$fin('k', '{}', status_code => 600)},
	qq{$fin('k', '{}', headers => '"x"')},
	qq{$fin('k', '{}', headers => '[["A"]]')},
	qq{$fin('k', '{}', headers => '[["A", "b", "c"]]')},
	qq{$fin('k', '{}', headers => '[1]')},
	qq{$fin('k', '{}', headers => '[[1, "b"]]')},
	qq{$fin('k', '{}', headers => '[["A", 1]]')},
	qq{$fin('k', '{}', headers => '{"Bad Name": "x"}')},
	qq{$fin('k', '{}', headers => '{"": "x"}')},
	qq{$fin('k', '{}', headers => '{"A": "x\\ny"}')},
	qq{$fin('k', '{}', headers => '{"A": "x\\ty"}')},
	qq{$fin('k', '{}', headers => '{"A": []}')},
	qq{$fin('k', '{}', headers => '{"A": ["x", 1]}')},
	qq{$fin('k', '{}', headers => '{"A": {}}')},
	qq{$fin('k', '{}', ttl => '0 seconds')},
	q{SELECT idempotency.idempotent_abandon(NULL)::text},
	q{SELECT idempotency.idempotent_abandon('k', NULL)::text},
	q{SELECT idempotency.idempotent_abandon('never')::text},
	q{SELECT idempotency.idempotent_abandon('a3')::text},
	# recovery points, renewal and the completer
	begin_sql(q{'r1', external => true, lease => '1 hour'}),
	q{SELECT idempotency.idempotent_checkpoint('r1', 'charged', '{"id": 1}')},
	sprintf(q{SELECT idempotency.idempotent_checkpoint('r1', 'charged', '{"id": 1}', attempt => %s)}, sprintf($att, 'r1')),
	q{SELECT idempotency.idempotent_checkpoint('r1', 'charged', attempt => 5)},
	q{SELECT idempotency.idempotent_renew('r1', '2 hours')::text},
	sprintf(q{SELECT (idempotency.idempotent_renew('r1', '2 hours', attempt => %s) > now() + interval '119 minutes')::text}, sprintf($att, 'r1')),
	sprintf(q{SELECT (idempotency.idempotent_renew('r1', '2 days', attempt => %s) = (SELECT expires_at FROM idempotency.my_records WHERE key = 'r1'))::text}, sprintf($att, 'r1')),
	[ 'postgres', q{SELECT count(*)::text FROM (UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'r1' RETURNING 1) AS u} ],
	q{SELECT string_agg(concat_ws(' ', s.key, s.scope, s.attempt > s.previous_attempt, s.lease_until > now() + interval '4 minutes', s.recovery_point, s.recovery_state), ',') FROM idempotency.claim_stalled() AS s},
	q{SELECT count(*)::text FROM idempotency.claim_stalled()},
	begin_sql(q{'r1'}),
	seq(begin_sql(q{'r2'}), q{SELECT idempotency.idempotent_checkpoint('r2', 's1', '[1]')},
		q{SELECT (idempotency.idempotent_renew('r2', '1 hour') IS NOT NULL)::text}, q{SELECT count(*)::text FROM idempotency.claim_stalled()},
		qq{$fin('r2', '{}')}),
	seq(begin_sql(q{'r3', defer_claim => true}), q{SELECT idempotency.idempotent_checkpoint('r3', 's')}),
	seq(begin_sql(q{'r3', defer_claim => true}), q{SELECT idempotency.idempotent_renew('r3', '1 hour')::text}),
	seq(begin_sql(q{'r3', defer_claim => true}), q{SELECT idempotency.idempotent_checkpoint('r3', 's', attempt => 1)}),
	q{SELECT idempotency.idempotent_checkpoint(NULL, 's')},
	q{SELECT idempotency.idempotent_checkpoint('k', NULL)},
	q{SELECT idempotency.idempotent_checkpoint('k', '')},
	q{SELECT idempotency.idempotent_checkpoint('k', 's', NULL, NULL)},
	q{SELECT idempotency.idempotent_checkpoint('never', 's', attempt => 1)},
	q{SELECT idempotency.idempotent_renew('k', NULL)::text},
	q{SELECT idempotency.idempotent_renew('k', '0 seconds')::text},
	q{SELECT idempotency.idempotent_renew('a1', '1 hour', attempt => 1)::text},
	q{SELECT count(*)::text FROM idempotency.claim_stalled(batch_size => 0)},
	q{SELECT count(*)::text FROM idempotency.claim_stalled(batch_size => 10001)},
	q{SELECT count(*)::text FROM idempotency.claim_stalled(batch_size => NULL)},
	q{SELECT count(*)::text FROM idempotency.claim_stalled(repeat('s', 256))},
	q{SELECT count(*)::text FROM idempotency.claim_stalled(lease => '-1 second')},
	q{SELECT count(*)::text FROM idempotency.claim_stalled('no such scope')},
	# a handler run under a claim
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response, c.attempt > 0, c.retry_after) FROM idempotency.idempotent_call('h1', 'public.h_ok(jsonb)', '{"a": 1}') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response, c.attempt > 0, c.retry_after) FROM idempotency.idempotent_call('h1', 'public.h_ok(jsonb)', '{"a": 1}') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h1', 'public.h_ok(jsonb)', '{"a": 2}') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h2', 'public.h_ok(jsonb)') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h3', 'public.h_strict(jsonb)') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h3', 'public.h_text(text)', '{}') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h3', 'public.h_set(jsonb)', '{}') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h3', 'public.h_private(jsonb)', '{}') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h3', 'public.h_fails(jsonb)', '{}') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h3', 'public.h_ok(jsonb)', '{}', ttl => NULL) AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call(NULL, 'public.h_ok(jsonb)', '{}') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h3', NULL, '{}') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h3', 'public.h_ok(jsonb)', '{}', NULL) AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h3', 'public.h_ok(jsonb)', '{}', max_wait => '-1 second') AS c},
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h3', 'public.h_ok(jsonb)', '{}', max_wait => '1 second') AS c},
	seq(begin_sql(q{'h4', external => true}), q{SELECT concat_ws(' ', c.outcome, c.status, c.response, c.retry_after) FROM idempotency.idempotent_call('h4', 'public.h_ok(jsonb)', '{}') AS c}),
	q{SELECT concat_ws(' ', c.outcome, c.status, c.response) FROM idempotency.idempotent_call('h5', 'public.h_self(jsonb)', '{"k": "h5"}') AS c},
	begin_sql(q{'mw', max_wait => '100 years', external => true}),
	[ 'lnone', begin_sql(q{'a1'}) ],
	[ 'l12', begin_sql(q{'a1'}) ],
	[ 'postgres', q{SELECT string_agg(owner || '/' || scope || '/' || key || '/' || status || '/' || coalesce(response::text, '-') || '/' || coalesce(status_code::text, '-') || '/' || coalesce(headers::text, '-'), ' ' ORDER BY key::text COLLATE "C", scope COLLATE "C") FROM idempotency.registry WHERE key::text !~ '^(lk|tk_)'} ]);
my $handlers = q{
	CREATE FUNCTION public.h_ok(r jsonb) RETURNS jsonb LANGUAGE sql AS $$SELECT jsonb_build_object('got', r, 'as', current_user)$$;
	CREATE FUNCTION public.h_strict(r jsonb) RETURNS jsonb LANGUAGE sql STRICT AS 'SELECT r';
	CREATE FUNCTION public.h_text(r text) RETURNS text LANGUAGE sql AS 'SELECT r';
	CREATE FUNCTION public.h_set(r jsonb) RETURNS SETOF jsonb LANGUAGE sql AS 'SELECT r';
	CREATE FUNCTION public.h_private(r jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT r';
	REVOKE EXECUTE ON FUNCTION public.h_private(jsonb) FROM PUBLIC;
	CREATE FUNCTION public.h_fails(r jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'card declined' USING ERRCODE = 'P0001'; END$$;
	CREATE FUNCTION public.h_self(r jsonb) RETURNS jsonb LANGUAGE sql AS $$SELECT to_jsonb(idempotency.idempotent_finish(r ->> 'k', '{}'))$$;
};
$node->safe_psql($_, $handlers) for qw(c_edition app);
my (@c_claims, @portable_claims);
for my $step (@claim_steps)
{
	my ($login, $call) = ref $step ? @$step : ('l1', $step);
	(my $quoted = $call) =~ s/'/''/g;
	for my $db (qw(c_edition app))
	{
		my ($ret, $out, $err) = $node->psql($db, "$claim_fns SELECT pg_temp.answer('$quoted')", extra_params => [ '-U', $login ]);
		my $answer = "$login: $call: " . ($ret == 0 ? $out : ($err =~ /ERROR:\s+(.*)/)[0]);
		$answer =~ s/\b\d{9,10}\b/A/g;
		push @{ $db eq 'app' ? \@portable_claims : \@c_claims }, $answer;
	}
}
is_deeply(\@portable_claims, \@c_claims, 'begin, finish and abandon answer every call as the C edition does')
  or diag(explain([ map { "C:        $c_claims[$_]\nportable: $portable_claims[$_]" } grep { $portable_claims[$_] ne $c_claims[$_] } 0 .. $#c_claims ]));
like($c_claims[0], qr/ok execute processing .* \| completed$/, '(a claim executes and finishes in one transaction)');
like($c_claims[1], qr/ok replay completed \{"r": 1\} 201 01ff \{"Location": "\/a\/1"\} A t f$/, '(and its retry replays the stored answer)');
like($c_claims[6], qr/ok in_progress processing .* hour$/, '(a claim committed open is in progress until its lease ends)');
my ($cr_ret, $cr_out, $cr_err) = $node->psql('app', q{SELECT outcome FROM idempotency.idempotent_begin('open')}, extra_params => [ '-U', 'l1' ]);
my (undef, undef, $cr_c_err) = $node->psql('c_edition', q{SELECT outcome FROM idempotency.idempotent_begin('open')}, extra_params => [ '-U', 'l1' ]);
is(($cr_err =~ /(ERROR:.*\nDETAIL:.*\nHINT:.*)/)[0], ($cr_c_err =~ /(ERROR:.*\nDETAIL:.*\nHINT:.*)/)[0],
	'the commit rule: a transaction that would commit a claim not finished fails as in the C edition');
is($node->safe_psql('app', q{SELECT count(*) FROM idempotency.registry WHERE key = 'open'}), '0', '(and commits nothing)');

# A duplicate of a claim whose transaction is open: bounded, it answers
# in_progress at once; unbounded, it waits for the holder, then replays its
# answer if it committed, or executes if it rolled back; in both editions
for my $db (qw(c_edition app))
{
	my $holder = $node->background_psql($db, extra_params => [ '-U', 'l1' ]);
	$holder->query_safe(q{BEGIN; SELECT outcome FROM idempotency.idempotent_begin('w1')});
	is($node->safe_psql($db, q{SELECT concat_ws(' ', outcome, attempt, retry_after) FROM idempotency.idempotent_begin('w1', wait => false)}, extra_params => [ '-U', 'l1' ]),
		'in_progress 1', "$db: a duplicate with wait => false answers in_progress while the first is open");
	is($node->safe_psql($db, q{SELECT outcome FROM idempotency.idempotent_begin('w1', max_wait => '50ms')}, extra_params => [ '-U', 'l1' ]),
		'in_progress', "$db: so does one with max_wait, once it runs out");
	$holder->query_safe('ROLLBACK');
	for my $end ('COMMIT', 'ROLLBACK')
	{
		my $k = lc "w_$end";
		$holder->query_safe(qq{BEGIN; SELECT outcome FROM idempotency.idempotent_begin('$k')});
		my ($out, $err) = ('', '');
		my $waiter = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr($db), '-U', 'l1', '-v', 'ON_ERROR_STOP=1', '-c',
				qq{BEGIN; SELECT outcome FROM idempotency.idempotent_begin('$k', max_wait => '1 hour'); SELECT idempotency.idempotent_finish('$k', '"second"') WHERE (SELECT status FROM idempotency.lookup('$k')) = 'processing'; COMMIT;} ],
			'>', \$out, '2>', \$err);
		ok($node->poll_query_until($db, qq{SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%''$k''%'}),
			"$db: an unbounded duplicate waits for the open claim");
		$holder->query_safe($end eq 'COMMIT' ? qq{SELECT idempotency.idempotent_finish('$k', '"first"'); COMMIT} : 'ROLLBACK');
		$waiter->finish;
		is($out, $end eq 'COMMIT' ? "replay\n" : "execute\ncompleted\n",
			"$db: and after the first's $end " . ($end eq 'COMMIT' ? 'replays its answer' : 'executes'));
		is($node->safe_psql($db, qq{SELECT response FROM idempotency.lookup('$k')}, extra_params => [ '-U', 'l1' ]),
			$end eq 'COMMIT' ? '"first"' : '"second"', "$db: (the answer stored is the " . ($end eq 'COMMIT' ? 'first' : 'second') . " request's)");
	}
	$holder->quit;
}
# the commit rule holds whatever the constraints' mode: a transaction that
# sets them IMMEDIATE has its claims checked at once; an external claim
# stays this transaction's through it; a read-only end commits one
my ($im_rc, $im_out, $im_err) = $node->psql('app', q{
	BEGIN;
	SET CONSTRAINTS ALL IMMEDIATE;
	SELECT outcome FROM idempotency.idempotent_begin('imm');
	COMMIT;}, extra_params => [ '-U', 'l1' ]);
like($im_err, qr/ERROR:  idempotency key "imm" in scope "" was claimed but not finished/,
	'portable edition: a claim taken with the constraints IMMEDIATE fails at once');
is($node->safe_psql('app', q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('imm-ext', external => true);
	SET CONSTRAINTS ALL IMMEDIATE;
	SET CONSTRAINTS ALL DEFERRED;
	SELECT idempotency.idempotent_finish('imm-ext', '{}');
	COMMIT;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('ro-ext', external => true);
	SET TRANSACTION READ ONLY;
	COMMIT;
	SELECT count(*) FROM idempotency.my_records WHERE key IN ('imm', 'imm-ext', 'ro-ext');
	SELECT outcome FROM idempotency.idempotent_begin('ro-ext');
}, extra_params => [ '-U', 'l1' ]), "execute
completed
execute
2
in_progress",
	'portable edition: an external claim stays the transaction\'s through SET CONSTRAINTS, and commits in a transaction that ends read-only; nothing of the failed one is left');
# a bounded begin leaves the caller's lock_timeout as it was
is($node->safe_psql('app', q{
	BEGIN;
	SET LOCAL lock_timeout = '7s';
	SELECT outcome FROM idempotency.idempotent_begin('lt', wait => false, external => true);
	SHOW lock_timeout;
	COMMIT;}, extra_params => [ '-U', 'l1' ]), "execute
7s", 'portable edition: begin gives the caller\'s lock_timeout back');
# a key is checked however it becomes one
for my $cast (q{SELECT idempotency.key(' a')}, q{SELECT ' a'::idempotency.key}, q{SELECT idempotency.key(E'a\u00a0')})
{
	(my $quoted = $cast) =~ s/'/''/g;
	like($node->safe_psql('app', "$answer_fn SELECT pg_temp.answer('$quoted')"), qr/^22P02 invalid input syntax for type idempotency.key/,
		"portable edition: $cast is refused as the C type refuses it");
}
# a key lock's number is one nobody can derive another application's from:
# no role OID in it, and the two halves of one key's numbers in two
# applications unrelated
is($node->safe_psql('app', q{
	SELECT (a >> 32) NOT IN (SELECT oid::int8 FROM pg_roles) AND (b >> 32) NOT IN (SELECT oid::int8 FROM pg_roles)
		   AND (a >> 32) <> (b >> 32) AND (a & 4294967295) <> (b & 4294967295)
	  FROM (SELECT idempotency.portable_lock_key('app1', '', 'order-42') AS a,
				   idempotency.portable_lock_key('app2', '', 'order-42') AS b) AS n},
	extra_params => [ '-U', 'owner' ]), 't', 'portable edition: a key lock\'s number carries no role OID, and differs whole between applications');

# (the records above are not part of what follows)
$node->safe_psql($_, q{SELECT idempotency.forget_role('app1')}) for qw(c_edition app);

# key locks: held to the end of the holder's transaction, per application,
# per scope; the same sequence in both editions
for my $db (qw(c_edition app))
{
	my $holder = $node->background_psql($db, extra_params => [ '-U', 'l1' ]);
	$holder->query_safe(q{BEGIN; SELECT idempotency.lock('order-7')});
	my $other = sub { $node->safe_psql($db, $_[0], extra_params => [ '-U', $_[1] // 'l1' ]) };
	my ($rc, $out, $err) = $node->psql($db, q{SET lock_timeout = '100ms'; SELECT idempotency.lock('order-7')},
		extra_params => [ '-U', 'l1' ]);
	is(join(' ', $other->(q{SELECT idempotency.try_lock('order-7')}),
			$other->(q{SELECT idempotency.try_lock('order-7', 'other scope')}),
			$other->(q{SET ROLE app2; SELECT idempotency.try_lock('order-7')}, 'l12'),
			($err =~ /lock timeout/ ? 'waited' : "did not wait: $err")),
		'f t t waited', "$db: a held key lock waits or is refused for the same application only");
	$holder->query_safe('COMMIT');
	is($other->(q{SELECT idempotency.try_lock('order-7')}), 't', "$db: and is free once its transaction ends");
	$holder->quit;
}

# a key lock's number is keyed with the installation's secret, which no
# other role reads, nor the function that computes it; an owner renamed
# under an open session is an error, not a lock that was never taken
is($node->safe_psql('app', q{SELECT has_table_privilege('lnone', 'idempotency.portable_secret', 'SELECT')
	OR has_function_privilege('lnone', 'idempotency.portable_lock_key(text, text, text)', 'EXECUTE')
	OR has_table_privilege('l1', 'idempotency.portable_secret', 'SELECT')}), 'f',
	'no other role reads the secret or computes a lock number');
$node->safe_psql('postgres', q{CREATE ROLE app3; CREATE ROLE l3 LOGIN IN ROLE app3});
$node->safe_psql('app', q{SELECT idempotency.grant_usage('app3')}, extra_params => [ '-U', 'owner' ]);
my $renamed = $node->background_psql('app', on_error_stop => 0, extra_params => [ '-U', 'l3' ]);
$renamed->query_safe(q{SET ROLE app3});
$node->safe_psql('postgres', q{ALTER ROLE app3 RENAME TO app3x});
$renamed->query(q{SELECT idempotency.lock('hot')});
like($renamed->{stderr}, qr/role "app3x" is not an application role/,
	'a lock for an owner renamed under the session is refused: the session is its role by OID, which has no records under its new name');
$renamed->quit;

is($node->safe_psql('app', q{
	WITH g AS MATERIALIZED (SELECT idempotency.issue_token('entropy')::text AS t FROM generate_series(1, 300))
	SELECT (SELECT count(DISTINCT t) FROM g) = 300
	   AND (SELECT bool_and(d.n > 8)
			  FROM (SELECT count(DISTINCT substr(g.t, p, 1)) AS n FROM g, generate_series(4, 35) AS p GROUP BY p) AS d)},
	extra_params => [ '-U', 'l1' ]), 't',
	'300 portable tokens are distinct and every hex digit of them varies (no fixed UUID digit)');

# what is not carried yet says so, in every transaction context
for my $call ("SELECT * FROM idempotency.cleanup_status()",
	"BEGIN; SELECT idempotency.stats_reset(); COMMIT",
	"BEGIN; SAVEPOINT s; SELECT * FROM idempotency.stats(); COMMIT",
	"SELECT * FROM idempotency.stats")
{
	($rc, $out, $err) = $node->psql('app', "\\set VERBOSITY verbose\n$call", extra_params => [ '-U', 'owner' ]);
	like($err, qr/0A000: function idempotency\.\w+ is not in the portable edition/, "0A000 from: $call");
}

# privileges: the installer's tables, the application's EXECUTE
$node->safe_psql('app', q{SELECT idempotency.grant_usage('app_role')}, extra_params => [ '-U', 'owner' ]);
is($node->safe_psql('app', q{SELECT has_function_privilege('app_role', 'idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean)', 'EXECUTE')}),
	't', 'grant_usage grants the API');
is($node->safe_psql('app', q{SELECT count(*) FROM pg_class WHERE relnamespace = 'idempotency'::regnamespace AND relkind = 'r' AND (has_table_privilege('app_role', oid, 'SELECT') OR has_table_privilege('app_role', oid, 'INSERT') OR has_table_privilege('app_role', oid, 'UPDATE') OR has_table_privilege('app_role', oid, 'DELETE'))}),
	'2', 'and no table but state_machines and state_history (row-level security), which everyone reads');
is($node->safe_psql('app', q{SELECT has_function_privilege('nobody', 'idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean)', 'EXECUTE') OR has_function_privilege('nobody', 'idempotency.forget_key(text, text, text, boolean)', 'EXECUTE')}),
	'f', 'a role without it may not call the API or the administration');
is($node->safe_psql('app', q{SELECT count(*) FROM pg_class WHERE relnamespace = 'idempotency'::regnamespace AND relkind = 'r' AND relowner <> 'owner'::regrole}),
	'0', 'the tables belong to the database owner who installed it');
is($node->safe_psql('app', q{SELECT records FROM idempotency.metrics}, extra_params => [ '-U', 'watcher' ]),
	'0', 'a pg_monitor role reads the metrics (forget_role took the records copied above)');

$node->stop;
done_testing();
