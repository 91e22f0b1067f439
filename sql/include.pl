#!/usr/bin/perl
#
# sql/include.pl: write an install or update script from its source.
#
#	perl sql/include.pl [--edition=EDITION] RELEASED SOURCE... OUTPUT
#
# SOURCE (sql/idempotency--X.sql.in) is SQL in which a line
#
#	#include "functions/NAME/VERSION.sql"
#
# stands for that file's text (named relative to SOURCE's directory; an
# included file may include others), each of its lines indented as the
# #include line is, so that a view's definition can sit inside a function's
# body.  RELEASED lists, as sha256sum prints them, the SHA-256 of the
# released scripts: a script listed there that comes out different is
# refused, since a released script never changes.  Only Perl's core modules
# are used.
#
# EDITION is the extension's (c, the default: one SOURCE) or the portable
# edition's, for a server where the C library cannot be loaded: portable,
# the plain script a database owner runs, or tle, the same script run by
# CREATE EXTENSION through pg_tle.  A portable script is the install
# script among the SOURCEs and the update scripts that lead from it to the
# latest version, in that order, and in it:
#
#	- #include "X/V.sql" stands for X/V.portable.sql where that file
#	  exists: the object's portable definition, next to the C edition's;
#	- a C function without one becomes a function of the same signature
#	  that calls idempotency.not_portable(), which raises
#	  feature_not_supported (not LEAKPROOF, which only a superuser may
#	  declare), so that the script creates every function of the API and
#	  says which are not there yet;
#	- lines between "#if EDITION..." and "#else" or "#endif" are kept only
#	  in the editions named (c, portable, tle), those between "#else" and
#	  "#endif" only in the others.
#
# A portable or tle update script is one update script among the SOURCEs
# (sql/idempotency--A--B.sql.in) alone: that step.  The portable edition has
# no pg_extension row, so its own scripts say which version they leave
# (idempotency.portable_version(), sql/checks/portable_version) and its
# update scripts begin by checking that they find A, installed by the role
# that runs them (sql/checks/portable_update; there @FROM@ and @TO@ stand
# for A and B).  The tle edition's update is what ALTER EXTENSION runs:
# pg_tle knows the version; it begins with the check of the default
# privileges of the role that runs it (sql/checks/update_defaults), which
# the extension's update scripts make themselves.
#
# Directives do not nest.  The C edition's text is what it was before the
# directives were written: they and the lines they leave out vanish.
use strict;
use warnings;
use Digest::SHA qw(sha256_hex);
use File::Basename qw(basename dirname);

my $edition = 'c';
if (@ARGV && $ARGV[0] =~ /^--edition=(\w+)$/)
{
	$edition = $1;
	shift @ARGV;
}
die "unknown edition \"$edition\" (c, portable or tle)\n"
  unless $edition =~ /^(c|portable|tle)$/;
die "usage: $0 [--edition=EDITION] RELEASED SOURCE... OUTPUT\n"
  unless @ARGV >= 3 && ($edition ne 'c' || @ARGV == 3);
my $released = shift @ARGV;
my $output = pop @ARGV;
my @sources = @ARGV;
my $base = dirname($sources[0]);

# not_portable TEXT, FILE: TEXT with each C function's definition made one
# of the same signature that raises feature_not_supported
sub not_portable
{
	my ($text, $file) = @_;
	$text =~ s{^(CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([\w.]+)\b[^;]*?)
			   ^AS\s+'MODULE_PATHNAME',\s*'\w+'\s*
			   LANGUAGE\s+C\b([^;]*);}
	{not_portable_body($1, $2, $3)}gmsex;
	die "$file: a C function that is not a CREATE FUNCTION ... AS 'MODULE_PATHNAME' ... LANGUAGE C\n"
	  if $text =~ /MODULE_PATHNAME|LANGUAGE\s+C\b/;
	return $text;
}

sub not_portable_body
{
	my ($head, $name, $attributes) = @_;
	$attributes =~ s/\s+LEAKPROOF\b//;
	my ($arguments) = $head =~ /\((.*)\)/s;
	my (%in, @out, $clash);
	for my $argument (split /,(?![^(]*\))/, $arguments // '')
	{
		if ($argument =~ /^\s*OUT\s+(\w+)\s+(.*?)\s*$/s)
		{
			push @out, $2;
			$clash = 1 if $in{$1};
		}
		elsif ($argument =~ /^\s*(?:IN\s+)?(\w+)\s+\S/)
		{
			$in{$1} = 1;
		}
	}
	# PL/pgSQL refuses an OUT parameter named as an IN one; SQL does not
	return "${head}LANGUAGE sql$attributes\n"
	  . ($attributes =~ /\bSET\s+search_path\b/ ? '' : "SET search_path = pg_catalog, pg_temp\n")
	  . "AS \$not_portable\$\n"
	  . "SELECT " . join(', ', map { "NULL::$_" } @out) . "\n"
	  . " WHERE idempotency.not_portable('$name')\n"
	  . "\$not_portable\$;"
	  if $clash;
	return "${head}LANGUAGE plpgsql$attributes\n"
	  . ($attributes =~ /\bSET\s+search_path\b/ ? '' : "SET search_path = pg_catalog, pg_temp\n")
	  . "AS \$not_portable\$\n"
	  . "BEGIN\n"
	  . "\tPERFORM idempotency.not_portable('$name');\n"
	  . "END\n"
	  . "\$not_portable\$;";
}

sub expand
{
	my ($file, $indent, $seen) = @_;
	die "$file includes itself\n" if $seen->{$file};
	local $seen->{$file} = 1;
	open(my $fh, '<', $file) or die "could not open \"$file\": $!\n";
	my $text = '';
	my $keep = 1;		# outside #if, or in a branch this edition keeps
	my $in_if = 0;
	while (my $line = <$fh>)
	{
		if ($line =~ /^#if\s+([\w ]+?)\s*$/)
		{
			die "$file:$.: #if inside #if\n" if $in_if;
			my %named = map { $_ => 1 } split ' ', $1;
			for (keys %named)
			{
				die "$file:$.: unknown edition \"$_\"\n" unless /^(c|portable|tle)$/;
			}
			$in_if = 1;
			$keep = $named{$edition} ? 1 : 0;
		}
		elsif ($line =~ /^#else\s*$/)
		{
			die "$file:$.: #else outside #if\n" unless $in_if;
			$keep = !$keep;
		}
		elsif ($line =~ /^#endif\s*$/)
		{
			die "$file:$.: #endif outside #if\n" unless $in_if;
			$in_if = 0;
			$keep = 1;
		}
		elsif (!$keep)
		{
			next;
		}
		elsif ($line =~ /^(\s*)#include\s+"([^"]+)"\s*$/)
		{
			my $included = "$base/$2";
			if ($edition ne 'c')
			{
				(my $portable = $included) =~ s/\.sql$/.portable.sql/;
				$included = $portable if -f $portable;
			}
			$text .= expand($included, $indent . $1, $seen);
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
	die "$file: #if without #endif\n" if $in_if;
	$text = not_portable($text, $file) if $edition ne 'c' && $file !~ /\.portable\.sql$/;
	return $text;
}

# a portable script is the install script and the update scripts that lead
# from its version to the latest, in that order, whatever order they came in;
# or one update script, alone
my ($from, $to);
if ($edition ne 'c')
{
	my ($install, %update);
	for (@sources)
	{
		if (/--([\d.]+)--([\d.]+)\.sql\.in$/) { $update{$1} = [ $_, $2 ]; }
		elsif (/--([\d.]+)\.sql\.in$/) { die "two install scripts: $install->[0], $_\n" if $install; $install = [ $_, $1 ]; }
		else { die "$_: not an install or update script\n"; }
	}
	if ($install)
	{
		@sources = ($install->[0]);
		for ($to = $install->[1]; my $next = delete $update{$to}; $to = $next->[1])
		{
			push @sources, $next->[0];
		}
		die "update scripts off the chain from $install->[1]: " . join(', ', map { $_->[0] } values %update) . "\n"
		  if %update;
	}
	else
	{
		die "an update script alone, or an install script and the updates from it\n" unless @sources == 1;
		($from) = keys %update;
		$to = $update{$from}->[1];
	}
}

# versioned DIR, VERSION: the file of DIR (VERSION.sql) of the latest version
# not after VERSION
sub versioned
{
	my ($dir, $version) = @_;
	my ($file) = sort { version_key($b) cmp version_key($a) }
	  grep { version_key($_) le version_key($version) }
	  map { m{/([\d.]+)\.sql$} ? $1 : () } glob("$dir/*.sql");
	die "$dir: no file for version $version\n" unless defined $file;
	return "$dir/$file.sql";
}

# version_key VERSION: a string that sorts as VERSION does
sub version_key
{
	return sprintf('%05d' x 2, split(/\./, $_[0]));
}

# versions TEXT: TEXT with @FROM@ and @TO@ replaced
sub versions
{
	my ($text) = @_;
	$text =~ s/\@FROM\@/$from/g if defined $from;
	$text =~ s/\@TO\@/$to/g;
	die "a version left unreplaced in the portable edition's checks\n" if $text =~ /\@(?:FROM|TO)\@/;
	return $text;
}

my $text = join('', map { expand($_, '', {}) } @sources);
if ($edition eq 'portable')
{
	$text = versions(expand(versioned("$base/checks/portable_update", $to), '', {})) . $text
	  if defined $from;
	$text .= versions(expand(versioned("$base/checks/portable_version", $to), '', {}));
}
elsif ($edition eq 'tle' && defined $from)
{
	$text = expand(versioned("$base/checks/update_defaults", $to), '', {}) . $text;
}
# the extension's update scripts from 1.2 on check the default privileges
# themselves, after the line that refuses psql (sql/checks/update_defaults)
die "$sources[0]: an update script of the extension must #include \"checks/update_defaults/VERSION.sql\"\n"
  if $edition eq 'c' && $sources[0] =~ /--[\d.]+--([\d.]+)\.sql\.in$/
  && version_key($1) ge version_key('1.2') && $text !~ /\bpg_catalog\.pg_default_acl\b/;

my $name = basename($output);
open(my $sums, '<', $released) or die "could not open \"$released\": $!\n";
while (<$sums>)
{
	next unless /^([0-9a-f]{64})\s+\*?(\S+)$/ && $2 eq $name;
	my $got = sha256_hex($text);
	die "$name is a released script, and $sources[0] now gives another text "
	  . "(SHA-256 $got, released $1): put the change in the update script "
	  . "of the version in development\n"
	  if $got ne $1;
}
close($sums);

open(my $out, '>', "$output.tmp") or die "could not write \"$output.tmp\": $!\n";
print $out $text;
close($out) or die "could not write \"$output.tmp\": $!\n";
rename("$output.tmp", $output) or die "could not rename \"$output.tmp\": $!\n";
