#!/usr/bin/perl
#
# sql/include.pl: write an install or update script from its source.
#
#	perl sql/include.pl RELEASED SOURCE OUTPUT
#
# SOURCE (sql/idempotency--X.sql.in) is SQL in which a line
#
#	#include "functions/NAME/VERSION.sql"
#
# stands for that file's text (named relative to SOURCE's directory; an
# included file may include others), each of its lines indented as the
# #include line is, so that a view's definition can sit inside a function's
# body.  Nothing else is expanded.  RELEASED lists, as sha256sum prints them,
# the SHA-256 of the released scripts: a script listed there that comes out
# different is refused, since a released script never changes.  Only Perl's
# core modules are used.
#
use strict;
use warnings;
use Digest::SHA qw(sha256_hex);
use File::Basename qw(basename dirname);

die "usage: $0 RELEASED SOURCE OUTPUT\n" unless @ARGV == 3;
my ($released, $source, $output) = @ARGV;
my $base = dirname($source);

sub expand
{
	my ($file, $indent, $seen) = @_;
	die "$file includes itself\n" if $seen->{$file};
	local $seen->{$file} = 1;
	open(my $fh, '<', $file) or die "could not open \"$file\": $!\n";
	my $text = '';
	while (my $line = <$fh>)
	{
		if ($line =~ /^(\s*)#include\s+"([^"]+)"\s*$/)
		{
			$text .= expand("$base/$2", $indent . $1, $seen);
		}
		elsif ($line =~ /^#/)
		{
			die "$file:$.: unknown directive: $line";
		}
		else
		{
			$text .= ($line =~ /^\s*$/ ? '' : $indent) . $line;
		}
	}
	close($fh);
	return $text;
}

my $text = expand($source, '', {});

my $name = basename($output);
open(my $sums, '<', $released) or die "could not open \"$released\": $!\n";
while (<$sums>)
{
	next unless /^([0-9a-f]{64})\s+\*?(\S+)$/ && $2 eq $name;
	my $got = sha256_hex($text);
	die "$name is a released script, and $source now gives another text "
	  . "(SHA-256 $got, released $1): put the change in the update script "
	  . "of the version in development\n"
	  if $got ne $1;
}
close($sums);

open(my $out, '>', "$output.tmp") or die "could not write \"$output.tmp\": $!\n";
print $out $text;
close($out) or die "could not write \"$output.tmp\": $!\n";
rename("$output.tmp", $output) or die "could not rename \"$output.tmp\": $!\n";
