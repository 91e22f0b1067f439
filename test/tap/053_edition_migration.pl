# Moving an installation between editions with the commands of
# doc/portable.md ("Moving between editions"), run as they are written:
# from the C edition (a server with the library) to the portable edition (a
# server without it, installed by the database owner), and from there back
# to a new C database.  After each move the target holds every row the
# source held, table by table, and the application carries on there: a
# finished key replays its answer byte for byte, a claim in progress is
# finished with its attempt, a seen message is a redelivery, an unused
# token is consumed once, a message leased by a relay is acknowledged by
# that relay's attempt, and the next fetch's attempt is above every attempt
# the source issued.

use strict;
use warnings FATAL => 'all';

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $top = abs_path(dirname(__FILE__) . '/../..');
my $doc = do { local (@ARGV, $/) = "$top/doc/portable.md"; <> };
my ($section) = $doc =~ /^## Moving between editions\n(.*?)(?=^## |\z)/ms;
my ($commands) = ($section // '') =~ /^```sh\n(.*?)^```$/ms;
ok(defined $commands, 'doc/portable.md shows the commands that move an installation');

my $script = `make -s -C '$top' portable | tail -n 1`;
chomp $script;

my $c = PostgreSQL::Test::Cluster->new('c_edition');
$c->init;
$c->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = 0
});
$c->start;
my $p = PostgreSQL::Test::Cluster->new('portable');
$p->init;
$p->start;
my $c_admin = $c->safe_psql('postgres', 'SELECT current_user');

$c->safe_psql('postgres', q{CREATE ROLE app1 LOGIN; CREATE DATABASE app; CREATE DATABASE back});
$c->safe_psql($_, q{CREATE EXTENSION idempotency}) for qw(app back);
$c->safe_psql('app', q{SELECT idempotency.grant_usage('app1')});
$p->safe_psql('postgres', q{CREATE ROLE owner LOGIN; CREATE ROLE app1 LOGIN; CREATE DATABASE app OWNER owner});
my ($rc, $out, $err) = $p->psql('app', undef,
	extra_params => [ '-U', 'owner', '--single-transaction', '-v', 'ON_ERROR_STOP=1', '-f', $script ]);
is($rc, 0, 'the portable edition is installed in the target') or diag($err);

# the source's state: finished records, a claim in progress, inbox
# entries, tokens, a leased and a waiting outbox message of one key and a
# delivered one, a state machine
$c->safe_psql('app', q{
	BEGIN;
	SELECT idempotency.idempotent_begin('paid', request => '{"amount": 5}');
	SELECT idempotency.idempotent_finish('paid', '{"charge": 1}', status_code => 201, body => '\x00ff',
										 headers => '[["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]]');
	COMMIT;
	SELECT idempotency.idempotent_begin('running', external => true, lease => '1 hour');
	SELECT idempotency.inbox_receive('billing', 'm1');
	SELECT idempotency.issue_token('checkout', '1 hour') IS NOT NULL;
	SELECT idempotency.consume_token(idempotency.issue_token('used', '1 hour'), 'used');
	SELECT idempotency.outbox_send('orders', '{"n": 1}', 'k', message_id => 'o1');
	SELECT idempotency.outbox_send('orders', '{"n": 2}', 'k', message_id => 'o2');
	SELECT idempotency.outbox_send('orders', '{"n": 3}', message_id => 'o3');
}, extra_params => [ '-U', 'app1' ]);
my $leased = $c->safe_psql('app', q{SELECT string_agg(message_id || '=' || attempt, ',' ORDER BY message_id) FROM idempotency.outbox_fetch(10)},
	extra_params => [ '-U', 'app1' ]);
my ($o3_attempt) = $leased =~ /o3=(\d+)/;
my ($o1_attempt) = $leased =~ /o1=(\d+)/;
$c->safe_psql('app', qq{SELECT idempotency.outbox_ack($o3_attempt, ARRAY['o3'])}, extra_params => [ '-U', 'app1' ]);
$c->safe_psql('app', q{SELECT idempotency.define_state_machine('order_status', '{"created": ["paid"], "paid": []}')});
my $running_attempt = $c->safe_psql('app', q{SELECT attempt FROM idempotency.my_records WHERE key = 'running'},
	extra_params => [ '-U', 'app1' ]);
my $last_attempt = $c->safe_psql('app', q{SELECT last_value FROM idempotency.outbox_attempt_seq});

# every row of the edition's tables, for comparing two databases
my $rows = q{
	SELECT t, string_agg(r, E'\n' ORDER BY r) FROM (
		SELECT 'application_roles' AS t, to_jsonb(x)::text AS r FROM idempotency.application_roles AS x
		UNION ALL SELECT 'registry', to_jsonb(x)::text FROM idempotency.registry AS x
		UNION ALL SELECT 'inbox', to_jsonb(x)::text FROM idempotency.inbox AS x
		UNION ALL SELECT 'tokens', to_jsonb(x)::text FROM idempotency.tokens AS x
		UNION ALL SELECT 'outbox', to_jsonb(x)::text FROM idempotency.outbox AS x
		UNION ALL SELECT 'state_machines', to_jsonb(x)::text FROM idempotency.state_machines AS x) AS a
	 GROUP BY t ORDER BY t};

# move: the commands of the doc with SOURCE and TARGET set, as a user runs
# them from a shell
sub move
{
	my ($what, $source, $target) = @_;
	my ($o, $e) = ('', '');
	my $ok = IPC::Run::run([ 'bash', '-e', '-c', $commands ], '>', \$o, '2>', \$e,
		init => sub { $ENV{SOURCE} = $source; $ENV{TARGET} = $target; });
	ok($ok, "$what: the commands run") or diag("$o\n$e");
}

move('C to portable', $c->connstr('app') . " user=$c_admin", $p->connstr('app') . ' user=owner');
is($p->safe_psql('app', $rows), $c->safe_psql('app', $rows), 'C to portable: every row moved as it was');
$p->safe_psql('app', q{SELECT idempotency.grant_usage('app1')}, extra_params => [ '-U', 'owner' ]);

# carry on in the target: answer every kind of row moved
my $carry_on = qq{
	SELECT concat_ws(' ', outcome, response, status_code, encode(body, 'hex'), headers)
	  FROM idempotency.idempotent_begin('paid', request => '{"amount": 5}');
	SELECT idempotency.inbox_receive('billing', 'm1');
	SELECT idempotency.consume_token((SELECT token FROM idempotency.my_tokens WHERE scope = 'checkout'), 'checkout');
	SELECT idempotency.consume_token((SELECT token FROM idempotency.my_tokens WHERE scope = 'used'), 'used');
};
my $expected = join("\n", 'replay {"charge": 1} 201 00ff [["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]]', 'f', 't', 'f');
is($p->safe_psql('app', $carry_on, extra_params => [ '-U', 'app1' ]), $expected,
	'in the portable edition: the answer replays byte for byte, the message is a redelivery, the unused token is consumed once');
is($p->safe_psql('app', qq{SELECT idempotency.idempotent_finish('running', '{"done": true}', attempt => $running_attempt)},
	extra_params => [ '-U', 'app1' ]), 'completed', 'the claim in progress is finished with its attempt');
is($p->safe_psql('app', qq{SELECT idempotency.outbox_ack($o1_attempt, ARRAY['o1'])}, extra_params => [ '-U', 'app1' ]),
	'1', 'the message a relay leased in the source is acknowledged by its attempt');
my $next = $p->safe_psql('app', q{SELECT message_id || ' ' || (attempt > } . $last_attempt . q{) FROM idempotency.outbox_fetch(10)},
	extra_params => [ '-U', 'app1' ]);
is($next, 'o2 true', 'the next message of the key is handed out under an attempt above every one the source issued');

# and back, into a new C database
$c->safe_psql('back', q{CREATE TABLE keep_me ()}); # (a database the admin uses otherwise)
move('portable to C', $p->connstr('app') . ' user=owner', $c->connstr('back') . " user=$c_admin");
is($c->safe_psql('back', $rows), $p->safe_psql('app', $rows), 'portable to C: every row moved as it was');
$c->safe_psql('back', q{SELECT idempotency.grant_usage('app1')});
is($c->safe_psql('back', q{
	SELECT concat_ws(' ', outcome, response) FROM idempotency.idempotent_begin('running');
	SELECT count(*) FROM idempotency.outbox_fetch(10);
}, extra_params => [ '-U', 'app1' ]), "replay {\"done\": true}\n0",
	'in the C edition: the claim finished in the portable one replays, and the message leased there stays leased');
is($c->safe_psql('back', q{SELECT transition_allowed FROM idempotency.transition_allowed('order_status', 'created', 'paid')}),
	't', 'the state machine came back and answers');

$c->stop;
$p->stop;
done_testing();
