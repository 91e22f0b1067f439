# pg_upgrade from PostgreSQL 15 to the major under test (17, 18): every
# record, definition and grant arrives intact, the extension works on the new
# server, and ALTER EXTENSION ... UPDATE afterwards changes nothing.
#
# The old binaries come from IDEMPOTENCY_UPGRADE_FROM, the installation
# directory of a PostgreSQL 15 that has the extension installed (with bin/
# and lib/).  test/matrix.sh sets it inside the Debian roots of 17 and 18;
# elsewhere the test skips (test/t/005_pg_upgrade.pl covers 15 to 15).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $old_install = $ENV{IDEMPOTENCY_UPGRADE_FROM} // '';
plan skip_all => 'IDEMPOTENCY_UPGRADE_FROM names no older PostgreSQL (test/matrix.sh sets it)'
  if $old_install eq '';

my $settings = qq{
shared_preload_libraries = 'idempotency'
};

# checksums on both sides: 18's initdb turns them on by default, 15's off
my $old = PostgreSQL::Test::Cluster->new('old', install_path => $old_install);
$old->init(extra => ['--data-checksums']);
$old->append_conf('postgresql.conf', $settings);
$old->start;

my $old_version = $old->safe_psql('postgres', 'SHOW server_version');
my $new = PostgreSQL::Test::Cluster->new('new');
ok($new->pg_version > $old->pg_version,
	"upgrading from $old_version to " . $new->pg_version);

# Something of every kind the extension keeps: records in each state, inbox
# entries, tokens, a state machine with history, a user table with the key
# type and the triggers, and the grants that grant_usage and an
# administrator give.
$old->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE cleaner LOGIN;
	CREATE EXTENSION idempotency;
	SELECT idempotency.grant_usage('app');
	GRANT EXECUTE ON FUNCTION idempotency.cleanup(integer) TO cleaner;
	GRANT pg_monitor TO cleaner;

	SELECT idempotency.define_state_machine('order_status',
		'{"created": ["paid", "cancelled"], "paid": ["refunded"]}');
	CREATE TABLE public.orders (id int PRIMARY KEY, k idempotency.key UNIQUE, status text,
		version int NOT NULL DEFAULT 1);
	CREATE TRIGGER orders_status BEFORE INSERT OR UPDATE ON public.orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
	CREATE TRIGGER orders_history AFTER INSERT OR UPDATE ON public.orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
	CREATE TRIGGER orders_version BEFORE UPDATE ON public.orders
		FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
	GRANT SELECT, INSERT, UPDATE ON public.orders TO app;
	INSERT INTO public.orders VALUES (1, idempotency.make_key('order', '1', 'pay'), 'created');
	UPDATE public.orders SET status = 'paid' WHERE id = 1;

	SET ROLE app;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('done', 'pay', '{"amount": 10}');
	SELECT idempotency.idempotent_finish('done', '{"charged": 10}', 'pay');
	SELECT outcome FROM idempotency.idempotent_begin('failed', 'pay', '{"amount": 20}');
	SELECT idempotency.idempotent_finish('failed', '{"error": "declined"}', 'pay', failed => true);
	COMMIT;
	SELECT outcome FROM idempotency.idempotent_begin('held', 'pay', lease => '1 hour');
	SELECT idempotency.inbox_receive('billing', 'msg-1');
	SELECT count(*) FROM idempotency.inbox_receive_batch('billing', ARRAY['msg-2', 'msg-3']);
	SELECT idempotency.issue_token('checkout') IS NOT NULL;
	RESET ROLE;
});

# A fingerprint of everything the extension defines and holds, by name
# (OIDs may change): its member objects, privileges on its schema,
# functions, tables and views, the tables' indexes, constraints and policies,
# the triggers on the user table, and the contents of every table.
my $fingerprint_sql = q{
SET TimeZone = 'UTC';
-- the privileges an ACL grants, NULL meaning the default; MAINTAIN (new in
-- 17, in the owner's default there) aside
CREATE FUNCTION pg_temp.acl_text(acl aclitem[], kind "char", owner oid) RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce(string_agg(e.grantee::regrole::text || ' ' || e.privilege_type || ' '
							   || e.grantor::regrole::text || ' ' || e.is_grantable,
							   ',' ORDER BY 1), '')
	  FROM aclexplode(coalesce(acl, acldefault(kind, owner))) e
	 WHERE e.privilege_type <> 'MAINTAIN'
$$;
WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'idempotency'),
ns AS (SELECT 'idempotency'::regnamespace AS oid),
facts(fact) AS (
	-- implicit types (a table's row type, an array type) follow their owner;
	-- pg_upgrade to 17 and later records them as members explicitly
	SELECT 'member ' || i.type || ' ' || i.identity
	  FROM pg_depend d, ext, LATERAL pg_identify_object(d.classid, d.objid, d.objsubid) i
	 WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
	   AND NOT EXISTS (SELECT 1 FROM pg_type t
					    WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid
						  AND (t.typrelid <> 0 OR t.typcategory = 'A'))
	UNION ALL
	SELECT 'extension ' || extversion || ' ' || extrelocatable || ' ' || coalesce(extconfig::regclass[]::text, '')
	  FROM pg_extension WHERE extname = 'idempotency'
	UNION ALL
	SELECT 'schema acl ' || pg_temp.acl_text(nspacl, 'n', nspowner)
	  FROM pg_namespace, ns WHERE pg_namespace.oid = ns.oid
	UNION ALL
	SELECT 'function ' || p.oid::regprocedure || ' acl ' || pg_temp.acl_text(p.proacl, 'f', p.proowner)
		   || ' ' || p.provolatile::text || p.proparallel::text || p.prosecdef || p.proisstrict
		   || ' ' || coalesce(p.proconfig::text, '') || ' ' || md5(p.prosrc)
		   || ' returns ' || pg_get_function_result(p.oid)
	  FROM pg_proc p, ns WHERE p.pronamespace = ns.oid
	UNION ALL
	SELECT 'relation ' || c.oid::regclass || ' ' || c.relkind::text || ' rls ' || c.relrowsecurity
		   || ' acl ' || CASE WHEN c.relkind IN ('r', 'p', 'v')
							  THEN pg_temp.acl_text(c.relacl, 'r', c.relowner) ELSE '' END
	  FROM pg_class c, ns WHERE c.relnamespace = ns.oid
	UNION ALL
	SELECT 'column ' || a.attrelid::regclass || '.' || a.attname || ' '
		   || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull
		   || ' ' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '')
		   || ' acl ' || coalesce(a.attacl::text, '')
	  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
	  LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum, ns
	 WHERE c.relnamespace = ns.oid AND a.attnum > 0 AND NOT a.attisdropped
	UNION ALL
	SELECT 'index ' || pg_get_indexdef(i.indexrelid)
	  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid, ns WHERE c.relnamespace = ns.oid
	UNION ALL
	-- NOT NULL: attnotnull above (18 also lists them here)
	SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
	  FROM pg_constraint WHERE connamespace = 'idempotency'::regnamespace AND contype <> 'n'
	UNION ALL
	SELECT 'policy ' || polrelid::regclass || ' ' || polname || ' ' || polcmd::text || ' '
		   || coalesce(pg_get_expr(polqual, polrelid), '') || ' '
		   || coalesce(pg_get_expr(polwithcheck, polrelid), '')
		   || ' ' || coalesce((SELECT string_agg(r::regrole::text, ',' ORDER BY r::regrole::text)
								FROM unnest(polroles) r), '')
	  FROM pg_policy WHERE polrelid IN (SELECT c.oid FROM pg_class c, ns WHERE c.relnamespace = ns.oid)
	UNION ALL
	SELECT 'trigger ' || pg_get_triggerdef(t.oid)
	  FROM pg_trigger t WHERE t.tgrelid = 'public.orders'::regclass
	UNION ALL
	SELECT 'data ' || c.oid::regclass || ' ' || (xpath('/row/h/text()', query_to_xml(format(
		'SELECT count(*) || '' '' || md5(coalesce(string_agg(t::text, chr(10) ORDER BY t::text), '''')) AS h FROM %s t',
		c.oid::regclass), false, true, '')))[1]::text
	  FROM pg_class c, ns WHERE c.relnamespace = ns.oid AND c.relkind IN ('r', 'p')
	UNION ALL
	SELECT 'data public.orders ' || string_agg(o::text, ' ' ORDER BY o.id) FROM public.orders o
	UNION ALL
	SELECT 'role ' || r.rolname || ' member of ' || coalesce((SELECT string_agg(m.roleid::regrole::text, ',')
		FROM pg_auth_members m WHERE m.member = r.oid), '')
	  FROM pg_roles r WHERE r.rolname IN ('app', 'cleaner')
)
SELECT string_agg(fact, E'\n' ORDER BY fact) FROM facts;
};

# diag_difference(BEFORE, AFTER): the lines of each fingerprint the other lacks
sub diag_difference
{
	my ($before, $after) = @_;
	my %in_before = map { $_ => 1 } split /\n/, $before;
	my %in_after = map { $_ => 1 } split /\n/, $after;
	diag("before only: $_") for grep { !$in_after{$_} } split /\n/, $before;
	diag("after only: $_") for grep { !$in_before{$_} } split /\n/, $after;
	return;
}

my $before = $old->safe_psql('postgres', $fingerprint_sql);
like($before, qr/^data idempotency\.registry 3 /m, 'the fingerprint counts the records');
like($before, qr/^function idempotency\.idempotent_begin\(.*acl .*app EXECUTE/m,
	'the fingerprint has the grants');
$old->stop;

$new->init(extra => ['--data-checksums']);
$new->append_conf('postgresql.conf', $settings);

chdir $new->basedir;
command_ok(
	[
		'pg_upgrade', '--no-sync',
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $old->config_data('--bindir'), '-B', $new->config_data('--bindir'),
		'-s', $new->host, '-p', $old->port, '-P', $new->port
	],
	"pg_upgrade from $old_version with the library preloaded");

$new->start;
my $after = $new->safe_psql('postgres', $fingerprint_sql);
ok($after eq $before, 'every record, definition and grant is the same after pg_upgrade')
  or diag_difference($before, $after);

# the extension works: records replay for their owner, the held claim is
# still in progress, the inbox remembers, the state machine still refuses
is( $new->safe_psql('postgres', q{
		SET ROLE app;
		SELECT outcome || ' ' || response::text
		  FROM idempotency.idempotent_begin('done', 'pay', '{"amount": 10}')}),
	'replay {"charged": 10}', 'a record replays after pg_upgrade');
is( $new->safe_psql('postgres', q{
		SET ROLE app;
		SELECT outcome FROM idempotency.idempotent_begin('held', 'pay')}),
	'in_progress', 'a held claim is still in progress');
is( $new->safe_psql('postgres', q{
		SET ROLE app;
		SELECT idempotency.inbox_receive('billing', 'msg-1')}),
	'f', 'the inbox still knows its messages');
my ($ret, $stdout, $stderr) = $new->psql('postgres',
	q{SET ROLE app; UPDATE public.orders SET status = 'created' WHERE id = 1});
like($stderr, qr/transition from "paid" to "created" is not allowed/,
	'the state machine still refuses a transition');
ok($new->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'}),
	'the launcher runs on the upgraded cluster');

# the library on disk is the version the catalog has: UPDATE is a no-op
$before = $new->safe_psql('postgres', $fingerprint_sql);
($ret, $stdout, $stderr) = $new->psql('postgres', 'ALTER EXTENSION idempotency UPDATE');
is($ret, 0, 'ALTER EXTENSION idempotency UPDATE succeeds');
like($stderr, qr/version "1\.0" of extension "idempotency" is already installed/,
	'ALTER EXTENSION idempotency UPDATE finds nothing to do');
$after = $new->safe_psql('postgres', $fingerprint_sql);
ok($after eq $before, 'and changes nothing') or diag_difference($before, $after);

$new->stop;
done_testing();
