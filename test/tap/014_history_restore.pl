# The state history through pg_dump / pg_restore: keys that JSON cannot hold
# as numbers (NaN, infinities) are stored as strings, so the dump restores
# with --exit-on-error; the restored rows, whose tables have new OIDs, stay
# hidden from application roles until an administrator links them to the
# restored tables by name, as doc/state-machines.md says.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('history');
$node->init;
$node->append_conf('postgresql.conf', qq{shared_preload_libraries = 'idempotency'});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	CREATE ROLE regress_reader;
	CREATE TABLE measures (id numeric PRIMARY KEY, status text NOT NULL);
	GRANT SELECT ON measures TO regress_reader;
	CREATE TRIGGER measures_history AFTER INSERT OR UPDATE ON measures
		FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
	INSERT INTO measures VALUES ('NaN', 'created'), ('Infinity', 'created'),
		('-Infinity', 'created'), (2.5, 'created');
	UPDATE measures SET status = 'done';
});
is($node->safe_psql('postgres', q{
	SET ROLE regress_reader;
	SELECT count(*) FROM idempotency.state_history
	 WHERE row_key::text::jsonb = row_key AND table_name = 'public.measures'}),
	'8', 'every history row is valid JSON and visible to a reader of the table');

my $dump = $node->basedir . '/history.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ],
	'pg_dump of a database with history');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'pg_restore of that history');
is($node->safe_psql('restored', q{
	SELECT string_agg(row_key ->> 'id', ',' ORDER BY row_key ->> 'id')
	  FROM idempotency.state_history WHERE from_state IS NULL}),
	'-Infinity,2.5,Infinity,NaN', 'the keys are restored as they were');
is($node->safe_psql('restored', q{
	SELECT count(*) FROM idempotency.state_history
	 WHERE jsonb_typeof(row_key -> 'id') = 'number'}),
	'2', 'a finite key is still a JSON number');

is($node->safe_psql('restored',
		q{SET ROLE regress_reader; SELECT count(*) FROM idempotency.state_history}),
	'0', 'restored history is hidden until it is linked to the restored table');
$node->safe_psql('restored',
	q{UPDATE idempotency.state_history SET table_oid = coalesce(to_regclass(table_name), 0)});
is($node->safe_psql('restored',
		q{SET ROLE regress_reader; SELECT count(*) FROM idempotency.state_history}),
	'8', 'and visible to the reader once linked');

$node->stop;
done_testing();
