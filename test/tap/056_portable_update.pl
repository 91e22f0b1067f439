# The portable edition's update scripts: make portable writes, for each
# update since the portable edition began, the script its owner runs
# (sql/built/idempotency-portable--A--B.sql), from the same update script as
# the extension's.  With the next version made up (NextVersion.pm):
#
# 1. The owner runs it into an installation in use: a session that used the
#    old objects keeps working through the update and after it, a claim in
#    flight when the update starts finishes (the update waits for it) and is
#    replayed, and an external claim made before it is finished after it
#    with its attempt.  portable_version() says the new version.
# 2. What the update leaves is what a fresh install of the new version
#    creates: the same schema, privileges and all (pg_dump --schema-only).
# 3. It refuses, and changes nothing, even run without ON_ERROR_STOP: a
#    second run (the version is no longer the one it updates from), a role
#    that is not the installer (a superuser too: the objects would change
#    owner), a database without the portable edition or with the extension,
#    an installer with default privileges, and a run statement by
#    statement (where a statement that failed after the checks would leave
#    the others done); its end gives such a run's session its settings back.
# 4. In one transaction, a statement that fails after the checks leaves
#    nothing done and the session as it was; the script sent as one query
#    string is one transaction too.

use strict;
use warnings FATAL => 'all';

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use lib File::Spec->rel2abs(dirname(__FILE__) . '/perl');
use NextVersion;

my $top = File::Spec->rel2abs(dirname(__FILE__) . '/../..');
my ($stdout, $stderr);
IPC::Run::run([ 'make', '-s', '--no-print-directory', '-C', $top, 'portable' ], '>', \$stdout, '2>', \$stderr)
  or BAIL_OUT("make portable: $stderr");
my ($current) = $stdout =~ /([^\n]+)\n?\z/;
my $next = next_version($top);
my $update = $next->{"portable--$NextVersion::FROM--$NextVersion::TO"};
like(PostgreSQL::Test::Utils::slurp_file($update), qr/from \Q$NextVersion::FROM\E to \Q$NextVersion::TO\E/,
	'make portable writes the update script');

my $node = PostgreSQL::Test::Cluster->new('update');
$node->init;
$node->append_conf('postgresql.conf', "max_connections = 30\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE ROLE owner LOGIN;
	CREATE ROLE other LOGIN;
	CREATE ROLE app_role LOGIN;
	CREATE DATABASE app OWNER owner;
	CREATE DATABASE fresh OWNER owner;
	CREATE DATABASE refusals OWNER owner;
	CREATE DATABASE c_edition;
});

sub run_script
{
	my ($db, $role, $script, %opt) = @_;
	my @params = ('-U', $role, '-f', $script);
	unshift @params, '-v', 'ON_ERROR_STOP=1', '--single-transaction' unless $opt{no_stop};
	return $node->psql($db, undef, on_error_stop => 0, extra_params => \@params);
}

sub install
{
	my ($db, $script) = @_;
	my ($rc, $out, $err) = run_script($db, 'owner', $script);
	is($rc, 0, "the owner installs $script into $db") or diag($err);
	$node->safe_psql($db, q{SELECT idempotency.grant_usage('app_role')}, extra_params => [ '-U', 'owner' ]);
}

install('app', $current);
is($node->safe_psql('app', 'SELECT idempotency.portable_version()'), $NextVersion::FROM,
	'portable_version() names the installed version');
$node->safe_psql('app', q{
	BEGIN;
	SELECT idempotency.idempotent_begin('done', 'pay', request => '{"n": 1}');
	SELECT idempotency.idempotent_finish('done', '{"ok": 1}', 'pay', status_code => 201);
	COMMIT;
	SELECT idempotency.idempotent_begin('outside', 'pay', external => true, lease => '1h');
	SELECT idempotency.outbox_send('topic', '{"m": 1}', 'message-1');
}, extra_params => [ '-U', 'app_role' ]);

# a pooled session that has run the old objects, and a claim in flight
my $session = $node->background_psql('app', on_error_stop => 0, extra_params => [ '-U', 'app_role' ]);
my $round = q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('s' || :n, 'pay', request => '{"n": 2}');
	SELECT idempotency.idempotent_finish('s' || :n, '{"ok": 2}', 'pay');
	COMMIT;
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('s' || :n, 'pay', request => '{"n": 2}');
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('done', 'pay', request => '{"n": 1}');
	SELECT status FROM idempotency.lookup('done', 'pay');
};
sub round
{
	my ($n) = @_;
	my ($out, $failed) = $session->query("\\set n $n\n$round");
	return ($out, $failed ? $session->{stderr} : '');
}
my ($out, $err) = round(1);
is($out, "execute\ncompleted\nreplay {\"ok\": 2}\nreplay {\"ok\": 1}\ncompleted", 'a session uses the installed version');
my $inflight = $node->background_psql('app', on_error_stop => 0, extra_params => [ '-U', 'app_role' ]);
is($inflight->query_safe(q{
	BEGIN;
	SELECT outcome FROM idempotency.idempotent_begin('inflight', 'pay', request => '{"n": 3}');
}), 'execute', 'a claim is in flight when the update starts');

my ($update_out, $update_err) = ('', '');
my $updating = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('app'), '-U', 'owner', '-v', 'ON_ERROR_STOP=1',
	  '--single-transaction', '-f', $update ],
	'>', \$update_out, '2>', \$update_err);
ok($node->poll_query_until('app', q{
	SELECT count(*) > 0 FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
	 WHERE NOT l.granted AND a.usename = 'owner'}), 'the update waits for the claim in flight');
is($inflight->query_safe(q{
	SELECT idempotency.idempotent_finish('inflight', '{"ok": 3}', 'pay');
	COMMIT;
}), 'completed', 'which finishes and commits');
ok($updating->finish, 'the update commits') or diag($update_err);
is($node->safe_psql('app', 'SELECT idempotency.portable_version()'), $NextVersion::TO, 'portable_version() names the new version');

($out, $err) = round(2);
is($out, "execute\ncompleted\nreplay {\"ok\": 2}\nreplay {\"ok\": 1}\ncompleted", 'the session goes on through the update') or diag($err);
is($err, '', 'without an error');
$session->quit;
is($inflight->query_safe(q{
	SELECT outcome || ' ' || response::text FROM idempotency.idempotent_begin('inflight', 'pay', request => '{"n": 3}');
}), "replay {\"ok\": 3}", 'the claim that was in flight replays its answer');
$inflight->quit;
is($node->safe_psql('app', q{
	SELECT idempotency.idempotent_finish('outside', '{"ok": 4}', 'pay',
		attempt => (SELECT attempt FROM idempotency.my_records WHERE key = 'outside'));
	SELECT count(*) FROM idempotency.outbox_fetch();
	SELECT idempotency.next_probe();
}, extra_params => [ '-U', 'app_role' ]), "completed\n1\nnext", 'the external claim finishes with its attempt, the message is there, and so is the new function');
is($node->safe_psql('app', q{SELECT string_agg(key || ' ' || next_note, ', ' ORDER BY key) FROM idempotency.registry}),
	join(', ', map { "$_ from $NextVersion::FROM" } qw(done inflight outside s1)), 'the update filled in the rows there');

# what the update leaves is a fresh install of the new version
install('fresh', $next->{"portable--$NextVersion::TO"});
my @dump = ('pg_dump', '--schema-only', '--schema=idempotency', '-U', 'owner');
my $updated = $node->run_log([ @dump, '-f', "$PostgreSQL::Test::Utils::tmp_check/updated.sql", $node->connstr('app') ]);
my $installed = $node->run_log([ @dump, '-f', "$PostgreSQL::Test::Utils::tmp_check/fresh.sql", $node->connstr('fresh') ]);
# (less pg_dump's \restrict lines, whose key is new in every dump)
my ($a, $b) = map { PostgreSQL::Test::Utils::slurp_file("$PostgreSQL::Test::Utils::tmp_check/$_.sql") =~ s/^\\(?:un)?restrict .*\n//mgr } qw(updated fresh);
ok(length($a) > 100000, 'the schema dumps');
ok($a eq $b, 'the updated installation has the schema of a fresh install of the new version, privileges and all')
  or diag(scalar(`diff '$PostgreSQL::Test::Utils::tmp_check/updated.sql' '$PostgreSQL::Test::Utils::tmp_check/fresh.sql'`));

# refusals, each leaving everything as it was
my $state = q{
	SELECT count(*) || ' ' || md5(string_agg(p.oid::regprocedure::text || p.prosrc || coalesce(p.proacl::text, ''), ',' ORDER BY p.oid))
		   || ' ' || (SELECT md5(string_agg(c.relname || coalesce(c.relacl::text, '') || c.relnatts, ',' ORDER BY c.oid))
						FROM pg_class AS c WHERE c.relnamespace = 'idempotency'::regnamespace)
		   || ' ' || (SELECT count(*) FROM idempotency.registry)
	  FROM pg_proc AS p WHERE p.pronamespace = 'idempotency'::regnamespace};
sub refused
{
	my ($db, $role, $message, $detail, $what) = @_;
	my $before = $node->safe_psql($db, $state);
	my ($rc, $o, $e) = run_script($db, $role, $update);
	like($e, qr/ERROR:  \Q$message\E.*$detail/s, $what);
	($rc, $o, $e) = run_script($db, $role, $update, no_stop => 1);
	my @errors = $e =~ /ERROR:  ([^\n]*)/g;
	is($errors[0] // '', $message, "$what, without ON_ERROR_STOP too");
	ok(grep({ /read-only transaction/ } @errors[ 1 .. $#errors ]), 'where the statements after it fail read-only')
	  or diag(explain(\@errors));
	is($node->safe_psql($db, $state), $before, 'and nothing changed');
}
refused('app', 'owner', "this script updates the portable edition of idempotency from $NextVersion::FROM to $NextVersion::TO, and version $NextVersion::TO is installed",
	qr/HINT:  It is up to date/, 'a second run is refused');
install('refusals', $current);
refused('refusals', 'other', 'must be the owner of schema idempotency to update it', qr/Role "owner" installed/,
	'another role is refused');
refused('refusals', 'postgres', 'must be the owner of schema idempotency to update it', qr//, 'so is a superuser');
$node->safe_psql('refusals', q{ALTER DEFAULT PRIVILEGES FOR ROLE owner GRANT SELECT ON TABLES TO other});
refused('refusals', 'owner', 'role "owner" has default privileges, which would apply to the objects of idempotency',
	qr/for tables/, 'so is an installer with default privileges');
$node->safe_psql('refusals', q{ALTER DEFAULT PRIVILEGES FOR ROLE owner REVOKE SELECT ON TABLES FROM other});
my $before_revoke = $node->safe_psql('refusals', $state);

# run statement by statement (no --single-transaction), a statement that
# failed after the checks would leave the others done: the update is
# refused before it changes anything, and its end gives the session its
# settings back
my $settings = q{
SHOW default_transaction_read_only;
SHOW search_path;
SELECT idempotency.portable_version();
};
# (the session's settings that say "one transaction" do not; nor does a
# serializable, deferrable session wait for the serializable writers of
# others; and a run stopped part way before, whose settings the session
# still has, does not make this one lose the session's own)
my $writer = $node->background_psql('refusals', on_error_stop => 1);
$writer->query_safe(q{BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT count(*) FROM pg_class; CREATE TEMPORARY TABLE w (i int); INSERT INTO w VALUES (1);});
my $begin = "$top/sql/checks/portable_begin/1.2.sql";
my ($rc, $o, $e) = $node->psql('refusals', qq{SET search_path = public, pg_catalog;
SET idempotency_script.transaction = 'one';
SET idempotency_script.mode = 'transaction';
SET default_transaction_isolation = serializable;
SET default_transaction_deferrable = on;
SET statement_timeout = '20s';
\\i $begin
\\i $update
RESET default_transaction_isolation;
$settings
SHOW default_transaction_deferrable;},
	on_error_stop => 0, extra_params => [ '-U', 'owner' ]);
my @errors = $e =~ /ERROR:  ([^\n]*)/g;
is($errors[0] // '', "the update of idempotency from $NextVersion::FROM to $NextVersion::TO must run in one transaction",
	'an update run statement by statement is refused') or diag($e);
ok(grep({ /read-only transaction/ } @errors[ 1 .. $#errors ]), 'and the statements after it fail read-only');
is($o, "off\npublic, pg_catalog\n$NextVersion::FROM\non", 'its end gives the session its settings back');
is($node->safe_psql('refusals', $state), $before_revoke, 'and nothing changed');
$writer->query_safe('COMMIT');
$writer->quit;
($rc, $o, $e) = $node->psql('refusals', undef, on_error_stop => 0,
	extra_params => [ '-U', 'owner', '-v', 'ON_ERROR_STOP=1', '-f', $update ]);
like($e, qr/must run in one transaction.*HINT:  Run it with psql --single-transaction/s, 'with ON_ERROR_STOP too');

# in one transaction, a statement that fails after the checks (here, the
# registry locked past lock_timeout) leaves nothing done, and the session
# as it was
my $locker = $node->background_psql('refusals', on_error_stop => 1);
$locker->query_safe('BEGIN; LOCK TABLE idempotency.registry IN ACCESS SHARE MODE;');
($rc, $o, $e) = $node->psql('refusals', "SET search_path = public, pg_catalog;\nSET lock_timeout = '200ms';\nBEGIN;\n\\i $update\nROLLBACK;\n$settings",
	on_error_stop => 0, extra_params => [ '-U', 'owner' ]);
@errors = $e =~ /ERROR:  ([^\n]*)/g;
is($errors[0] // '', 'canceling statement due to lock timeout', 'a statement after the checks fails in the update\'s transaction');
is($o, "off\npublic, pg_catalog\n$NextVersion::FROM", 'which leaves the session as it was, at the version it was');
is($node->safe_psql('refusals', $state), $before_revoke, 'and nothing changed');
$locker->query_safe('COMMIT');
$locker->quit;

# psql's ON_ERROR_ROLLBACK runs each statement in a savepoint of its own,
# and undoes a failed one alone: a refusal (here, of a superuser) would not
# stop the statements after it, so it ends the session instead; and an
# update run so, whose failure part way would leave the rest done, is
# refused as one run statement by statement is
for my $role ('postgres', 'owner')
{
	($rc, $o, $e) = $node->psql('refusals', "BEGIN;\n\\i $update\nCOMMIT;\n",
		on_error_stop => 0, extra_params => [ '-U', $role, '-v', 'ON_ERROR_ROLLBACK=on' ]);
	like($e, qr/WARNING:  the script is refused \((must be the owner of schema idempotency to update it|the update of idempotency from \S+ to \S+ must run in one transaction)\), and each of its statements runs in a savepoint of its own.*FATAL:  terminating connection/s,
		"under ON_ERROR_ROLLBACK, the update is refused to $role, and the session ends") or diag($e);
	is($node->safe_psql('refusals', $state), $before_revoke, 'so that nothing changed');
}

# the whole script sent as one query string, as a migration tool may: one
# transaction; the statements after it in the transaction have their
# search_path back
($rc, $o, $e) = $node->psql('refusals', undef, on_error_stop => 0,
	extra_params => [ '-U', 'owner', '-v', 'ON_ERROR_STOP=1', '-c',
		"SET LOCAL search_path = public, pg_catalog;\n" . PostgreSQL::Test::Utils::slurp_file($update) . "\nSHOW search_path;" ]);
is($rc, 0, 'the script as one query string updates') or diag($e);
is($o, 'public, pg_catalog', 'and gives the rest of the transaction its search_path back');
is($node->safe_psql('refusals', 'SELECT idempotency.portable_version()'), $NextVersion::TO, 'to the new version');
$node->safe_psql('c_edition', 'CREATE EXTENSION idempotency');
($rc, $o, $e) = run_script('c_edition', 'owner', $update);
like($e, qr/schema "idempotency" holds no portable edition of idempotency.*ALTER EXTENSION/s,
	'the extension is refused, to another role too');
($rc, $o, $e) = run_script('c_edition', 'postgres', $update);
like($e, qr/schema "idempotency" holds no portable edition of idempotency.*ALTER EXTENSION/s, 'the extension is refused');
($rc, $o, $e) = run_script('postgres', 'postgres', $update);
like($e, qr/the portable edition of idempotency is not installed in this database/, 'so is a database without it');

$node->stop;
done_testing();
