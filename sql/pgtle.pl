#!/usr/bin/perl
#
# sql/pgtle.pl: the tle edition's install script (sql/include.pl
# --edition=tle) wrapped for pg_tle, as one SQL script that a role with
# pgtle_admin runs to make CREATE EXTENSION idempotency available in a
# database (doc/portable.md).
#
#	perl sql/pgtle.pl CONTROL VERSION SCRIPT > OUTPUT
#
# The description is the control file's comment.  The script goes in a
# dollar quote whose tag it must not contain.  A VERSION of A--B makes the
# update's: SCRIPT as the update path from A to B
# (pgtle.install_update_path), and B the default version, so that ALTER
# EXTENSION idempotency UPDATE then takes it.
use strict;
use warnings;

die "usage: $0 CONTROL VERSION SCRIPT\n" unless @ARGV == 3;
my ($control, $version, $file) = @ARGV;
my $text = do { local (@ARGV, $/) = $file; <> };
my ($comment) = do { local (@ARGV, $/) = $control; <> } =~ /^comment\s*=\s*'((?:[^']|'')*)'/m;
die "$control: no comment\n" unless defined $comment;
my $tag = '$_pgtle_idempotency_$';
die "$file contains $tag\n" if index($text, $tag) >= 0;
if ($version =~ /^([0-9.]+)--([0-9.]+)$/)
{
	print "-- idempotency's update from $1 to $2 for pg_tle, written by sql/pgtle.pl from $file\n";
	print "SELECT pgtle.install_update_path('idempotency', '$1', '$2', $tag\n";
	print $text;
	print "$tag);\n";
	print "SELECT pgtle.set_default_version('idempotency', '$2');\n";
	exit 0;
}
die "bad version \"$version\"\n" unless $version =~ /^[0-9.]+$/;
print "-- idempotency $version for pg_tle, written by sql/pgtle.pl from $file\n";
print "SELECT pgtle.install_extension('idempotency', '$version', '$comment', $tag\n";
print $text;
print "$tag);\n";
