# Facts.pm: what the TAP tests compare about an installation of the
# extension: a fingerprint of everything it defines and holds, by name (OIDs
# may change): its member objects, privileges on its schema, functions,
# tables and views, the tables' indexes, constraints and policies, the
# triggers on a user table public.orders (if there is one), the contents of
# every table, and the memberships of the roles app and cleaner.  Used
# across pg_upgrade, ALTER EXTENSION ... UPDATE and dump and restore.

package Facts;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use Test::More;

our @EXPORT = qw(fingerprint fingerprint_lines acls diag_difference);

my $fingerprint_sql = q{
SET TimeZone = 'UTC';
-- the privileges an ACL grants, NULL meaning the default; MAINTAIN (new in
-- 17, in the owner's default there) aside; none if facts.without_acls is on
CREATE FUNCTION pg_temp.acl_text(acl aclitem[], kind "char", owner oid) RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce(string_agg(x.item, ',' ORDER BY x.item), '')
	  FROM (SELECT e.grantee::regrole::text || ' ' || e.privilege_type || ' '
				   || e.grantor::regrole::text || ' ' || e.is_grantable AS item
			  FROM aclexplode(coalesce(acl, acldefault(kind, owner))) e
			 WHERE e.privilege_type <> 'MAINTAIN'
			   AND coalesce(current_setting('facts.without_acls', true), '') <> 'on') AS x
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
	  FROM pg_trigger t WHERE t.tgrelid = to_regclass('public.orders')
	UNION ALL
	SELECT 'data ' || c.oid::regclass || ' ' || (xpath('/row/h/text()', query_to_xml(format(
		'SELECT count(*) || '' '' || md5(coalesce(string_agg(t::text, chr(10) ORDER BY t::text), '''')) AS h FROM %s t',
		c.oid::regclass), false, true, '')))[1]::text
	  FROM pg_class c, ns WHERE c.relnamespace = ns.oid AND c.relkind IN ('r', 'p')
	UNION ALL
	SELECT 'data public.orders ' || (xpath('/row/h/text()', query_to_xml(
		'SELECT string_agg(o::text, '' '' ORDER BY o.id) AS h FROM public.orders o', false, true, '')))[1]::text
	 WHERE to_regclass('public.orders') IS NOT NULL
	UNION ALL
	SELECT 'role ' || r.rolname || ' member of ' || coalesce((SELECT string_agg(m.roleid::regrole::text, ',')
		FROM pg_auth_members m WHERE m.member = r.oid), '')
	  FROM pg_roles r WHERE r.rolname IN ('app', 'cleaner')
)
SELECT string_agg(fact, E'\n' ORDER BY fact) FROM facts;
};

# fingerprint(NODE, DBNAME[, WITHOUT_ACLS]): the facts, one per line,
# sorted; with WITHOUT_ACLS, privileges are left out (empty)
sub fingerprint
{
	my ($node, $dbname, $without_acls) = @_;
	my $sql = $fingerprint_sql;
	$sql = "SET facts.without_acls = on;\n$sql" if $without_acls;
	return $node->safe_psql($dbname, $sql);
}

# fingerprint_lines(NODE, DBNAME, PATTERN[, WITHOUT_ACLS]): only the facts
# matching PATTERN
sub fingerprint_lines
{
	my ($node, $dbname, $pattern, $without_acls) = @_;
	return join "\n", grep { /$pattern/ } split /\n/,
	  fingerprint($node, $dbname, $without_acls);
}

# acls(NODE, DBNAME): the privileges on the extension's schema, functions,
# tables, views and sequences, one line per object, by name: a function that
# an update replaced has another OID and perhaps other arguments, but must
# grant the same
sub acls
{
	my ($node, $dbname) = @_;
	return $node->safe_psql($dbname, q{
		SELECT string_agg(o, E'\n' ORDER BY o) FROM (
			SELECT 'function ' || p.proname || ' ' || coalesce((
					SELECT string_agg(e.grantee::regrole::text || ' ' || e.privilege_type || ' ' || e.is_grantable, ',' ORDER BY e.grantee::regrole::text, e.privilege_type)
					  FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) e), '') AS o
			  FROM pg_proc p WHERE p.pronamespace = 'idempotency'::regnamespace
			UNION ALL
			SELECT 'relation ' || c.relname || ' ' || coalesce((
					SELECT string_agg(e.grantee::regrole::text || ' ' || e.privilege_type || ' ' || e.is_grantable, ',' ORDER BY e.grantee::regrole::text, e.privilege_type)
					  FROM aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) e
					 WHERE e.privilege_type <> 'MAINTAIN'), '')
			  FROM pg_class c WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
			UNION ALL
			SELECT 'schema ' || n.nspname || ' ' || coalesce((
					SELECT string_agg(e.grantee::regrole::text || ' ' || e.privilege_type || ' ' || e.is_grantable, ',' ORDER BY e.grantee::regrole::text, e.privilege_type)
					  FROM aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) e), '')
			  FROM pg_namespace n WHERE n.nspname = 'idempotency') AS objects});
}

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

1;
