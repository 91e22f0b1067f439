# Backup and restore by the database's owner, who is not a superuser.  The
# owner and an application role make records of every kind: completed and
# failed keys (with status codes and bodies), a claim in progress, inbox
# message ids, tokens used and unused, a state machine and its history.  The
# owner's pg_dump of the whole database works, while the application role
# can read none of the extension's tables.  Restored into a new database,
# every completed key replays (nothing executes again), every message id is
# a redelivery, every used token stays used, the machine is enforced and the
# history is there, row for row.  A trigger the owner puts on state_history
# runs as pg_database_owner, never as the superuser whose write or cleanup
# fires it.  pg_dump -n public leaves the extension and its records out
# (doc/operations.md, "Backup and restore"), and so does -n idempotency; adding
# --extension idempotency keeps them.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
});
$node->start;

my $dir = PostgreSQL::Test::Utils::tempdir;

$node->safe_psql('postgres', q{
	CREATE ROLE shop_owner LOGIN;
	CREATE ROLE clerk LOGIN;
	CREATE DATABASE shop OWNER shop_owner;
});
$node->safe_psql('shop', q{
	CREATE EXTENSION idempotency;
	SELECT idempotency.grant_usage('shop_owner');
	SELECT idempotency.grant_usage('clerk');
	GRANT EXECUTE ON FUNCTION idempotency.define_state_machine(text, jsonb, text[]) TO shop_owner;
});

# as(role, db, sql)
sub as
{
	my ($role, $db, $sql) = @_;
	return $node->safe_psql($db, $sql, extra_params => [ '-U', $role ]);
}

# every kind of record, as the owner and as the clerk
my $records = q{
	BEGIN;
	SELECT count(*) FROM (
		SELECT idempotency.idempotent_begin('PREFIX-' || i, request => jsonb_build_object('n', i), external => true)
		  FROM generate_series(1, 20) AS i) AS b;
	SELECT count(*) FROM (
		SELECT idempotency.idempotent_finish('PREFIX-' || i, jsonb_build_object('paid', i),
			   failed => i % 5 = 0, status_code => CASE WHEN i % 5 = 0 THEN 502 ELSE 201 END,
			   body => convert_to('body ' || i, 'UTF8'))
		  FROM generate_series(1, 20) AS i) AS f;
	COMMIT;
	SELECT idempotency.idempotent_begin('PREFIX-held', lease => '1 hour', external => true);
	SELECT count(*) FROM (
		SELECT idempotency.inbox_receive('billing', 'PREFIX-msg-' || i) FROM generate_series(1, 10) AS i) AS r;
};
as('shop_owner', 'shop', $records =~ s/PREFIX/owner/gr);
as('clerk', 'shop', $records =~ s/PREFIX/clerk/gr);
my $used = as('shop_owner', 'shop', q{SELECT idempotency.issue_token()});
my $unused = as('shop_owner', 'shop', q{SELECT idempotency.issue_token()});
as('shop_owner', 'shop', qq{SELECT idempotency.consume_token('$used')});
as('shop_owner', 'shop', q{
	SELECT idempotency.define_state_machine('order_status',
		'{"new": ["paid", "cancelled"], "paid": ["shipped"], "shipped": [], "cancelled": []}');
	CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL);
	CREATE TRIGGER orders_check BEFORE INSERT OR UPDATE ON orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
	CREATE TRIGGER orders_history AFTER INSERT OR UPDATE ON orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
	INSERT INTO orders SELECT i, 'new' FROM generate_series(1, 5) AS i;
	UPDATE orders SET status = 'paid' WHERE id <= 3;
	UPDATE orders SET status = 'shipped' WHERE id = 1;
});

# other roles stay out of the tables, and see only the history they may
foreach my $table (qw(registry inbox tokens))
{
	my ($ret, $out, $err) = $node->psql('shop', "SELECT count(*) FROM idempotency.$table",
		extra_params => [ '-U', 'clerk' ]);
	like($err, qr/permission denied for table $table/, "the clerk cannot read idempotency.$table");
}
is(as('clerk', 'shop', q{SELECT count(*) FROM idempotency.state_history}), '0',
	'the clerk sees no history of a table it cannot read');
is(as('shop_owner', 'shop', q{SELECT count(*) FROM idempotency.state_history}), '9',
	'the owner sees the whole history');

# what a database should hold after the restore, table by table
sub contents
{
	my ($db) = @_;
	return $node->safe_psql($db, q{
		SELECT 'registry', count(*), md5(string_agg(r::text, ',' ORDER BY r.key, r.scope, r.owner))
		  FROM idempotency.registry AS r
		UNION ALL
		SELECT 'inbox', count(*), md5(string_agg(i::text, ',' ORDER BY i.message_id, i.owner))
		  FROM idempotency.inbox AS i
		UNION ALL
		SELECT 'tokens', count(*), md5(string_agg(t::text, ',' ORDER BY t.token))
		  FROM idempotency.tokens AS t
		UNION ALL
		SELECT 'state_machines', count(*), md5(string_agg(m::text, ',' ORDER BY m.name))
		  FROM idempotency.state_machines AS m
		UNION ALL
		SELECT 'state_history', count(*), md5(string_agg(h::text, ',' ORDER BY h.changed_at, h.row_key::text, h.to_state))
		  FROM idempotency.state_history AS h
		UNION ALL
		SELECT 'orders', count(*), md5(string_agg(o::text, ',' ORDER BY o.id)) FROM public.orders AS o});
}
my $before = contents('shop');
like($before, qr/^registry\|42\|/m, 'the registry holds 42 records before the dump');

# the owner's dump of the whole database
command_ok([ 'pg_dump', '-d', $node->connstr('shop'), '-U', 'shop_owner', '-f', "$dir/shop.sql" ],
	'pg_dump of the whole database by its owner, who is not a superuser');
command_fails_like([ 'pg_dump', '-d', $node->connstr('shop'), '-U', 'clerk', '-f', "$dir/clerk.sql" ],
	qr/permission denied/, 'pg_dump by another role is refused');

# restored by a superuser into a new database of the same owner
$node->safe_psql('postgres', 'CREATE DATABASE shop_restored OWNER shop_owner');
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('shop_restored'),
		'-f', "$dir/shop.sql" ], 'the dump restores');
is(contents('shop_restored'), $before, 'every table comes back, row for row');

# completed keys replay, with their answers; nothing executes again
foreach my $who (qw(owner clerk))
{
	my $role = $who eq 'owner' ? 'shop_owner' : 'clerk';
	is(as($role, 'shop_restored', qq{
		SELECT count(*) FILTER (WHERE b.outcome = 'replay'
								  AND b.response = jsonb_build_object('paid', i)
								  AND b.status_code = CASE WHEN i % 5 = 0 THEN 502 ELSE 201 END
								  AND b.body = convert_to('body ' || i, 'UTF8')
								  AND b.status = CASE WHEN i % 5 = 0 THEN 'failed' ELSE 'completed' END),
			   count(*) FILTER (WHERE b.outcome = 'execute')
		  FROM generate_series(1, 20) AS i,
			   LATERAL idempotency.idempotent_begin('$who-' || i, request => jsonb_build_object('n', i), external => true) AS b}),
		'20|0', "the ${who}'s completed and failed keys replay with their answers after the restore");
	is(as($role, 'shop_restored', qq{SELECT outcome FROM idempotency.idempotent_begin('$who-held', wait => false, external => true)}),
		'in_progress', "the ${who}'s claim in progress is still held");
	is(as($role, 'shop_restored', qq{
		SELECT count(*) FILTER (WHERE NOT idempotency.inbox_receive('billing', '$who-msg-' || i))
		  FROM generate_series(1, 10) AS i}),
		'10', "the ${who}'s message ids are redeliveries after the restore");
}
is(as('shop_owner', 'shop_restored',
		qq{SELECT idempotency.consume_token('$used'), idempotency.consume_token('$unused')}),
	'f|t', 'a used token stays used, an unused one is consumed once');
my ($r2, $o2, $e2) = $node->psql('shop_restored', q{UPDATE orders SET status = 'new' WHERE id = 1},
	extra_params => [ '-U', 'shop_owner' ]);
like($e2, qr/IS001|not allowed/, 'the state machine is enforced after the restore');
is(as('shop_owner', 'shop_restored', q{
	UPDATE orders SET status = 'shipped' WHERE id = 2;
	SELECT count(*) FROM idempotency.state_history}),
	'10', 'the history is there and grows');

# -n public alone leaves the extension, and with it every record, out
command_ok([ 'pg_dump', '-d', $node->connstr('shop'), '-U', 'shop_owner', '-n', 'public',
		'-f', "$dir/public.sql" ], 'pg_dump -n public');
command_ok([ 'pg_dump', '-d', $node->connstr('shop'), '-U', 'shop_owner', '-n', 'public',
		'--extension', 'idempotency', '-f', "$dir/both.sql" ], 'pg_dump -n public --extension idempotency');
command_ok([ 'pg_dump', '-d', $node->connstr('shop'), '-U', 'shop_owner', '-n', 'public',
		'-n', 'idempotency', '-f', "$dir/schemas.sql" ], 'pg_dump -n public -n idempotency');
foreach my $case ([ 'public', '0' ], [ 'schemas', '0' ], [ 'both', '42' ])
{
	my ($name, $expected) = @$case;
	$node->safe_psql('postgres', "CREATE DATABASE shop_$name OWNER shop_owner");
	# a schema-filtered dump creates the schema public itself
	$node->safe_psql("shop_$name", 'DROP SCHEMA public; CREATE EXTENSION idempotency');
	$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr("shop_$name"),
			'-f', "$dir/$name.sql" ], "the dump of $name restores");
	is($node->safe_psql("shop_$name", 'SELECT count(*) FROM idempotency.registry'), $expected,
		{ public => 'pg_dump -n public leaves every record out',
		  schemas => 'pg_dump -n idempotency does not select the extension\'s tables',
		  both => 'pg_dump -n public --extension idempotency keeps every record' }->{$name});
}

# What the owner attaches to state_history runs as pg_database_owner, never
# as the superuser whose write (or cleanup) adds or deletes history rows.
as('shop_owner', 'shop', q{
	CREATE TABLE history_log (op text, who text);
	GRANT INSERT ON history_log TO pg_database_owner;
	CREATE FUNCTION log_history() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO public.history_log VALUES (TG_OP, current_user);
		RETURN NULL;
	END $$;
	CREATE TRIGGER history_log AFTER INSERT OR DELETE ON idempotency.state_history
		FOR EACH ROW EXECUTE FUNCTION log_history();
});
$node->safe_psql('shop', q{
	UPDATE orders SET status = 'paid' WHERE id = 4;
	UPDATE orders SET status = 'paid' WHERE id = 5;
	UPDATE idempotency.state_history SET expires_at = now() - interval '1 minute'
	 WHERE row_key = '{"id": 5}' AND to_state = 'paid';
	SELECT idempotency.cleanup();
});
is(as('shop_owner', 'shop', q{SELECT string_agg(op || ' as ' || who, ', ' ORDER BY op) FROM history_log}),
	'DELETE as pg_database_owner, INSERT as pg_database_owner, INSERT as pg_database_owner',
	'a trigger the owner puts on state_history runs as pg_database_owner, for a superuser\'s writes and cleanup');

$node->stop;
done_testing();
