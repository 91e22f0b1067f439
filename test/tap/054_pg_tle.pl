# The tle edition through pg_tle, as on Amazon RDS, Aurora and Supabase: a
# database owner who is not a superuser but holds pgtle_admin runs the
# script that make tle writes (pgtle.install_extension), then CREATE
# EXTENSION idempotency, on a server that loads pg_tle and not the C
# library.  The server is a private copy of this PostgreSQL without the C
# edition's files (test/private_install.sh): pg_tle refuses a name that a
# control file on disk already has.  Then the extension works for an
# application role, is an extension (its schema and objects members of it),
# and DROP EXTENSION removes it all.  Its update path (make tle writes one for
# each update) takes it to the next version with ALTER EXTENSION UPDATE.
#
# pg_tle is built from its public source by test/pg_tle.sh; without it the
# test is skipped.

use strict;
use warnings FATAL => 'all';

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use lib abs_path(dirname(__FILE__) . '/perl');
use NextVersion;

my $top = abs_path(dirname(__FILE__) . '/../..');
my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
plan skip_all => 'pg_tle is not installed (test/pg_tle.sh builds it from its source)'
  unless -f "$sharedir/extension/pg_tle.control";

my $script = `make -s -C '$top' tle | tail -n 1`;
chomp $script;
ok(-f $script, 'make tle wrote the script');

my $copy = PostgreSQL::Test::Utils::tempdir;
my $copy_pg_config = `bash '$top/test/private_install.sh' '$copy' 2>&1 | tail -n 1`;
chomp $copy_pg_config;
my $bindir = `'$copy_pg_config' --bindir`;
chomp $bindir;
ok(!-e `'$copy_pg_config' --sharedir` =~ s/\n//r . '/extension/idempotency.control',
	'the private copy has no idempotency control file');

my $node = PostgreSQL::Test::Cluster->new('tle', install_path => dirname($bindir));
$node->init;
$node->append_conf('postgresql.conf', q{shared_preload_libraries = 'pg_tle'});
$node->start;
$node->safe_psql('postgres', q{
	CREATE ROLE dbadmin LOGIN;
	CREATE DATABASE app OWNER dbadmin;
	CREATE ROLE app1 LOGIN;
});
$node->safe_psql('app', q{CREATE EXTENSION pg_tle; GRANT pgtle_admin TO dbadmin;});
is($node->safe_psql('app', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'dbadmin'}), 'f', 'dbadmin is not a superuser');

my ($rc, $out, $err) = $node->psql('app', undef, extra_params => [ '-U', 'dbadmin', '-v', 'ON_ERROR_STOP=1', '-f', $script ]);
is($rc, 0, 'a pgtle_admin installs it with pgtle.install_extension') or diag($err);
($rc, $out, $err) = $node->psql('app', 'CREATE EXTENSION idempotency', extra_params => [ '-U', 'dbadmin', '-v', 'ON_ERROR_STOP=1' ]);
is($rc, 0, 'and creates the extension') or diag($err);
is($node->safe_psql('app', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}), '1.2', 'version 1.2');
is($node->safe_psql('app', q{
	SELECT count(*) FROM pg_depend AS d JOIN pg_extension AS e ON e.oid = d.refobjid
	 WHERE e.extname = 'idempotency' AND d.deptype = 'e'
	   AND d.classid = 'pg_namespace'::regclass AND d.objid = 'idempotency'::regnamespace}), '1',
	'its schema is a member of the extension');
$node->safe_psql('app', q{SELECT idempotency.grant_usage('app1')}, extra_params => [ '-U', 'dbadmin' ]);
is($node->safe_psql('app', q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('k1', request => '{"a": 1}');
	SELECT idempotency.idempotent_finish('k1', '{"ok": true}', status_code => 201);
	COMMIT;
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('k1', request => '{"a": 1}');
	SELECT idempotency.outbox_send('t', '{}', 'k') IS NOT NULL;
	SELECT count(*) FROM idempotency.outbox_fetch();
}, extra_params => [ '-U', 'app1' ]), "execute\ncompleted\nreplay {\"ok\": true}\nt\n1",
	'an application role claims, finishes, replays and sends');
is($node->safe_psql('app', q{SELECT count(*) FROM pg_proc WHERE prolang = (SELECT oid FROM pg_language WHERE lanname = 'c') AND pronamespace = 'idempotency'::regnamespace}),
	'0', 'no C function in it');

# its update path, to a next version made up for the test (NextVersion.pm),
# from the script make tle writes for it: a pgtle_admin installs it, and
# ALTER EXTENSION UPDATE takes it, with the records there
my $next = next_version($top);
($rc, $out, $err) = $node->psql('app', undef,
	extra_params => [ '-U', 'dbadmin', '-v', 'ON_ERROR_STOP=1', '-f', $next->{"pgtle--$NextVersion::FROM--$NextVersion::TO"} ]);
is($rc, 0, 'a pgtle_admin installs the update path') or diag($err);
# an owner whose default privileges would apply to what the update creates
$node->safe_psql('app', q{ALTER DEFAULT PRIVILEGES FOR ROLE dbadmin GRANT EXECUTE ON FUNCTIONS TO app1});
($rc, $out, $err) = $node->psql('app', 'ALTER EXTENSION idempotency UPDATE', extra_params => [ '-U', 'dbadmin', '-v', 'ON_ERROR_STOP=1' ]);
like($err, qr/role "dbadmin" has default privileges, which would apply to the objects of idempotency.*for functions/s,
	'the update is refused to an owner with default privileges');
is($node->safe_psql('app', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}), $NextVersion::FROM, 'which leaves the version it was');
$node->safe_psql('app', q{ALTER DEFAULT PRIVILEGES FOR ROLE dbadmin REVOKE EXECUTE ON FUNCTIONS FROM app1});
($rc, $out, $err) = $node->psql('app', 'ALTER EXTENSION idempotency UPDATE', extra_params => [ '-U', 'dbadmin', '-v', 'ON_ERROR_STOP=1' ]);
is($rc, 0, 'and, once they are revoked, updates the extension') or diag($err);
is($node->safe_psql('app', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}), $NextVersion::TO, 'to the next version');
is($node->safe_psql('app', q{SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('k1', request => '{"a": 1}')},
	extra_params => [ '-U', 'app1' ]), 'replay {"ok": true}', 'its records replay');
is($node->safe_psql('app', q{SELECT next_note FROM idempotency.registry WHERE key = 'k1'}, extra_params => [ '-U', 'dbadmin' ]),
	"from $NextVersion::FROM", 'the update filled them in');
is($node->safe_psql('app', q{
	SELECT count(*) FROM pg_depend AS d JOIN pg_extension AS e ON e.oid = d.refobjid
	 WHERE e.extname = 'idempotency' AND d.deptype = 'e' AND d.objid = 'idempotency.next_probe()'::regprocedure}), '1',
	'what the update created is a member of the extension');

($rc, $out, $err) = $node->psql('app', 'DROP EXTENSION idempotency', extra_params => [ '-U', 'dbadmin', '-v', 'ON_ERROR_STOP=1' ]);
is($rc, 0, 'DROP EXTENSION') or diag($err);
is($node->safe_psql('app', q{SELECT count(*) FROM pg_namespace WHERE nspname = 'idempotency'}), '0', 'removes its schema and all in it');

$node->stop;
done_testing();
