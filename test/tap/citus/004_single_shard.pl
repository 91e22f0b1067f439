# Citus: one request, one worker, one connection, for application roles
# (doc/scaling-out-single-shard.md).  Installed at 1.0 and distributed by
# 1.0's citus_setup(), a request as an application role commits in two
# phases and a business table cannot share the registry's co-location group
# with it (the 1.1 library serves the 1.0 objects as before); after ALTER
# EXTENSION ... UPDATE and citus_setup() again, a handler in PL/pgSQL and the
# same steps sent from a client commit on one worker in one phase, with the
# business table co-located with the registry; concurrent duplicates; a
# worker killed in the middle; and what one application role can do to
# another's records (read, replay, finish, pre-claim, call the delegates,
# touch the tables) is what it can on one server: nothing.
#
# Two-phase commits are counted in pg_dist_transaction on the coordinator,
# with Citus's recovery held off.  Runs only where Citus is installed.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CitusCluster;

# --- the cluster ------------------------------------------------------------

my ($coord, @workers) = citus_cluster(q{
# two-phase commits stay in pg_dist_transaction, where they are counted
citus.recover_2pc_interval = -1
});

citus_join('postgres', $coord, @workers);

# the node (by port) holding the registry's shard of a key
sub port_of
{
	my ($key) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT p.nodeport FROM pg_dist_shard_placement AS p
		 WHERE p.shardid = get_shard_id_for_distribution_column('idempotency.registry',
																'$key'::idempotency.key)});
}

# two-phase commits so far: distributed transactions in pg_dist_transaction
# (gid citus_<group>_<pid>_<transaction>_<connection>, one row per worker)
sub twopc
{
	return $coord->safe_psql('postgres',
		q{SELECT count(DISTINCT regexp_replace(gid, '_[0-9]+$', '')) FROM pg_dist_transaction});
}

# --- 1.0: two connections, two phases -------------------------------------

$coord->safe_psql('postgres', q{
	CREATE EXTENSION idempotency VERSION '1.0';
	SELECT idempotency.citus_setup();
	CREATE ROLE app_a LOGIN;
	CREATE ROLE app_b LOGIN;
	CREATE ROLE mallory LOGIN;
	SELECT idempotency.grant_usage('app_a');
	SELECT idempotency.grant_usage('app_b');
	CREATE TABLE charges (key idempotency.key PRIMARY KEY, amount int NOT NULL, by_role text NOT NULL DEFAULT current_user);
	CREATE TABLE apart (key text PRIMARY KEY, amount int NOT NULL);
	SELECT create_distributed_table('apart', 'key', colocate_with => 'none');
	GRANT SELECT, INSERT ON charges, apart TO app_a, app_b, mallory;
});

my $before = twopc();
$coord->safe_psql('postgres', q{
	SET ROLE app_a;
	BEGIN;
	SELECT idempotency.idempotent_begin('old-1');
	INSERT INTO apart VALUES ('old-1', 1);
	SELECT idempotency.idempotent_finish('old-1', '{}');
	COMMIT;
});
ok(twopc() > $before,
	'1.0 objects: the record (as the owner) and the business row (as the caller) commit in two phases');

# the 1.0 layout: a co-located business table is written over two connections
$coord->safe_psql('postgres',
	q{SELECT create_distributed_table('charges', 'key', colocate_with => 'idempotency.registry')});
my ($ret, $out, $err) = $coord->psql('postgres', q{
	SET ROLE app_a;
	BEGIN;
	SELECT idempotency.idempotent_begin('old-2');
	INSERT INTO charges VALUES ('old-2', 1);
	COMMIT;
});
like($err, qr/modified in this transaction by a different user/,
	'1.0 objects: Citus refuses a business table co-located with the registry');

# --- the update ---------------------------------------------------------------

$coord->safe_psql('postgres', 'ALTER EXTENSION idempotency UPDATE');
is($coord->safe_psql('postgres', q{
	SELECT string_agg(p.proname, ' ' ORDER BY p.proname)
	  FROM pg_proc AS p
	 WHERE p.pronamespace = 'idempotency'::regnamespace AND p.proname LIKE 'citus\_%'
	   AND has_function_privilege('app_a', p.oid, 'EXECUTE')}),
	'citus_idempotent_abandon citus_idempotent_begin citus_idempotent_checkpoint citus_idempotent_finish citus_idempotent_renew citus_lookup citus_my_outbox citus_my_records citus_my_tokens citus_status',
	'the update grants the delegates to the roles grant_usage() was given to');

# before citus_setup() runs again, nothing changes
($ret, $out, $err) = $coord->psql('postgres', q{
	SET ROLE app_a;
	BEGIN;
	SELECT idempotency.idempotent_begin('old-3');
	INSERT INTO charges VALUES ('old-3', 1);
	COMMIT;
});
like($err, qr/modified in this transaction by a different user/,
	'updated but citus_setup() not run again: calls run on the coordinator, as before');

# in between, the API works as with 1.0's objects: a request on a table of
# its own, my_records, and what needs the update's columns is refused with
# the hint to run citus_setup()
is($coord->safe_psql('postgres', q{
	SET ROLE app_a;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('between-1');
	SELECT idempotency.idempotent_finish('between-1', '{"n": 1}');
	COMMIT;
	SELECT outcome || ' ' || response::text || ' ' || coalesce(recovery_point, '-')
	  FROM idempotency.idempotent_begin('between-1');
	SELECT count(*) FROM idempotency.my_records WHERE key = 'between-1' AND recovery_point IS NULL}),
	"execute\ncompleted\nreplay {\"n\": 1} -\n1",
	'updated but citus_setup() not run again: begin, finish, replay and my_records work');
($ret, $out, $err) = $coord->psql('postgres', q{
	SET ROLE app_a;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('between-2');
	SELECT idempotency.idempotent_checkpoint('between-2', 'step-1');
	COMMIT;
});
like($err, qr/ERROR:  recording a recovery point needs citus_setup\(\) to run again after the update of extension "idempotency".*HINT:  Run SELECT idempotency.citus_setup\(\) on the coordinator\./s,
	'updated but citus_setup() not run again: a recovery point is refused with the hint to run it');

$coord->safe_psql('postgres', 'SELECT idempotency.citus_setup()');
is($coord->safe_psql('postgres', q{
	SELECT count(*) FROM pg_dist_object AS o
	 WHERE o.classid = 'pg_proc'::regclass AND o.force_delegation
	   AND o.objid::regprocedure::text LIKE 'idempotency.citus\_%'}),
	'6', 'citus_setup() distributes the six delegates with force_delegation');

# --- one worker, one connection, one phase ---------------------------------

$coord->safe_psql('postgres', q{
	CREATE FUNCTION pay(k text, amount int) RETURNS jsonb
	LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
	DECLARE
		b record;
		result jsonb;
	BEGIN
		b := idempotency.idempotent_begin(k);
		IF b.outcome <> 'execute' THEN
			RETURN b.response;
		END IF;
		INSERT INTO charges (key, amount) VALUES (k, amount);
		result := jsonb_build_object('charged', amount);
		PERFORM idempotency.idempotent_finish(k, result);
		RETURN result;
	END $$;
	GRANT EXECUTE ON FUNCTION pay(text, int) TO app_a, app_b, mallory;
});

$before = twopc();
is($coord->safe_psql('postgres', q{SET ROLE app_a; SELECT pay('h-1', 5); SELECT pay('h-1', 6)}),
	qq{{"charged": 5}\n{"charged": 5}},
	'a PL/pgSQL handler as an application role: executes, then replays');
my $steps = q{
	SET ROLE app_a;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('c-1');
	INSERT INTO charges (key, amount) VALUES ('c-1', 7);
	SELECT idempotency.idempotent_finish('c-1', '{"charged": 7}');
	COMMIT;
};
is($coord->safe_psql('postgres', $steps), "execute\ncompleted",
	'the same steps sent one by one from a client');
is(twopc(), $before, 'no two-phase commit for either');

# idempotent_call on a distributed registry: the handler's writes would not
# be on the record's shard, so it is refused, and nothing is claimed
($ret, $out, $err) = $coord->psql('postgres', q{
	SET ROLE app_a;
	SELECT * FROM idempotency.idempotent_call('call-1', 'pg_catalog.jsonb_strip_nulls(jsonb)', '{}');
});
like($err, qr/ERROR:  idempotent_call is not available on a distributed registry/,
	'idempotent_call is refused on a distributed registry');
is($coord->safe_psql('postgres', q{SET ROLE app_a; SELECT found FROM idempotency.lookup('call-1')}),
	'f', 'and claims nothing');

# the remote commands: one connection, as the caller, a plain COMMIT
($ret, $out, $err) = $coord->psql('postgres',
	"SET citus.log_remote_commands = on; SET client_min_messages = log;\n"
	  . $steps =~ s/c-1/c-2/gr);
my %conns = map { $_ => 1 } ($err =~ /on server (\S+ connectionId: \d+)/g);
is(scalar(keys %conns), 1, 'one connection to one worker');
like((keys %conns)[0], qr/^app_a\@/, 'opened as the caller');
unlike($err, qr/PREPARE TRANSACTION/, 'no PREPARE TRANSACTION');
like($err, qr/issuing COMMIT\n/, 'a plain COMMIT');
is($coord->safe_psql('postgres', q{
	SELECT string_agg(key || '=' || amount || ' by ' || by_role, ', ' ORDER BY key)
	  FROM charges WHERE key::text LIKE 'h-%' OR key::text LIKE 'c-%'}),
	'c-1=7 by app_a, c-2=7 by app_a, h-1=5 by app_a',
	'one business row per key, written as the caller');

# the whole handler handed over: distributed by its key with
# force_delegation, in the registry's co-location group, it runs on the
# key's worker, where begin, the write and finish run as on one server
$coord->safe_psql('postgres', q{
	CREATE FUNCTION pay_on_worker(k idempotency.key, amount int) RETURNS jsonb
	LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
	DECLARE
		b record;
		result jsonb;
	BEGIN
		b := idempotency.idempotent_begin(k::text);
		IF b.outcome <> 'execute' THEN
			RETURN b.response;
		END IF;
		INSERT INTO charges (key, amount) VALUES (k, amount);
		result := jsonb_build_object('charged', amount, 'port', current_setting('port'));
		PERFORM idempotency.idempotent_finish(k::text, result);
		RETURN result;
	END $$;
	SELECT create_distributed_function('pay_on_worker(idempotency.key, int)', 'k',
		colocate_with => 'idempotency.registry', force_delegation => true);
	GRANT EXECUTE ON FUNCTION pay_on_worker(idempotency.key, int) TO app_a;
});
$before = twopc();
my $w1 = port_of('w-1');
is($coord->safe_psql('postgres', q{
	SET ROLE app_a;
	SELECT * FROM pay_on_worker('w-1', 3);
	SELECT * FROM pay_on_worker('w-1', 4)}),
	qq{{"port": "$w1", "charged": 3}\n{"port": "$w1", "charged": 3}},
	'a handler distributed by the key runs on the key\'s worker: executes, then replays');
my $w2 = port_of('w-2');
is($coord->safe_psql('postgres', q{
	SET ROLE app_a;
	BEGIN;
	SELECT * FROM pay_on_worker('w-2', 5);
	COMMIT;
	BEGIN;
	SELECT * FROM pay_on_worker('w-2', 6);
	COMMIT}),
	qq{{"port": "$w2", "charged": 5}\n{"port": "$w2", "charged": 5}},
	'in a transaction block too');
is(twopc(), $before, 'no two-phase commit for the handler on the worker');
is($coord->safe_psql('postgres', q{
	SELECT string_agg(key || '=' || amount || ' by ' || by_role, ', ' ORDER BY key)
	  FROM charges WHERE key::text LIKE 'w-%'}),
	'w-1=3 by app_a, w-2=5 by app_a',
	'one business row per key, written as the caller');

# a claim left open, without external => true: the worker refuses the
# COMMIT (its error reaches the caller as a warning, then Citus' own error),
# and neither the claim nor the business row commits there
($ret, $out, $err) = $coord->psql('postgres', q{
	SET ROLE app_a;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('c-open');
	INSERT INTO charges (key, amount) VALUES ('c-open', 7);
	COMMIT;
});
like($err, qr/WARNING:  idempotency key "c-open" in scope "" was claimed but not finished.*ERROR:  could not commit transaction/s,
	'a claim not finished in its transaction fails the commit through the coordinator');
is($coord->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM idempotency.registry WHERE key = 'c-open') || ' '
		   || (SELECT count(*) FROM charges WHERE key = 'c-open')}),
	'0 0', 'and nothing of it committed on the worker: neither the claim nor the business row');

# a counter that sees two-phase commits: a transaction over both workers
my %key_on;
for my $i (1 .. 50)
{
	$key_on{port_of("spread-$i")} //= "spread-$i";
	last if keys %key_on == 2;
}
my @spread = values %key_on;
$before = twopc();
$coord->safe_psql('postgres',
	"SET ROLE app_a; BEGIN; SELECT pay('$spread[0]', 1); SELECT pay('$spread[1]', 1); COMMIT;");
ok(twopc() > $before, 'two keys on two workers in one transaction do commit in two phases (the count works)');

# --- calls that run as the owner on the coordinator first ----------------------

# require_token reads the tokens, co-located and distributed by the same
# value: handed over too
my $token = $coord->safe_psql('postgres', q{SET ROLE app_a; SELECT idempotency.issue_token()});
$before = twopc();
is($coord->safe_psql('postgres', qq{
	SET ROLE app_a;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('$token', require_token => true);
	INSERT INTO charges (key, amount) VALUES ('$token', 2);
	SELECT idempotency.idempotent_finish('$token', '{}');
	COMMIT;
}), "execute\ncompleted", 'a begin with require_token, a business write and the finish');
is(twopc(), $before, 'in one phase');

# my_records read first (as the owner) does not stand in the way
$before = twopc();
is($coord->safe_psql('postgres', q{
	SET ROLE app_a;
	BEGIN;
	SELECT count(*) > 0 FROM idempotency.my_records;
	SELECT pay('after-read', 1);
	COMMIT;
}), "t\n{\"charged\": 1}", 'my_records read, then a request, in one transaction');
is(twopc(), $before, 'in one phase');

# once the tokens were written as their owner in a transaction, its later
# calls stay on the coordinator, as before (Citus would refuse co-located
# placements written over both connections)
$before = twopc();
is($coord->safe_psql('postgres', q{
	SET ROLE app_a;
	BEGIN;
	SELECT idempotency.issue_token() AS t \gset
	SELECT outcome FROM idempotency.idempotent_begin(:'t', require_token => true);
	INSERT INTO apart VALUES (:'t', 1);
	SELECT idempotency.idempotent_finish(:'t', '{}');
	COMMIT;
}), "execute\ncompleted", 'a token issued, then a request with it: its calls stay on the coordinator');
ok(twopc() > $before, 'in two phases, as with 1.0');

# --- the answers are the worker's, errors included ---------------------------

($ret, $out, $err) = $coord->psql('postgres', q{
	\set VERBOSITY verbose
	SET ROLE app_a;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('e-1');
	SAVEPOINT s;
	SELECT idempotency.idempotent_finish('e-1', '{}', attempt => -1);
	ROLLBACK TO SAVEPOINT s;
	SELECT idempotency.idempotent_finish('e-1', '{"ok": true}');
	COMMIT;
	SELECT status FROM idempotency.lookup('e-1');
}, on_error_stop => 0);
like($err, qr/ERROR:  IK004:/, 'an attempt never issued: the worker\'s SQLSTATE reaches the caller');
unlike($err, qr/CONTEXT:.*citus_idempotent/s, 'without the internal call in its context');
is($out, "execute\ncompleted\ncompleted",
	'after ROLLBACK TO SAVEPOINT the claim is still the transaction\'s (the worker\'s backend follows the savepoint)');
($ret, $out, $err) = $coord->psql('postgres', q{
	SET ROLE app_a;
	DO $$
	BEGIN
		PERFORM idempotency.idempotent_abandon('never-claimed', attempt => 1);
	EXCEPTION WHEN OTHERS THEN
		RAISE NOTICE 'caught %', SQLSTATE;
	END $$;
});
like($err, qr/NOTICE:  caught IK/, 'an error of a delegated call is caught by a PL/pgSQL EXCEPTION block');

# --- concurrent duplicates -----------------------------------------------------

my $first = $coord->background_psql('postgres');
my $second = $coord->background_psql('postgres');
is($first->query_safe(q{SET ROLE app_a; BEGIN; SELECT pay('dup', 3);}),
	'{"charged": 3}', 'the first request executes and holds its claim');
is($second->query_safe(q{
	SET ROLE app_a;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('dup', wait => false);
	ROLLBACK;
}), 'in_progress', 'a duplicate with wait => false inside a transaction block answers at once');
$second->query_until(qr/sent/, q{
	\echo sent
	SELECT pay('dup', 3);
});
ok( $coord->poll_query_until('postgres', q{
	SELECT sum(result::int) > 0 FROM run_command_on_workers(
		'SELECT count(*) FROM pg_locks WHERE NOT granted')}),
	'a duplicate waits for the first on the key\'s worker');
$first->query_safe('COMMIT');
is($second->query_safe('SELECT 1'), qq{{"charged": 3}\n1}, 'then replays the same answer');
$first->quit;
$second->quit;
is($coord->safe_psql('postgres', q{SELECT count(*) FROM charges WHERE key = 'dup'}),
	'1', 'one charge');

# --- a worker killed in the middle ----------------------------------------------

my $kill_key = 'kill-1';
my $victim = (grep { $_->port == port_of($kill_key) } @workers)[0];
my $session = $coord->background_psql('postgres', on_error_stop => 0);
$session->query_safe(qq{
	SET ROLE app_a;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('$kill_key');
	INSERT INTO charges (key, amount) VALUES ('$kill_key', 1);
});
$victim->stop('immediate');
my ($res, $failed) = $session->query(
	qq{SELECT idempotency.idempotent_finish('$kill_key', '{"charged": 1}')});
ok($failed, 'with its worker gone, the transaction fails');
$session->{stderr} = '';
$session->query('ROLLBACK');
$session->quit;
$victim->start;
is($coord->safe_psql('postgres', qq{SET ROLE app_a; SELECT pay('$kill_key', 1); SELECT pay('$kill_key', 2)}),
	qq{{"charged": 1}\n{"charged": 1}},
	'the retry executes (nothing of the first attempt was committed), then replays');
is($coord->safe_psql('postgres', qq{SELECT count(*) FROM charges WHERE key = '$kill_key'}),
	'1', 'one charge');

# --- isolation between roles ------------------------------------------------------

# app_b cannot read or replay app_a's record of h-1
is($coord->safe_psql('postgres', q{SET ROLE app_b; SELECT found FROM idempotency.lookup('h-1')}),
	'f', 'another role does not find the record');
is($coord->safe_psql('postgres', q{SET ROLE app_b; SELECT count(*) FROM idempotency.my_records}),
	'0', 'nor sees it in my_records');
is($coord->safe_psql('postgres', q{SET ROLE app_b; SELECT found FROM idempotency.citus_lookup('h-1', '', NULL)}),
	'f', 'nor through the delegate called directly');

# app_b's begin of the same key claims its own record: no replay of app_a's
is($coord->safe_psql('postgres', q{
	SET ROLE app_b;
	BEGIN;
	SELECT outcome || ' ' || coalesce(response::text, '-')
	  FROM idempotency.idempotent_begin('h-1');
	ROLLBACK;
}), 'execute -', 'another role\'s begin of the key executes: it never replays the first role\'s answer');

# app_b cannot finish or abandon app_a's claim
$first = $coord->background_psql('postgres');
$first->query_safe(q{SET ROLE app_a; BEGIN; SELECT idempotency.idempotent_begin('held');});
($ret, $out, $err) = $coord->psql('postgres', q{
	\set VERBOSITY verbose
	SET ROLE app_b;
	SELECT idempotency.idempotent_finish('held', '{"forged": true}', attempt => 1);
});
like($err, qr/ERROR:  IK\d+:/, 'another role cannot finish a claim');
($ret, $out, $err) = $coord->psql('postgres', q{
	\set VERBOSITY verbose
	SET ROLE app_b;
	SELECT idempotency.citus_idempotent_abandon('held', '', 1);
});
like($err, qr/ERROR:  IK\d+:/, 'nor abandon it through the delegate');
$first->query_safe(q{SELECT idempotency.idempotent_finish('held', '{"by": "a"}'); COMMIT;});
$first->quit;
is($coord->safe_psql('postgres', q{SET ROLE app_a; SELECT response ->> 'by' FROM idempotency.lookup('held')}),
	'a', 'the owner\'s answer stands');

# pre-claim: app_b claims a key first; app_a's request still executes
$coord->safe_psql('postgres', q{SET ROLE app_b; SELECT idempotency.idempotent_begin('pre', external => true);});
is($coord->safe_psql('postgres', q{SET ROLE app_a; SELECT pay('pre', 9)}),
	'{"charged": 9}', 'a key claimed by another role first is not taken from this one');

# no table privilege, on the coordinator or on a worker
for my $node ($coord, @workers)
{
	($ret, $out, $err) = $node->psql('postgres',
		q{SET ROLE app_a; SELECT count(*) FROM idempotency.registry});
	like($err, qr/permission denied for table registry/,
		'an application role cannot read the registry on ' . $node->name);
	($ret, $out, $err) = $node->psql('postgres', q{
		SET ROLE app_a;
		INSERT INTO idempotency.registry (owner, scope, key, status, attempt, created_at, updated_at, expires_at)
		VALUES ('app_b', '', 'planted', 'completed', 1, now(), now(), now() + interval '1 day')});
	like($err, qr/permission denied for table registry/,
		'nor write it on ' . $node->name);
}

# a role without the API cannot call the delegates, on the coordinator or a
# worker: open to everyone, a delegate refuses a caller who may not run the
# function it stands for
for my $node ($coord, @workers)
{
	($ret, $out, $err) = $node->psql('postgres',
		q{SET ROLE mallory; SELECT idempotency.citus_idempotent_begin('m', '', NULL, '1 day', NULL, true, false, NULL, false, false)});
	like($err, qr/permission denied for function idempotent_begin/,
		'a role without the API cannot call a delegate on ' . $node->name);
}

# planted objects: a caller's search_path does not reach the delegated call
$coord->safe_psql('postgres', q{
	CREATE SCHEMA trap;
	GRANT USAGE ON SCHEMA trap TO app_a;
	CREATE FUNCTION trap.citus_idempotent_begin(k text, VARIADIC rest text[]) RETURNS text
		LANGUAGE sql AS $$SELECT 'trapped'$$;
	GRANT EXECUTE ON FUNCTION trap.citus_idempotent_begin(text, text[]) TO app_a;
});
is($coord->safe_psql('postgres', q{
	SET ROLE app_a;
	SET search_path = trap, public;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('planted-1', external => true);
	COMMIT;
}), 'execute', 'objects planted on the caller\'s search_path are not called');

# the records are filed under the role that made each
is($coord->safe_psql('postgres', q{
	SELECT string_agg(r.owner || ':' || r.key, ' ' ORDER BY r.owner, r.key::text)
	  FROM idempotency.registry AS r
	 WHERE r.key::text = ANY (ARRAY['h-1', 'pre', 'held'])}),
	'app_a:h-1 app_a:held app_a:pre app_b:pre',
	'every record is filed under the role that made it');

# a null key: Citus hashes a distributed function's distribution argument
# without looking at its null flag, so a call given NULL reached the key's hash
# function as a null pointer and crashed the coordinator; it is an error
for my $call (
	q{SELECT idempotency.lookup(NULL)},
	q{SELECT * FROM idempotency.idempotent_begin(NULL)},
	q{SELECT idempotency.idempotent_finish(NULL, '{}')},
	q{SELECT * FROM idempotency.citus_lookup(NULL, '', NULL)},
	q{SELECT pay_on_worker(NULL, 1)},
	q{BEGIN; SELECT * FROM idempotency.citus_lookup(NULL, '', NULL); COMMIT})
{
	($ret, $out, $err) = $coord->psql('postgres',
		qq{\\set VERBOSITY verbose
		   SET ROLE app_a; $call});
	like($err, qr/ERROR:  22004: idempotency key must not be null/,
		"a null key is refused: $call");
}
is($coord->safe_psql('postgres', q{SELECT 1}), '1', 'and the coordinator is still up');

# a message id is text, hashed by PostgreSQL's own function, which a NULL
# would crash: the call is refused before Citus routes it, whichever form it
# takes (a constant, a named argument, a PL/pgSQL variable, a parameter of a
# prepared statement)
for my $call (
	q{SELECT idempotency.inbox_receive('c', NULL)},
	q{SELECT * FROM idempotency.inbox_receive('c', NULL)},
	q{SELECT idempotency.inbox_receive(message_id => NULL, consumer => 'c')},
	q{DO $$DECLARE m text; r boolean; BEGIN SELECT * FROM idempotency.inbox_receive('c', m) INTO r; END $$},
	q{PREPARE p(text) AS SELECT idempotency.inbox_receive('c', $1); EXECUTE p(NULL)})
{
	($ret, $out, $err) = $coord->psql('postgres',
		qq{\\set VERBOSITY verbose
		   SET ROLE app_a; $call});
	like($err, qr/ERROR:  22004: message_id must not be null/,
		"a null message id is refused: $call");
}
($ret, $out, $err) = $coord->psql('postgres', q{SET ROLE app_a; SELECT idempotency.inbox_receive(NULL, 'm')});
like($err, qr/ERROR:  consumer must not be null/, 'a null consumer (not what Citus routes by) is refused where the call runs');
is($coord->safe_psql('postgres', q{SELECT 1}), '1', 'and the coordinator is still up after them');

# the refusal is an ordinary error: under a savepoint rolled back, or caught
# in a PL/pgSQL EXCEPTION block, the transaction's other work commits
($ret, $out, $err) = $coord->psql('postgres', q{
	SET ROLE app_a;
	BEGIN;
	SELECT idempotency.inbox_receive('c', 'null-sp-1');
	SAVEPOINT s;
	DO $$BEGIN PERFORM * FROM idempotency.inbox_receive('c', NULL); END $$;
	ROLLBACK TO SAVEPOINT s;
	DO $$
	BEGIN
		BEGIN
			PERFORM * FROM idempotency.inbox_receive('c', NULL);
		EXCEPTION WHEN null_value_not_allowed THEN
			RAISE NOTICE 'refused';
		END;
		PERFORM idempotency.inbox_receive('c', 'null-sp-2');
	END $$;
	COMMIT;
	SELECT idempotency.inbox_receive('c', 'null-sp-1') OR idempotency.inbox_receive('c', 'null-sp-2');
}, on_error_stop => 0);
like($err, qr/ERROR:  message_id must not be null.*NOTICE:  refused/s,
	'a null refused under a savepoint, then caught in an EXCEPTION block');
is($out, "t\nf", 'and the rest of the transaction commits');

done_testing();
