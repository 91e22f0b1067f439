# ALTER EXTENSION idempotency UPDATE from the previous release, 1.0, with
# this version's library: what an installation granted survives the update
# (grant_usage's grants, an administrator's grant and revocation), the roles
# grant_usage was given to get what the update adds to the application API,
# records keep their owners, a dump made after the update restores the same
# grants, and the updated objects are those of a new installation.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Facts;

my $node = PostgreSQL::Test::Cluster->new('update');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
});
$node->start;

$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE app2 LOGIN;
	CREATE ROLE cleaner LOGIN;
	CREATE ROLE reporter LOGIN;
	CREATE EXTENSION idempotency VERSION '1.0';
	SELECT idempotency.grant_usage('app');
	SELECT idempotency.grant_usage('app2');
	GRANT EXECUTE ON FUNCTION idempotency.cleanup(integer) TO cleaner;
	GRANT SELECT ON idempotency.my_records TO reporter;
	REVOKE EXECUTE ON FUNCTION idempotency.transition_allowed(text, text, text) FROM PUBLIC;

	SET ROLE app;
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('done', 'pay', '{"amount": 10}');
	SELECT idempotency.idempotent_finish('done', '{"charged": 10}', 'pay');
	COMMIT;
	SELECT outcome FROM idempotency.idempotent_begin('held', 'pay', lease => '1 hour');
	RESET ROLE;
});
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
	'1.0', 'the previous release is installed');
is($node->safe_psql('postgres', q{SELECT status FROM idempotency.registry WHERE key = 'held'}),
	'processing', 'with the 1.0 objects, a claim taken in autocommit commits on its own, as in 1.0');

my $before = acls($node, 'postgres');
like($before, qr/^function idempotent_begin .*app EXECUTE/m,
	'the facts show grant_usage\'s grants');

my ($ret, $stdout, $stderr) = $node->psql('postgres', 'ALTER EXTENSION idempotency UPDATE');
is($ret, 0, 'ALTER EXTENSION idempotency UPDATE succeeds') or diag($stderr);
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
	'1.2', 'the extension is at the new version');

# every object that was there keeps exactly its privileges
my $after = acls($node, 'postgres');
my %now = map { /^(\S+ \S+)/ ? ($1 => $_) : () } split /\n/, $after;
my @lost = grep { /^(\S+ \S+)/ && ($now{$1} // '') ne $_ } split /\n/, $before;
is(scalar @lost, 0, 'every object keeps its privileges across the update');
diag("before: $_\nafter:  " . ((/^(\S+ \S+)/ && $now{$1}) // 'missing')) for @lost;

# the application API after the update is granted to both application
# roles and to nobody else (but the Citus delegates, open to everyone, which
# check when they run that the caller may run the function they stand for)
my $api_sql = q{
	SELECT string_agg(r || ' ' || a.object_name || ' ' || CASE a.object_type
			WHEN 'function' THEN has_function_privilege(r, ('idempotency.' || a.object_name)::regproc, 'EXECUTE')
			ELSE has_table_privilege(r, ('idempotency.' || a.object_name)::regclass, 'SELECT') END,
			', ' ORDER BY r, a.object_name)
	  FROM idempotency.application_api AS a, unnest(ARRAY['app', 'app2', 'cleaner']) AS r};
my $api = $node->safe_psql('postgres', $api_sql);
unlike($api, qr/app2? \w+ false/, 'the application roles may use all of the API after the update');
unlike($api, qr/cleaner (?!citus_)\w+ true/, 'other roles are given none of it');
ok($api =~ tr/,// >= 3 * 16 - 1, 'the API lists every object');

# the records keep their owners: app replays and sees its held claim, app2
# sees nothing of them
is($node->safe_psql('postgres', q{
	SET ROLE app;
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('done', 'pay', '{"amount": 10}');
	SELECT string_agg(key || ' ' || status, ', ' ORDER BY key) FROM idempotency.my_records}),
	"replay {\"charged\": 10}\ndone completed, held processing",
	'the owner replays its records after the update');
is($node->safe_psql('postgres', q{
	SET ROLE app2;
	SELECT count(*) FROM idempotency.my_records;
	SELECT outcome FROM idempotency.idempotent_begin('done', 'pay', '{"amount": 10}', external => true)}),
	"0\nexecute", 'another application role still sees none of them');

# a new installation has the same objects as the updated one
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION idempotency');
my $definitions = qr/^(?:member|function|relation|column|index|constraint|policy|extension) /;
my $fresh = fingerprint_lines($node, 'fresh', $definitions, 1);
my $updated = fingerprint_lines($node, 'postgres', $definitions, 1);
ok($fresh eq $updated, 'the updated objects are those of a new installation')
  or diag_difference($fresh, $updated);

# a dump made after the update, restored as the database's owner, grants
# the same
my $dump = $node->basedir . '/after_update.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ],
	'pg_dump after the update');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('restored'), $dump ],
	'pg_restore into a new database');
my $restored = acls($node, 'restored');
ok($restored eq $after, 'the restored database grants what the updated one did')
  or diag_difference($after, $restored);
is($node->safe_psql('restored', q{
	SET ROLE app;
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('done', 'pay', '{"amount": 10}')}),
	'replay {"charged": 10}', 'the owner replays its records in the restored database');

# the update left no initial privilege naming an installation's role:
# those are pg_dump's to restore
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_init_privs i, aclexplode(i.initprivs) a
	 WHERE a.grantee IN ('app'::regrole, 'app2'::regrole, 'cleaner'::regrole, 'reporter'::regrole)}),
	'0', 'no initial privilege names an installation\'s role');

$node->stop;
done_testing();
