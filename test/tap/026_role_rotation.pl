# Rotating credentials under load.  A secrets manager hands out short-lived
# login roles, all members of one application role that grant_usage() was
# given to.  Four clients, each logged in as a different lease, send the
# same 60 payments at once, every payment from every client, through the
# the handler of doc/idempotency-keys.md in the transactional mode; then a new lease, created
# after all of them, retries every payment.  Records belong to the
# application role, so each payment is charged exactly once and every
# retry from any lease replays it.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;

my $keys = 60;
my @leases = map { "v-app-lease$_" } 1 .. 4;

$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	CREATE ROLE api NOLOGIN;
	SELECT idempotency.grant_usage('api');
	CREATE TABLE public.charges (key text PRIMARY KEY, amount int, lease text);
	GRANT INSERT ON public.charges TO api;
	CREATE FUNCTION public.pay(order_id text, amount int) RETURNS jsonb
	LANGUAGE plpgsql SET search_path = pg_catalog AS $$
	DECLARE
		k idempotency.key := idempotency.make_key('order', order_id, 'pay');
		b record;
		answer jsonb;
		status text;
	BEGIN
		b := idempotency.idempotent_begin(k, 'payments',
				 request => jsonb_build_object('order', order_id, 'amount', amount));
		IF b.outcome <> 'execute' THEN
			RETURN b.response;
		END IF;
		INSERT INTO public.charges VALUES (k, amount, session_user);
		answer := jsonb_build_object('order', order_id, 'charged', amount, 'by', session_user);
		status := idempotency.idempotent_finish(k, answer, 'payments');
		RETURN answer;
	END $$;
	GRANT EXECUTE ON FUNCTION public.pay(text, int) TO api;
});
$node->safe_psql('postgres', qq{CREATE ROLE "$_" LOGIN IN ROLE api}) for @leases;

# every lease sends every payment, each starting at a different one
my $script = sub {
	my ($offset) = @_;
	return join('', map {
		my $i = ($_ + $offset) % $keys + 1;
		"SELECT public.pay('ORD$i', $i);\n"
	} 0 .. $keys - 1);
};
my @sessions;
for my $n (0 .. $#leases)
{
	my $s = $node->background_psql('postgres', on_error_stop => 0,
		extra_params => [ '-U', $leases[$n] ]);
	$s->query_until(qr/started/, "\\echo started\n" . $script->($n * 15) . "\\echo finished\n");
	push @sessions, $s;
}
for my $s (@sessions)
{
	$s->query_until(qr/finished/, '');
	is($s->{stderr}, '', 'a lease sent every payment without an error');
	$s->quit;
}

is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT key) FROM public.charges'),
	"$keys|$keys", 'each payment was charged once, whichever lease sent it first');
is( $node->safe_psql('postgres', q{
	SELECT count(DISTINCT owner) || ' ' || min(owner) FROM idempotency.registry}),
	'1 api', 'every record belongs to the application role');

# a lease created after all of them retries every payment: all replays
$node->safe_psql('postgres', q{CREATE ROLE "v-app-lease5" LOGIN IN ROLE api});
my $retries = $node->safe_psql('postgres',
	qq{SELECT count(*) FILTER (WHERE public.pay('ORD' || i, i)->>'charged' = i::text)
		 FROM generate_series(1, $keys) AS i},
	extra_params => [ '-U', 'v-app-lease5' ]);
is($retries, $keys, 'the next lease replays every stored answer');
is($node->safe_psql('postgres', 'SELECT count(*) FROM public.charges'), $keys,
	'and charges nothing again');

done_testing();
