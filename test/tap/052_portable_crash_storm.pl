# The crash storm of test/tap/007_crash_storm.pl against the portable
# edition: the same clients, kills and checks (no key charged twice, no
# acknowledged answer lost, no fencing token issued twice, nothing stuck),
# on a server that never loads the C library, where the database's owner
# installed the portable script and a scheduler's calls of cleanup() are
# the expiry.

use strict;
use warnings FATAL => 'all';

use File::Basename qw(dirname);
# loaded here, at compile time: their INIT blocks would not run in a file
# that do() compiles later
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

$ENV{IDEMPOTENCY_EDITION} = 'portable';
my $storm = dirname(__FILE__) . '/007_crash_storm.pl';
do $storm;
die "$storm: $@" if $@;
