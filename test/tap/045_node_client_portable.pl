# The Node package's tests of test/tap/043_node_client.pl against the
# portable edition: the same frameworks, PgBouncer and checks, on a server
# that never loads the C library, where the database's owner installed the
# portable script.

use strict;
use warnings FATAL => 'all';

use File::Basename qw(dirname);
# loaded here, at compile time: their INIT blocks would not run in a file
# that do() compiles later
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

$ENV{IDEMPOTENCY_EDITION} = 'portable';
my $tests = dirname(__FILE__) . '/043_node_client.pl';
do $tests;
die "$tests: $@" if $@;
