# Serialization failures (40001) that the extension's internal statements
# raise under REPEATABLE READ reach the caller with their SQLSTATE and
# message, but without the internal statement in CONTEXT; a caller's own
# PL/pgSQL lines still show, and the transaction rolls back as usual.
# (test/regress/sql/error_contexts.sql does the same for errors one session can cause.)

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('contexts');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	CREATE TABLE work (k text);
	CREATE FUNCTION claim(k idempotency.key) RETURNS text LANGUAGE plpgsql AS $$
	BEGIN
		RETURN (idempotency.idempotent_begin(k, external => true)).outcome;
	END $$;
});

my $rr = $node->background_psql('postgres', on_error_stop => 0);
$rr->query_safe('\set VERBOSITY verbose');

# in_rr(setup, statement): take a REPEATABLE READ snapshot, let another
# session run setup and commit, then run statement in the snapshot's
# transaction; returns its stderr, after rolling back
sub in_rr
{
	my ($setup, $statement) = @_;
	$rr->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ; INSERT INTO work VALUES (1)');
	$node->safe_psql('postgres', $setup);
	$rr->{stderr} = '';
	$rr->query($statement);
	my $stderr = $rr->{stderr};
	$rr->{stderr} = '';
	$rr->query_safe('ROLLBACK');
	return $stderr;
}

# check(name, stderr, context_like): 40001 with its message, no internal SQL
sub check
{
	my ($name, $stderr, $context_like) = @_;
	like($stderr, qr/ERROR:  40001: could not serialize access due to concurrent update/,
		"$name: 40001 and its message");
	unlike($stderr, qr/idempotency\.(registry|inbox|tokens|outbox)|SQL statement "(INSERT|UPDATE|DELETE|WITH|SELECT r\.)/,
		"$name: no internal statement in CONTEXT");
	like($stderr, $context_like, "$name: the caller's own context") if defined $context_like;
}

check('begin', in_rr(q{SELECT idempotency.idempotent_begin('k1', external => true)},
		q{SELECT idempotency.idempotent_begin('k1', external => true)}));
check('begin from a PL/pgSQL function',
	in_rr(q{SELECT idempotency.idempotent_begin('k2', external => true)}, q{SELECT claim('k2')}),
	qr/CONTEXT:  PL\/pgSQL function claim\(idempotency\.key\) line 3 at RETURN/);
check('begin, wait => false',
	in_rr(q{SELECT idempotency.idempotent_begin('k3', external => true)},
		q{SELECT idempotency.idempotent_begin('k3', wait => false, external => true)}));
$node->safe_psql('postgres', q{SELECT idempotency.idempotent_begin('k4', external => true)});
check('finish',
	in_rr(q{SELECT idempotency.idempotent_finish('k4', '{}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k4'))},
		q{SELECT idempotency.idempotent_finish('k4', '{}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k4'))}));
check('inbox_receive',
	in_rr(q{SELECT idempotency.inbox_receive('c', 'm1')},
		q{SELECT idempotency.inbox_receive('c', 'm1')}));
check('inbox_receive_batch',
	in_rr(q{SELECT idempotency.inbox_receive_batch('c', ARRAY['m2', 'm3'])},
		q{SELECT idempotency.inbox_receive_batch('c', ARRAY['m3', 'm4'])}));

# the outbox: a send on a key another session sent on after the snapshot
# is numbered after that one (senders number with the latest committed
# state), with no error; a fetch of messages another relay took after the
# snapshot fails
$node->safe_psql('postgres', q{SELECT idempotency.outbox_send('t', '1', 'rr-fetch')});
is(in_rr(q{SELECT idempotency.outbox_send('t', '1', 'rr-send')},
		q{SELECT idempotency.outbox_send('t', '1', 'rr-send')}), '',
	'outbox_send: a REPEATABLE READ sender after another sender of its key committed');
check('outbox_fetch',
	in_rr(q{SELECT count(*) FROM idempotency.outbox_fetch()},
		q{SELECT count(*) FROM idempotency.outbox_fetch()}));

# after all of it, the session works and its rolled-back work is gone
$rr->query_safe('INSERT INTO work VALUES (2)');
is($rr->query_safe('SELECT count(*) FROM work'), '1', 'the session goes on, in autocommit');
$rr->quit;
is($node->safe_psql('postgres', 'SELECT count(*) FROM work'), '1',
	'only the work after the rollbacks committed');

$node->stop;
done_testing();
