# NextVersion.pm: a copy of the build with a made-up next version (1.3
# after 1.2), for the tests of the portable edition's and pg_tle's update
# scripts (test/tap/056_portable_update.pl, test/tap/054_pg_tle.pl) while
# the portable edition has only one version.  The made-up update does what a real one does to
# an installation in use: it adds a column to the registry, fills it for
# the rows there, and adds a function of the API.  next_version($top) makes
# the copy, builds its portable and tle scripts, and returns their paths.

package NextVersion;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use File::Copy qw(copy);
use File::Path qw(make_path);
use IPC::Run;
use PostgreSQL::Test::Utils;

our @EXPORT = qw(next_version);

# the version of the tree, and the next one
our ($FROM) = PostgreSQL::Test::Utils::slurp_file(__FILE__ =~ s{[^/]*$}{}r . '../../../idempotency.control')
  =~ /^default_version\s*=\s*'(\d+\.\d+)'/m or die 'no default_version';
our $TO = $FROM =~ s/(\d+)$/$1 + 1/er;

my $update = <<"SQL";
/* sql/idempotency--$FROM--$TO.sql.in, made up by test/tap/perl/NextVersion.pm */

#if c
\\echo Use "ALTER EXTENSION idempotency UPDATE TO '$TO'" to load this file. \\quit
#include "checks/update_defaults/1.2.sql"
#endif

ALTER TABLE idempotency.registry ADD COLUMN next_note pg_catalog.text;
UPDATE idempotency.registry SET next_note = 'from $FROM';

CREATE FUNCTION idempotency.next_probe()
RETURNS pg_catalog.text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS \$\$SELECT 'next'::pg_catalog.text\$\$;
SQL

sub next_version
{
	my ($top) = @_;
	my $copy = PostgreSQL::Test::Utils::tempdir;
	for my $file (map { s{^\Q$top/\E}{}r } grep { !m{/sql/built/} } (glob("$top/sql/*"), glob("$top/sql/*/*/*"), "$top/Makefile", "$top/idempotency.control"))
	{
		next if -d "$top/$file";
		make_path(dirname("$copy/$file"));
		copy("$top/$file", "$copy/$file") or die "copy $file: $!";
	}
	PostgreSQL::Test::Utils::append_to_file("$copy/sql/idempotency--$FROM--$TO.sql.in", $update);
	my $control = PostgreSQL::Test::Utils::slurp_file("$copy/idempotency.control");
	$control =~ s/^default_version\s*=.*$/default_version = '$TO'/m or die 'no default_version';
	unlink("$copy/idempotency.control");
	PostgreSQL::Test::Utils::append_to_file("$copy/idempotency.control", $control);
	my ($out, $err);
	IPC::Run::run([ 'make', '-s', '--no-print-directory', '-C', $copy, 'portable', 'tle' ], '>', \$out, '2>', \$err)
	  or die "make portable tle in the copy: $err";
	my %scripts = map { $_ => "$copy/sql/built/idempotency-$_.sql" }
	  ("portable--$TO", "portable--$FROM--$TO", "pgtle--$TO", "pgtle--$FROM--$TO");
	-f $_ or die "make did not write $_" for values %scripts;
	return \%scripts;
}

sub dirname { my ($path) = @_; return $path =~ s{/[^/]*$}{}r; }

1;
