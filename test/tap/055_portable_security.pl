# The C edition's security tests, against the portable edition: installed by
# the database's owner, who is not a superuser, into a server that never
# loads the library.
#
# - Hostile installation: the installer's default privileges, which would
#   apply to everything the script creates, are refused and named; a role
#   that may create in the database plants a schema idempotency, which the
#   script refuses, naming its owner; then look-alikes in public and in a
#   schema named as the installer (its "$user"), of every pg_catalog
#   function the script names and of every operator, each recording its
#   calls, with the installer's search_path putting them before pg_catalog:
#   nothing planted runs, and nothing the script creates depends on
#   anything planted.  The attacker can neither create in the edition's
#   schema nor rename it.
# - search_path attacks at run time: an application's session whose
#   search_path puts those look-alikes first, with operators on the key
#   domain planted after the install and temporary views named as every
#   relation of the edition, runs every function of the API, and the
#   database owner runs the administration the same way: nothing planted
#   runs, and the answers are those of a session without any of it.  A
#   function of the application's own in a query of its views sees only
#   its rows; the edition's own tables are the installer's alone.
# - The SECURITY DEFINER bodies called directly (every one that any role
#   may call, found in the catalog, its arguments given values by their
#   names and types): by a role granted nothing, and by another
#   application's login naming the application, each is refused (42501).
# - Trimmed grants: for each function of the API (application_api), an
#   application role from which only that one was revoked is refused it
#   (42501), and refused the body that stands for it called directly too,
#   which the same role with the grant is not.
# - Role rotation: short-lived logins of one application role send the
#   same payments at once; each is charged once, the records are the
#   application's, and a login created afterwards replays them all.
# - Application roles: a consumer without idempotent_begin keeps its
#   records across its logins; a role holding part of the API that is no
#   application role is refused (IK008) in autocommit, a transaction,
#   under a savepoint and in an EXCEPTION block, its body too, and stores
#   nothing, until grant_usage is given to it.

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
IPC::Run::run([ 'make', '-s', '--no-print-directory', '-C', $top, 'portable' ], '>', \$stdout, '2>', \$stderr)
  or BAIL_OUT("make portable failed: $stderr");
my ($script) = $stdout =~ /([^\n]+)\n?\z/;
my $text = PostgreSQL::Test::Utils::slurp_file($script);

my $node = PostgreSQL::Test::Cluster->new('portable_security');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
	CREATE ROLE owner LOGIN;
	CREATE ROLE mallory LOGIN;
	CREATE DATABASE shop OWNER owner;
	CREATE ROLE app1;
	CREATE ROLE l1 LOGIN IN ROLE app1;
	CREATE ROLE app2;
	CREATE ROLE l2 LOGIN IN ROLE app2;
	CREATE ROLE app3;
});

# as(role, sql): run as a login role in shop
sub as
{
	my ($role, $sql) = @_;
	return $node->safe_psql('shop', $sql, extra_params => [ '-U', $role ]);
}

# states(role, name => sql, ...): in one session of role, each statement in
# a transaction rolled back, its SQLSTATE or 'ok': "name: state" lines
my $try = q{
	CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
	DECLARE st text;
	BEGIN
		EXECUTE q;
		RETURN 'ok';
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
		RETURN st;
	END $$;
};
sub states
{
	my ($role, @calls) = @_;
	my $sql = $try;
	while (my ($name, $call) = splice(@calls, 0, 2))
	{
		$sql .= "BEGIN; SELECT \$n\$$name: \$n\$ || pg_temp.try(\$q\$$call\$q\$); ROLLBACK;\n";
	}
	return as($role, $sql);
}

# the attacker was granted CREATE on the database (schemas), and may create
# in public, as everyone may in a database created before PostgreSQL 15;
# what it plants writes down who called it
as('owner', q{
	GRANT CREATE ON DATABASE shop TO mallory;
	GRANT CREATE ON SCHEMA public TO PUBLIC;
	CREATE TABLE public.planted_calls (what text, who text);
	GRANT INSERT, SELECT ON public.planted_calls TO PUBLIC;
});
sub planted_calls
{
	return as('owner', q{SELECT count(*) || coalesce(': ' || string_agg(DISTINCT what || ' as ' || who, ', '), '') FROM public.planted_calls});
}

# plant(schema): look-alikes in schema of every function and aggregate of
# pg_catalog that the script names (with the same argument types) and of
# every operator of pg_catalog
my @names = sort keys %{ { map { $_ => 1 } $text =~ /\b([a-z_][a-z0-9_]*)\s*\(/g } };
my $plant = q{
CREATE FUNCTION pg_temp.plant(target text, names text[]) RETURNS integer LANGUAGE plpgsql AS $plant$
DECLARE
	f record;
	n integer := 0;
	body text;
BEGIN
	FOR f IN
		SELECT p.proname, p.prokind, p.proretset, p.prorettype, pg_catalog.oidvectortypes(p.proargtypes) AS argtypes
		  FROM pg_catalog.pg_proc AS p
		 WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = ANY (names)
		   AND p.prokind IN ('f', 'a') AND p.proallargtypes IS NULL AND p.provariadic = 0
		   AND NOT EXISTS (SELECT FROM pg_catalog.pg_type AS t
							WHERE t.oid = ANY (p.proargtypes::oid[] || p.prorettype) AND t.typtype = 'p'
							  AND t.oid <> 'void'::regtype)
	LOOP
		n := n + 1;
		body := pg_catalog.format($b$BEGIN INSERT INTO public.planted_calls VALUES (%L, current_user::text); RETURN%s; END$b$,
								  f.proname || '(' || f.argtypes || ')',
								  CASE WHEN f.proretset OR f.prorettype = 'void'::regtype THEN '' ELSE ' NULL' END);
		IF f.prokind = 'f' THEN
			EXECUTE pg_catalog.format('CREATE FUNCTION %I.%I(%s) RETURNS %s%s LANGUAGE plpgsql AS %L',
				target, f.proname, f.argtypes, CASE WHEN f.proretset THEN 'SETOF ' ELSE '' END,
				pg_catalog.format_type(f.prorettype, NULL), body);
		ELSE
			EXECUTE pg_catalog.format('CREATE FUNCTION %I.%I(%s%s) RETURNS %s LANGUAGE plpgsql AS %L',
				target, 'planted_' || n, pg_catalog.format_type(f.prorettype, NULL),
				CASE WHEN f.argtypes = '' THEN '' ELSE ', ' || f.argtypes END, pg_catalog.format_type(f.prorettype, NULL), body);
			EXECUTE pg_catalog.format('CREATE AGGREGATE %I.%I(%s) (SFUNC = %I.%I, STYPE = %s)',
				target, f.proname, CASE WHEN f.argtypes = '' THEN '*' ELSE f.argtypes END,
				target, 'planted_' || n, pg_catalog.format_type(f.prorettype, NULL));
		END IF;
	END LOOP;
	FOR f IN
		SELECT o.oprname, o.oprleft, o.oprright, o.oprresult FROM pg_catalog.pg_operator AS o
		 WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprleft <> 0 AND o.oprright <> 0
		   AND NOT EXISTS (SELECT FROM pg_catalog.pg_type AS t
							WHERE t.oid IN (o.oprleft, o.oprright, o.oprresult) AND t.typtype = 'p')
	LOOP
		n := n + 1;
		EXECUTE pg_catalog.format('CREATE FUNCTION %I.%I(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L', target, 'planted_' || n,
			pg_catalog.format_type(f.oprleft, NULL), pg_catalog.format_type(f.oprright, NULL),
			pg_catalog.format_type(f.oprresult, NULL),
			pg_catalog.format($b$BEGIN INSERT INTO public.planted_calls VALUES (%L, current_user::text); RETURN NULL; END$b$,
							  pg_catalog.format_type(f.oprleft, NULL) || ' ' || f.oprname || ' ' || pg_catalog.format_type(f.oprright, NULL)));
		EXECUTE pg_catalog.format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.%I)', target, f.oprname,
			pg_catalog.format_type(f.oprleft, NULL), pg_catalog.format_type(f.oprright, NULL), target, 'planted_' || n);
	END LOOP;
	RETURN n;
END
$plant$;
};
sub plant_sql
{
	my ($schema) = @_;
	return "SELECT pg_temp.plant('$schema', ARRAY[" . join(', ', map { "'$_'" } @names) . "]) > 100;";
}

# install(): the owner runs the script, its search_path putting the
# schemas mallory writes before pg_catalog (a setting of the installer's
# role or session chosen without care, or made by a role that may)
sub install
{
	local $ENV{PGOPTIONS} = '-c search_path=owner,public,pg_catalog';
	return $node->psql('shop', undef,
		extra_params => [ '-U', 'owner', '-v', 'ON_ERROR_STOP=1', '--single-transaction', '-f', $script ]);
}

# the installer's default privileges would apply to everything the script
# creates: one that grants (the tables to a reporting role) and one that
# revokes (functions from PUBLIC, which would close the bodies) are refused
as('owner', q{
	ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO mallory;
	ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
});
my ($rc, $out, $err) = install();
isnt($rc, 0, 'the script refuses an installer with default privileges');
like($err, qr/role "owner" has default privileges, which would apply to the objects of idempotency\n.*for functions \{owner=X\/owner\}, for tables \{owner=\w+\/owner,mallory=r\/owner\}/,
	'and names them');
is(as('owner', q{SELECT count(*) FROM pg_namespace WHERE nspname = 'idempotency'}), '0', 'and creates nothing');
as('owner', q{
	ALTER DEFAULT PRIVILEGES REVOKE SELECT ON TABLES FROM mallory;
	ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
});

# a planted schema idempotency is refused, and nothing is left in it
as('mallory', q{CREATE SCHEMA idempotency;
	CREATE FUNCTION idempotency.owner_name() RETURNS text LANGUAGE sql AS $$SELECT 'app1'$$;});
($rc, $out, $err) = install();
isnt($rc, 0, 'the script refuses a schema idempotency that another role created');
like($err, qr/schema "idempotency" already exists.*\n.*It is owned by role "mallory"/,
	'and names its owner');
is(as('owner', q{SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = 'idempotency'::regnamespace)
	+ (SELECT count(*) FROM pg_proc WHERE pronamespace = 'idempotency'::regnamespace AND proowner <> 'mallory'::regrole)}),
	'0', 'and creates nothing in it');

# the schema moved aside; the look-alikes planted where the installer's
# search_path finds them first
as('mallory', 'ALTER SCHEMA idempotency RENAME TO lookalikes; CREATE SCHEMA owner;');
is(as('mallory', $plant . plant_sql('public') . plant_sql('owner')), "t\nt", 'look-alikes planted in public and in "$user"');
($rc, $out, $err) = install();
is($rc, 0, 'the owner installs the edition through them') or diag($err);
is(planted_calls(), '0', 'no look-alike ran while the script did');
my $depends = q{
	SELECT count(*) FROM pg_depend AS d
	 WHERE ((d.refclassid = 'pg_proc'::regclass
			 AND d.refobjid IN (SELECT oid FROM pg_proc WHERE proowner = 'mallory'::regrole))
			OR (d.refclassid = 'pg_operator'::regclass
				AND d.refobjid IN (SELECT oid FROM pg_operator WHERE oprowner = 'mallory'::regrole))
			OR (d.refclassid = 'pg_namespace'::regclass
				AND d.refobjid IN (SELECT oid FROM pg_namespace WHERE nspowner = 'mallory'::regrole)))
	   AND NOT (d.classid = 'pg_proc'::regclass
				AND d.objid IN (SELECT oid FROM pg_proc WHERE proowner = 'mallory'::regrole))
	   AND NOT (d.classid = 'pg_operator'::regclass
				AND d.objid IN (SELECT oid FROM pg_operator WHERE oprowner = 'mallory'::regrole))};
is(as('owner', $depends), '0', 'nothing the script created depends on anything planted');

# the same statement by statement (no --single-transaction): each
# statement a transaction of its own, the script pins the search_path for
# the session, and gives the installer's back at its end
as('owner', 'DROP SCHEMA idempotency CASCADE');
{
	local $ENV{PGOPTIONS} = '-c search_path=owner,public,pg_catalog';
	($rc, $out, $err) = $node->psql('shop', "\\i $script\nSHOW search_path;",
		extra_params => [ '-U', 'owner', '-v', 'ON_ERROR_STOP=1' ]);
}
is($rc, 0, 'the owner installs the edition statement by statement') or diag($err);
like($out, qr/^owner,public,pg_catalog$/m, 'which gives the session its search_path back');
is(planted_calls(), '0', 'no look-alike ran while the script did');
is(as('owner', $depends), '0', 'nothing the script created depends on anything planted');
is(as('owner', q{
	SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = 'idempotency'::regnamespace AND relowner <> 'owner'::regrole)
		 + (SELECT count(*) FROM pg_proc WHERE pronamespace = 'idempotency'::regnamespace AND proowner <> 'owner'::regrole)
		 + (SELECT count(*) FROM pg_type WHERE typnamespace = 'idempotency'::regnamespace AND typowner <> 'owner'::regrole)
		 + (SELECT count(*) FROM pg_namespace WHERE nspname = 'idempotency' AND nspowner <> 'owner'::regrole)}),
	'0', 'everything in the schema idempotency is the installer\'s');
is(as('owner', q{
	SELECT count(*) FROM pg_class AS c, (VALUES ('mallory'), ('l1'), ('app1')) AS r(role),
		   unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p(privilege)
	 WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relname LIKE 'portable\_%' AND c.relkind IN ('r', 'u')
	   AND has_table_privilege(r.role, c.oid, p.privilege)}),
	'0', 'the edition\'s own tables (claims, the cleanup\'s position, the secret) are the installer\'s alone');
($rc, $out, $err) = $node->psql('shop', 'ALTER SCHEMA idempotency RENAME TO mine', extra_params => [ '-U', 'mallory' ]);
like($err, qr/must be owner of schema idempotency/, 'the attacker cannot rename the edition\'s schema');
($rc, $out, $err) = $node->psql('shop', q{CREATE FUNCTION idempotency.owner_name(integer) RETURNS text LANGUAGE sql AS $$SELECT 'x'$$},
	extra_params => [ '-U', 'mallory' ]);
like($err, qr/permission denied for schema idempotency/, 'nor create anything in it');

# After the install: operators on the key domain, which win over text's for
# a key wherever public is searched, and what reads a temporary view
as('mallory', q{
	CREATE FUNCTION public.key_eq(idempotency.key, idempotency.key) RETURNS boolean LANGUAGE plpgsql
		AS $$BEGIN INSERT INTO public.planted_calls VALUES ('key = key', current_user::text); RETURN true; END$$;
	CREATE OPERATOR public.= (LEFTARG = idempotency.key, RIGHTARG = idempotency.key, FUNCTION = public.key_eq);
	CREATE FUNCTION public.key_text_eq(idempotency.key, text) RETURNS boolean LANGUAGE plpgsql
		AS $$BEGIN INSERT INTO public.planted_calls VALUES ('key = text', current_user::text); RETURN true; END$$;
	CREATE OPERATOR public.= (LEFTARG = idempotency.key, RIGHTARG = text, FUNCTION = public.key_text_eq);
	CREATE FUNCTION public.text_key_eq(text, idempotency.key) RETURNS boolean LANGUAGE plpgsql
		AS $$BEGIN INSERT INTO public.planted_calls VALUES ('text = key', current_user::text); RETURN true; END$$;
	CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = idempotency.key, FUNCTION = public.text_key_eq);
	CREATE FUNCTION public.planted_read(what text) RETURNS SETOF integer LANGUAGE plpgsql
		AS $$BEGIN INSERT INTO public.planted_calls VALUES ('pg_temp.' || what, current_user::text); RETURN; END$$;
});
as('owner', q{
	SELECT idempotency.grant_usage('app1');
	SELECT idempotency.grant_usage('app2');
	-- a handler for idempotent_call (jsonb_strip_nulls itself takes a
	-- second argument from PostgreSQL 18 on)
	CREATE FUNCTION public.w_handler(request jsonb) RETURNS jsonb
	LANGUAGE sql SET search_path = pg_catalog, pg_temp
	RETURN pg_catalog.jsonb_strip_nulls(request);
});

# every function of the API, each name qualified (the session's own
# statements are not under test)
my $workload = q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('w-1', request => '{"a": 1}');
	SELECT idempotency.idempotent_finish('w-1', '{"ok": true}', status_code => 201, headers => '{"Location": "/x"}');
	COMMIT;
	SELECT outcome, status, response, status_code, headers FROM idempotency.idempotent_begin('w-1', request => '{"a": 1}');
	SELECT found, status, request_matches FROM idempotency.lookup('w-1', '', '{"a": 1}');
	SELECT outcome, status FROM idempotency.idempotent_begin('w-1', request => '{"a": 1}', external => true);
	SELECT pg_catalog.set_config('w.attempt', attempt::text, false) IS NOT NULL
	  FROM idempotency.idempotent_begin('w-2', external => true, lease => '1 hour');
	SELECT idempotency.idempotent_checkpoint('w-2', 'step-1', '{"n": 1}', attempt => pg_catalog.current_setting('w.attempt')::integer);
	SELECT idempotency.idempotent_renew('w-2', '2 hours', attempt => pg_catalog.current_setting('w.attempt')::integer) IS NOT NULL;
	SELECT key, recovery_point FROM idempotency.my_stalled_claims;
	SELECT idempotency.idempotent_abandon('w-2', attempt => pg_catalog.current_setting('w.attempt')::integer);
	SELECT pg_catalog.count(*) FROM idempotency.claim_stalled();
	SELECT outcome, status, response FROM idempotency.idempotent_call('w-3', 'public.w_handler(jsonb)', '{"n": 3, "x": null}');
	SELECT outcome, status, response FROM idempotency.idempotent_call('w-3', 'public.w_handler(jsonb)', '{"n": 3, "x": null}');
	SELECT key, status FROM idempotency.my_records ORDER BY key COLLATE "C";
	SELECT idempotency.inbox_receive('billing', 'm-1'), idempotency.inbox_receive('billing', 'm-1');
	SELECT * FROM idempotency.inbox_receive_batch('billing', ARRAY['m-1', 'm-2']) ORDER BY 1;
	SELECT idempotency.consume_token(idempotency.issue_token('pay'), 'pay');
	SELECT pg_catalog.count(*) FROM idempotency.my_tokens;
	SELECT idempotency.outbox_send('orders', '{"o": 1}', 'ORD-1', message_id => 'om-1');
	SELECT message_id, topic, payload, deliveries FROM idempotency.outbox_fetch(10);
	SELECT idempotency.outbox_ack(attempt, ARRAY[message_id]) FROM idempotency.my_outbox;
	SELECT message_id, delivered_at IS NOT NULL FROM idempotency.my_outbox;
	BEGIN;
	SELECT idempotency.lock('w-4');
	SELECT idempotency.try_lock('w-4', 'other');
	COMMIT;
	SELECT idempotency.make_key('order', '42', 'pay')::text, (idempotency.parse_key('pay:42:charge:v1:0d3ad7d4')).*;
	SELECT idempotency.key('w-5')::text, idempotency.text(idempotency.key('w-6'));
};
# the answers to get: the same workload, as the other application, in a
# session without any of it (the answers name no role)
my $baseline = as('l2', $workload);
my $temp_views = join('', map { "CREATE TEMP VIEW $_ AS SELECT * FROM public.planted_read('$_');\n" }
	split /\n/, as('owner', q{SELECT relname FROM pg_class WHERE relnamespace = 'idempotency'::regnamespace AND relkind IN ('r', 'v', 'u')}));
{
	local $ENV{PGOPTIONS} = '-c search_path=public,pg_catalog';
	is(as('l1', $temp_views . $workload), $baseline,
		'an application whose search_path puts the look-alikes first, beside temporary views named as the edition\'s relations, gets every answer');
}
is(planted_calls(), '0', 'and no look-alike ran, nor any temporary view was read');
# the application's views: a function of its own in a query's WHERE sees
# only its rows, however cheap (security_barrier), read without an index
for my $view (qw(my_records:key my_tokens:token my_outbox:message_id my_stalled_claims:key))
{
	my ($name, $column) = split /:/, $view;
	my ($rows, $seen) = split /\n/, as('l2', qq{
		SET enable_indexscan = off;
		SET enable_bitmapscan = off;
		CREATE TEMP TABLE seen (what text);
		CREATE FUNCTION pg_temp.leak(what text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001
			AS \$\$BEGIN INSERT INTO seen VALUES (what); RETURN true; END\$\$;
		SELECT count(*) FROM idempotency.$name WHERE pg_temp.leak(${column}::text);
		SELECT count(*) FROM seen;
	});
	is($seen, $rows, "$name: a function in the caller's WHERE sees only the caller's $rows rows");
}

# the administration, by the database owner (who is no application role),
# through the same look-alikes
{
	local $ENV{PGOPTIONS} = '-c search_path=public,pg_catalog';
	is(as('owner', $temp_views . q{
		SELECT idempotency.grant_usage('app3');
		SELECT idempotency.rename_owner('app2', 'app3');
		SELECT idempotency.forget_key('app1', 'w-1');
		SELECT idempotency.forget_role('app3');
		SELECT idempotency.define_state_machine('order_status', '{"new": ["paid"], "paid": []}');
		SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 FROM idempotency.state_machine_transitions('order_status');
		SELECT idempotency.drop_state_machine('order_status');
		UPDATE idempotency.registry SET expires_at = pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute';
		SELECT idempotency.cleanup() IS NOT NULL;
		SELECT records IS NOT NULL FROM idempotency.metrics;
	}), "\n7\nt\n7\n\nt\n\nt\nt", 'the owner runs the administration the same way');
}
is(planted_calls(), '0', 'and no look-alike ran');

# The bodies, called directly: every SECURITY DEFINER function that any
# role may call, each argument given a plausible value by its name or type
# (the caller by name, so that the list follows the bodies as they change)
sub argument
{
	my ($name, $type) = @_;
	return 'CALLER' if $name eq 'caller';
	return 'API' if $name eq 'api' && $type eq 'text';
	return "'app1'" if $name eq 'role_name' || $name eq 'old_name';
	return "'app9'" if $name eq 'new_name';
	return "'tk_00000000000000000000000000000000'" if $name eq 'token';
	return "''" if $name =~ /scope$/;
	return 'NULL' if $name eq 'status_code' || $name eq 'attempt';
	my %by_type = (text => "'k'", jsonb => "'{}'", interval => "'1 hour'", boolean => 'false',
		integer => '10', bigint => '1', 'text[]' => "ARRAY['m']", oid => "'public.planted_calls'::regclass",
		regprocedure => "'public.w_handler(jsonb)'");
	return $by_type{$type} // 'NULL';
}
sub calls_of
{
	my ($sql) = @_;
	my %calls;
	for my $line (split /\n/, as('owner', $sql))
	{
		my ($name, $arguments) = split /\|/, $line, 2;
		# (the result in the select list, so that the function runs)
		$calls{$name} = "SELECT idempotency.$name("
		  . join(', ', map { my ($n, $t) = split / /, $_, 2; "$n => " . argument($n, $t) }
			  grep { !/^OUT / } split /, /, $arguments // '')
		  . ')';
	}
	return %calls;
}
my %bodies = calls_of(q{
	SELECT proname, pg_get_function_identity_arguments(oid) FROM pg_proc
	 WHERE pronamespace = 'idempotency'::regnamespace AND prosecdef AND has_function_privilege('mallory', oid, 'EXECUTE')});
ok(keys %bodies >= 15 && $bodies{portable_idempotent_begin} && $bodies{portable_lookup} && $bodies{portable_forget_role},
	'the bodies that any role may call: ' . join(' ', sort keys %bodies));
sub bodies_as
{
	my ($role, $caller) = @_;
	return states($role, map { ($_, $bodies{$_} =~ s/CALLER/'$caller'/gr =~ s/API/'lock'/gr) } sort keys %bodies);
}
my $refused = join("\n", map { "$_: 42501" } sort keys %bodies);
# (owner_name() names the caller's own records, which for such a role are
# its own name's: it is the C edition's answer too)
(my $refused_but_owner_name = $refused) =~ s/^portable_owner_name: 42501$/portable_owner_name: ok/m;
is(bodies_as('mallory', 'mallory'), $refused_but_owner_name,
	'a role granted nothing is refused every body naming itself, but owner_name\'s');
is(bodies_as('mallory', 'app1'), $refused, 'and every body naming an application');
is(bodies_as('l2', 'app1'), $refused, 'another application\'s login is refused every body naming the application');

# Trimmed grants: for each function of the API, a role that has all of it
# but that one is refused it, and some body that stands for it, which a
# role with all of it is not; every other answer is the same for both
my %api = calls_of(q{
	SELECT p.proname, pg_get_function_identity_arguments(p.oid)
	  FROM idempotency.application_api AS a JOIN pg_proc AS p
		ON p.pronamespace = 'idempotency'::regnamespace AND p.proname = a.object_name
	 WHERE a.object_type = 'function'});
ok(keys %api >= 15, 'the functions grant_usage grants: ' . join(' ', sort keys %api));
$node->safe_psql('postgres', join('', map { "CREATE ROLE trim_$_;\n" } 'none', sort keys %api));
as('owner', join("\n", "SELECT idempotency.grant_usage('trim_none');",
	map { ("SELECT idempotency.grant_usage('trim_$_');",
		   "SELECT format('REVOKE EXECUTE ON FUNCTION %s FROM trim_$_', oid::regprocedure) FROM pg_proc"
		   . " WHERE pronamespace = 'idempotency'::regnamespace AND proname = '$_' \\gexec") } sort keys %api));
# every body and the function of the API as a role: a superuser's session
# SET ROLE to it (the session's role is that role); "name: state" lines
sub trimmed
{
	my ($role, $f) = @_;
	my $sql = $try;
	for my $name (sort(keys %bodies), $f)
	{
		# (the key locks' body is told which of the two it stands for)
		my $call = ($bodies{$name} // $api{$name}) =~ s/CALLER/'$role'/gr
		  =~ s/API/$f eq 'try_lock' ? "'try_lock'" : "'lock'"/gre;
		$sql .= "SET ROLE $role; BEGIN; SELECT \$n\$$name: \$n\$ || pg_temp.try(\$q\$$call\$q\$); ROLLBACK; RESET ROLE;\n";
	}
	return { map { split /: /, $_, 2 } split /\n/, $node->safe_psql('shop', $sql) };
}
for my $f (sort keys %api)
{
	my $granted = trimmed('trim_none', $f);
	my $trimmed = trimmed("trim_$f", $f);
	my @changed = grep { $granted->{$_} ne $trimmed->{$_} } sort keys %$trimmed;
	is($trimmed->{$f}, '42501', "$f revoked: refused");
	isnt($granted->{$f}, '42501', "$f granted: not refused for privileges");
	ok((grep { $_ ne $f } @changed) && !(grep { $trimmed->{$_} ne '42501' } @changed),
		"$f revoked: its body called directly is refused too (" . join(' ', grep { $_ ne $f } @changed) . ')')
	  or diag(explain({ granted => $granted, revoked => $trimmed }));
}

# Role rotation: short-lived logins of one application role, each sending
# every payment at once
my $keys = 20;
my @leases = map { "v-api-lease$_" } 1 .. 4;
$node->safe_psql('postgres', 'CREATE ROLE api');
$node->safe_psql('postgres', qq{CREATE ROLE "$_" LOGIN IN ROLE api}) for @leases;
as('owner', q{
	SELECT idempotency.grant_usage('api');
	CREATE TABLE public.charges (key text PRIMARY KEY, amount int, lease text);
	GRANT INSERT ON public.charges TO api;
	CREATE FUNCTION public.pay(order_id text, amount int) RETURNS jsonb
	LANGUAGE plpgsql SET search_path = pg_catalog AS $$
	DECLARE
		k idempotency.key := idempotency.make_key('order', order_id, 'pay');
		b record;
		answer jsonb;
		status text;
	BEGIN
		b := idempotency.idempotent_begin(k, 'payments', request => jsonb_build_object('order', order_id, 'amount', amount));
		IF b.outcome <> 'execute' THEN
			RETURN b.response;
		END IF;
		INSERT INTO public.charges VALUES (k, amount, session_user);
		answer := jsonb_build_object('order', order_id, 'charged', amount, 'by', session_user);
		status := idempotency.idempotent_finish(k, answer, 'payments');
		RETURN answer;
	END $$;
	REVOKE EXECUTE ON FUNCTION public.pay(text, int) FROM PUBLIC;
	GRANT EXECUTE ON FUNCTION public.pay(text, int) TO api;
});
my @sessions;
for my $n (0 .. $#leases)
{
	my $s = $node->background_psql('shop', on_error_stop => 0, extra_params => [ '-U', $leases[$n] ]);
	$s->query_until(qr/started/, "\\echo started\n"
		  . join('', map { my $i = ($_ + $n * 5) % $keys + 1; "SELECT public.pay('ORD$i', $i);\n" } 0 .. $keys - 1)
		  . "\\echo finished\n");
	push @sessions, $s;
}
for my $s (@sessions)
{
	$s->query_until(qr/finished/, '');
	is($s->{stderr}, '', 'a lease sent every payment without an error');
	$s->quit;
}
is(as('owner', 'SELECT count(*), count(DISTINCT key) FROM public.charges'), "$keys|$keys",
	'each payment was charged once, whichever lease sent it first');
is(as('owner', q{SELECT count(DISTINCT owner) || ' ' || min(owner) FROM idempotency.registry WHERE scope = 'payments'}),
	'1 api', 'every record belongs to the application role');
$node->safe_psql('postgres', q{CREATE ROLE "v-api-lease5" LOGIN IN ROLE api});
is(as('v-api-lease5', qq{SELECT count(*) FILTER (WHERE public.pay('ORD' || i, i)->>'charged' = i::text) FROM generate_series(1, $keys) AS i}),
	$keys, 'a lease created after all of them replays every stored answer');
is(as('owner', 'SELECT count(*) FROM public.charges'), $keys, 'and charges nothing again');
$node->safe_psql('postgres', qq{DROP ROLE "$leases[0]"});
is(as('v-api-lease5', q{SELECT count(*) FROM idempotency.my_records WHERE scope = 'payments'}), $keys,
	'a lease dropped takes nothing with it');

# A session whose SET ROLE target is renamed under it keeps that role's old
# name in the setting "role": a body called with that name, which another
# role holds now, is refused (42501), as the C edition, which works on its
# role by OID, never works on another role's records
{
	$node->safe_psql('postgres', q{CREATE ROLE rot; CREATE ROLE rot_login LOGIN IN ROLE rot});
	as('owner', q{SELECT idempotency.grant_usage('rot')});
	my $stale = $node->background_psql('shop', on_error_stop => 0, extra_params => [ '-U', 'rot_login' ]);
	$stale->query_safe('SET ROLE rot');
	# the old role renamed, a new application takes its name
	$node->safe_psql('postgres', q{ALTER ROLE rot RENAME TO rot_old; CREATE ROLE rot; CREATE ROLE rot_new LOGIN IN ROLE rot});
	as('owner', q{SELECT idempotency.grant_usage('rot')});
	my $token = as('rot_new', q{SELECT idempotency.issue_token('new')});
	$stale->query(qq{SELECT idempotency.portable_consume_token(caller => 'rot', token => '$token', scope => 'new')});
	like($stale->{stderr}, qr/cannot work for role "rot"/, 'the renamed role\'s session is refused the name it no longer has');
	is(as('rot_new', qq{SELECT idempotency.consume_token('$token', 'new')}), 't', 'and the new role\'s token is still unused');
	$stale->quit;
}

# Application roles: a consumer without idempotent_begin keeps its records
# across its logins
$node->safe_psql('postgres', q{
	CREATE ROLE consumer;
	CREATE ROLE consumer_login1 LOGIN IN ROLE consumer;
	CREATE ROLE consumer_login2 LOGIN IN ROLE consumer;
	CREATE ROLE stray LOGIN;
});
as('owner', q{
	SELECT idempotency.grant_usage('consumer');
	REVOKE EXECUTE ON FUNCTION idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean) FROM consumer;
	GRANT EXECUTE ON FUNCTION idempotency.inbox_receive(text, text, interval) TO stray;
	CREATE TABLE public.effects (what text);
	GRANT INSERT, SELECT ON public.effects TO stray;
});
is(as('consumer_login1', q{SELECT idempotency.inbox_receive('orders', 'evt-1')}), 't', 'the first login of a consumer processes evt-1');
is(as('consumer_login2', q{SELECT idempotency.inbox_receive('orders', 'evt-1')}), 'f', 'the next login turns it away');
is(as('consumer_login2', q{SELECT idempotency.owner_name()}), 'consumer', 'its records are the consumer\'s');
is(states('consumer_login2', begin => q{SELECT idempotency.idempotent_begin('k')},
		body => $bodies{portable_idempotent_begin} =~ s/CALLER/'consumer'/gr),
	"begin: 42501\nbody: 42501", 'it may not claim keys, through the API or its body');

# a role that holds part of the API but is no application role
is(states('stray', autocommit => q{SELECT idempotency.inbox_receive('orders', 'evt-1')},
		body => $bodies{portable_inbox_receive} =~ s/CALLER/'stray'/gr),
	"autocommit: IK008\nbody: IK008", 'a role holding part of the API that is no application role is refused, its body too');
($rc, $out, $err) = $node->psql('shop', q{BEGIN; SELECT idempotency.inbox_receive('orders', 'evt-1'); COMMIT;},
	extra_params => [ '-U', 'stray' ]);
like($err, qr/role "stray" is not an application role of extension "idempotency"/, 'refused in a transaction');
is(as('stray', q{
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
is(as('stray', q{
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
is(as('owner', q{SELECT count(*) FROM idempotency.inbox WHERE owner = 'stray'}), '0', 'nothing was stored under its name');
as('owner', q{SELECT idempotency.grant_usage('stray')});
is(as('stray', q{SELECT idempotency.inbox_receive('orders', 'evt-1')}), 't',
	'once grant_usage was given to it, it is an application of its own');

is(planted_calls(), '0', 'no look-alike ran at any point');
$node->stop;
done_testing();
