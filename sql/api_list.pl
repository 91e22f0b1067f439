#!/usr/bin/perl
#
# sql/api_list.pl DIR OUT: the application API, as the newest version of the
# view idempotency.application_api (DIR/VERSION.sql) lists it, written to
# OUT as one line per object for the C code that must name the same objects
# (the permission hint, src/admin/hints.c):
#
#   API_FUNCTION("idempotent_begin")
#   API_VIEW("my_records")
#
# The view is the one list of what grant_usage() grants; nothing else
# writes it down.
#
use strict;
use warnings FATAL => 'all';

my ($dir, $out) = @ARGV;
die "usage: api_list.pl DIR OUT\n" unless defined $out;

sub version_key { join '', map { sprintf '%06d', $_ } split /\./, shift }

opendir(my $dh, $dir) or die "$dir: $!\n";
my @versions = sort { version_key($a) cmp version_key($b) }
	map { /^(\d+(?:\.\d+)*)\.sql$/ ? $1 : () } readdir $dh;
closedir $dh;
die "$dir: no VERSION.sql\n" unless @versions;
my $file = "$dir/$versions[-1].sql";

open(my $in, '<', $file) or die "$file: $!\n";
my $sql = do { local $/; <$in> };
close $in;

my @lines;
while ($sql =~ /\(\s*'(function|view)'\s*,\s*'([a-z_]+)'\s*,\s*'[A-Z]+'\s*\)/g)
{
	push @lines, sprintf('API_%s("%s")', uc $1, $2);
}
die "$file: no ('function' | 'view', name, privilege) rows\n" unless @lines;

open(my $fh, '>', "$out.tmp") or die "$out.tmp: $!\n";
print $fh "/* written by sql/api_list.pl from $file */\n", map { "$_\n" } @lines;
close $fh or die "$out.tmp: $!\n";
rename "$out.tmp", $out or die "$out: $!\n";
