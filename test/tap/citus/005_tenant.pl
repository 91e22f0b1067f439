# Citus: the extension's tables distributed by tenant,
# citus_setup(distribute_by => 'scope').  The registry and the tokens by
# their scope, in one co-location group that a business table distributed by
# a tenant column of the same type (text COLLATE "C") joins, the inbox by its
# consumer; a tenant's requests through the coordinator, as an
# application role, each one worker and one phase; every record of a
# tenant on one shard; tokens and the inbox beside them; and the settings
# citus_setup() refuses.  Runs only where Citus is installed.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CitusCluster;

my ($coord, @workers) = citus_cluster(q{
citus.recover_2pc_interval = -1
});

citus_join('postgres', $coord, @workers);

sub twopc
{
	return $coord->safe_psql('postgres',
		q{SELECT count(DISTINCT regexp_replace(gid, '_[0-9]+$', '')) FROM pg_dist_transaction});
}

$coord->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	CREATE ROLE app LOGIN;
	SELECT idempotency.grant_usage('app');
});

# --- what citus_setup() refuses ------------------------------------------------

my ($ret, $out, $err) = $coord->psql('postgres', q{
	\set VERBOSITY verbose
	SELECT idempotency.citus_setup(distribute_by => 'tenant');
});
like($err, qr/ERROR:  22023: invalid value for distribute_by: "tenant"/,
	'an unknown distribution: 22023');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM pg_dist_partition'), '0',
	'and nothing was distributed');

$coord->safe_psql('postgres', q{SELECT idempotency.citus_setup(distribute_by => 'scope')});
is($coord->safe_psql('postgres', q{
	SELECT string_agg(object || ' by ' || distributed_by, ', ' ORDER BY object)
	  FROM idempotency.citus_status()
	 WHERE kind = 'table' AND distribution = 'distributed'}),
	'idempotency.inbox by consumer, idempotency.outbox by ordering_key, idempotency.registry by scope, idempotency.tokens by scope',
	'distributed by tenant: registry and tokens by scope, inbox by consumer');
is($coord->safe_psql('postgres', q{
	SELECT count(DISTINCT colocation_id) FROM idempotency.citus_status()
	 WHERE object = ANY (ARRAY['idempotency.registry', 'idempotency.tokens'])}),
	'1', 'the registry and the tokens in one co-location group');
is($coord->safe_psql('postgres', q{
	SELECT count(DISTINCT colocation_id) FROM idempotency.citus_status()
	 WHERE object = ANY (ARRAY['idempotency.registry', 'idempotency.inbox'])}),
	'2', 'the inbox in a group of its own');
is($coord->safe_psql('postgres', q{
	SELECT string_agg(object || ' ' || distributed_by, ', ' ORDER BY object)
	  FROM idempotency.citus_status()
	 WHERE kind = 'function' AND object LIKE '%begin%'}),
	'idempotency.citus_idempotent_begin(idempotency.key,text,jsonb,interval,interval,boolean,boolean,interval,boolean,boolean) scope, idempotency.idempotent_begin(text,text,jsonb,interval,interval,boolean,boolean,interval,boolean,boolean) scope',
	'the API and its delegates by their scope');

$coord->safe_psql('postgres', q{SELECT idempotency.citus_setup(distribute_by => 'scope')});
pass('citus_setup() again with the same distribution');
($ret, $out, $err) = $coord->psql('postgres', q{
	\set VERBOSITY verbose
	SELECT idempotency.citus_setup();
});
like($err, qr/ERROR:  55000: table idempotency.registry is already distributed by column "scope"/,
	'another distribution than the one the tables have: 55000');

# --- a tenant's business table joins the group -----------------------------------

($ret, $out, $err) = $coord->psql('postgres', q{
	CREATE TABLE wrong_collation (tenant text, id int, PRIMARY KEY (tenant, id));
	SELECT create_distributed_table('wrong_collation', 'tenant', colocate_with => 'idempotency.registry');
});
like($err, qr/cannot colocate|collation/i,
	'a tenant column of another collation cannot join the group');

$coord->safe_psql('postgres', q{
	CREATE TABLE orders (tenant text COLLATE "C", id text, amount int NOT NULL, PRIMARY KEY (tenant, id));
	SELECT create_distributed_table('orders', 'tenant', colocate_with => 'idempotency.registry');
	GRANT SELECT, INSERT ON orders TO app;
	CREATE FUNCTION place(tenant text, k text, amount int) RETURNS jsonb
	LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
	DECLARE
		b record;
		result jsonb;
	BEGIN
		b := idempotency.idempotent_begin(k, scope => tenant, external => true);
		IF b.outcome <> 'execute' THEN
			RETURN b.response;
		END IF;
		INSERT INTO orders VALUES (tenant, k, amount);
		result := jsonb_build_object('placed', amount);
		PERFORM idempotency.idempotent_finish(k, result, scope => tenant);
		RETURN result;
	END $$;
	GRANT EXECUTE ON FUNCTION place(text, text, int) TO app;
});
pass('a business table distributed by a text COLLATE "C" tenant column joins the group');

# --- a tenant's requests: one worker, one phase ------------------------------------

my $before = twopc();
my $calls = join('', map { "SELECT place('acme', 'o-$_', $_);" } 1 .. 20);
$coord->safe_psql('postgres', "SET ROLE app; $calls $calls");
is(twopc(), $before, '40 requests of one tenant as an application role: no two-phase commit');
is($coord->safe_psql('postgres', q{SELECT count(*) || ' ' || sum(amount) FROM orders WHERE tenant = 'acme'}),
	'20 210', 'one order per key: the second round replayed');
is($coord->safe_psql('postgres', q{
	SELECT count(DISTINCT get_shard_id_for_distribution_column('idempotency.registry', r.scope))
	  FROM idempotency.registry AS r WHERE r.scope = 'acme'}),
	'1', 'a tenant\'s records are on one shard');

($ret, $out, $err) = $coord->psql('postgres', q{
	SET citus.log_remote_commands = on;
	SET client_min_messages = log;
	SET ROLE app;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('c-1', 'globex', external => true);
	INSERT INTO orders VALUES ('globex', 'c-1', 5);
	SELECT idempotency.idempotent_finish('c-1', '{}', 'globex');
	COMMIT;
});
my %conns = map { $_ => 1 } ($err =~ /on server (\S+ connectionId: \d+)/g);
is(scalar(keys %conns), 1, 'a client\'s steps: one connection to one worker');
unlike($err, qr/PREPARE TRANSACTION/, 'committed without PREPARE TRANSACTION');

# --- tokens and the inbox beside the tenant's rows ----------------------------------

my $token = $coord->safe_psql('postgres', q{SET ROLE app; SELECT idempotency.issue_token('acme')});
is($coord->safe_psql('postgres', qq{
	SET ROLE app;
	SELECT outcome FROM idempotency.idempotent_begin('$token', 'acme', require_token => true, external => true);
	SELECT idempotency.consume_token('$token', 'acme');
}), "execute\nf", 'a token of the tenant is found by require_token and consumed by it');

is($coord->safe_psql('postgres', q{
	SET ROLE app;
	BEGIN;
	SELECT idempotency.inbox_receive('acme', 'msg-1');
	INSERT INTO orders VALUES ('acme', 'from-msg-1', 1);
	COMMIT;
	SELECT idempotency.inbox_receive('acme', 'msg-1');
}), "t\nf", 'an inbox message of the tenant, received with a business write, then seen');
is($coord->safe_psql('postgres', q{
	SELECT count(DISTINCT get_shard_id_for_distribution_column('idempotency.inbox', i.consumer))
	  FROM idempotency.inbox AS i WHERE i.consumer = 'acme'}),
	'1', 'the tenant\'s inbox entries on one shard');

# --- a NULL scope ------------------------------------------------------------------

# Citus hashes a distributed function's distribution argument without looking
# at its null flag, and a scope (or a consumer) is text, hashed by
# PostgreSQL's own function: a call given NULL there would crash the
# coordinator.  It is refused as the function itself refuses it.
for my $call (
	[ q{SELECT idempotency.lookup('k', NULL)}, 'scope' ],
	[ q{SELECT * FROM idempotency.citus_lookup('k', NULL, NULL)}, 'scope' ],
	[ q{BEGIN; SELECT * FROM idempotency.idempotent_begin('k', NULL); COMMIT}, 'scope' ],
	[ q{SELECT idempotency.idempotent_finish('k', '{}', scope => NULL)}, 'scope' ],
	[ q{DO $$DECLARE s text; BEGIN PERFORM * FROM idempotency.citus_lookup('k', s, NULL); END $$}, 'scope' ],
	[ q{SELECT idempotency.consume_token('t', NULL)}, 'scope' ],
	[ q{SELECT idempotency.inbox_receive(NULL, 'm')}, 'consumer' ])
{
	my ($sql, $arg) = @$call;
	($ret, $out, $err) = $coord->psql('postgres', qq{\\set VERBOSITY verbose
		SET ROLE app; $sql});
	like($err, qr/ERROR:  22004: $arg must not be null/, "a null $arg is refused: $sql");
}
is($coord->safe_psql('postgres', q{SELECT 1}), '1', 'and the coordinator is still up');

# An application's handler distributed by a text tenant argument, declared
# STRICT as doc/scaling-out.md says: PostgreSQL answers NULL for a NULL
# tenant without calling it, so Citus never routes the call, in autocommit,
# in a transaction and as a prepared statement past its custom plans.
$coord->safe_psql('postgres', q{
	CREATE FUNCTION public.tenant_orders(tenant text) RETURNS int
	LANGUAGE sql STRICT AS $$ SELECT count(*)::int FROM public.orders AS o WHERE o.tenant = tenant_orders.tenant $$;
	SELECT create_distributed_function('public.tenant_orders(text)', '$1', colocate_with => 'public.orders');
});
is($coord->safe_psql('postgres', q{
	SELECT coalesce(public.tenant_orders(NULL)::text, 'null');
	BEGIN; SELECT coalesce(public.tenant_orders(NULL)::text, 'null'); COMMIT;
	PREPARE p(text) AS SELECT coalesce(public.tenant_orders($1)::text, 'null');
	EXECUTE p(NULL); EXECUTE p(NULL); EXECUTE p(NULL); EXECUTE p(NULL); EXECUTE p(NULL);
	EXECUTE p(NULL); EXECUTE p(NULL);
}), join("\n", ('null') x 9), 'a STRICT handler distributed by a text argument answers NULL for a NULL tenant');
is($coord->safe_psql('postgres', q{SELECT 1}), '1', 'and the coordinator is still up after it');

done_testing();
