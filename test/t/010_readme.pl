# The README runs verbatim: every ```sql block of README.md, in order, top to
# bottom, in one psql session on a fresh database with the default
# search_path, as a newcomer would paste them.  Also: grant_usage is described
# completely in README (Installation and Reference) and in its COMMENT.
#
# Conventions the extractor understands (README.md, "Contributing"):
# - only blocks fenced ```sql run; shell and configuration blocks use other
#   fences (```sh, ```, ```ini);
# - a statement followed by a comment "-- ERROR (SQLSTATE)", on the same line
#   or on the comment lines right below it, must fail with that SQLSTATE;
#   every other statement must succeed;
# - a ```sql block preceded (blank lines aside) by the line
#   <!-- readme-test: illustrative --> is shown but not run.
#
# psql goes on after an error and reports every statement's SQLSTATE, so a
# failure names the block, the README.md line of each statement that went
# wrong, the error and the statement.

use strict;
use warnings FATAL => 'all';

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $readme = abs_path(dirname(__FILE__) . '/../../README.md');
my $skip_marker = qr/^\s*<!--\s*readme-test:\s*illustrative\b.*-->\s*$/;

# read_blocks(PATH): the ```sql blocks, each { first => line number of its
# first SQL line, lines => [ [line number, text], ... ] }, plus the count of
# illustrative blocks left out
sub read_blocks
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "could not open $path: $!";
	my @lines = <$fh>;
	close($fh);
	s/\r?\n\z// for @lines;

	my (@blocks, $current, $fence, $fence_line, $previous);
	my $skipped = 0;
	for my $i (0 .. $#lines)
	{
		my $line = $lines[$i];
		my $number = $i + 1;
		if (!defined $fence)
		{
			# CommonMark: a backtick fence's info string has no backtick
			if ($line =~ /^\s*(`{3,})([^`]*)$/ || $line =~ /^\s*(~{3,})(.*)$/)
			{
				($fence, $fence_line) = ($1, $number);
				my ($language) = (lc $2) =~ /^\s*(\S*)/;
				my $illustrative = defined $previous && $previous =~ $skip_marker;
				if ($language eq 'sql' && !$illustrative)
				{
					$current = { first => $number + 1, lines => [] };
				}
				elsif ($language eq 'sql')
				{
					$skipped++;
				}
			}
			$previous = $line if $line =~ /\S/;
			next;
		}
		# inside a fence: it ends with the same fence character, at least as long
		my $char = substr($fence, 0, 1);
		if ($line =~ /^\s*(\Q$char\E{3,})\s*$/ && length($1) >= length($fence))
		{
			push @blocks, $current if $current;
			undef $current;
			undef $fence;
			$previous = $line;
			next;
		}
		push @{ $current->{lines} }, [ $number, $line ] if $current;
	}
	die "$path: the code block opened at line $fence_line is never closed\n"
	  if defined $fence;
	return (\@blocks, $skipped);
}

# split_statements(LINES): the statements of a block, each { line => README
# line of its first character, text => the statement, expect => SQLSTATE or
# undef }.  Knows quotes, dollar quotes, comments and psql meta-commands
# (a line starting with a backslash is one statement).
sub split_statements
{
	my ($lines) = @_;
	my @statements;
	my ($text, $start, $state, $tag, $depth) = ('', undef, 'code', '', 0);
	my $last;             # the statement that ended last
	my $after_end = 0;    # on its last line, or in the comment lines below it
	my $error_comment = qr/^--\s*ERROR\s*\(([0-9A-Z]{5})\)/;

	for my $entry (@$lines)
	{
		my ($number, $line) = @$entry;
		if ($state eq 'code' && $text eq '')
		{
			if ($line =~ /^\s*\\/)
			{
				push @statements, { line => $number, text => $line };
				($last, $after_end) = (undef, 0);
				next;
			}
			if ($line !~ /\S/)
			{
				$after_end = 0;
				next;
			}
			if ($line =~ /^\s*(--.*)$/)
			{
				$last->{expect} //= $1 if $after_end && $1 =~ $error_comment;
				next;
			}
		}
		my ($i, $len) = (0, length $line);
		while ($i < $len)
		{
			my $c = substr($line, $i, 1);
			my $two = substr($line, $i, 2);
			if ($state eq 'code')
			{
				if ($two eq '--')
				{
					my $comment = substr($line, $i);
					if ($text eq '')
					{
						$last->{expect} //= $1 if $after_end && $comment =~ $error_comment;
					}
					else
					{
						$text .= $comment;
					}
					last;
				}
				if ($c eq ';')
				{
					$last = { line => $start, text => $text . ';' };
					push @statements, $last;
					($text, $start, $after_end) = ('', undef, 1);
					$i++;
					next;
				}
				if ($c =~ /\s/)
				{
					$text .= $c if $text ne '';
					$i++;
					next;
				}
				($start, $after_end) = ($number, 0) if $text eq '';
				if ($two eq '/*')
				{
					($state, $depth) = ('block', 1);
					$text .= $two;
					$i += 2;
					next;
				}
				if ($c eq "'")
				{
					my $e = $i > 0 && substr($line, $i - 1, 1) =~ /[eE]/
					  && ($i < 2 || substr($line, $i - 2, 1) !~ /\w/);
					$state = $e ? 'estring' : 'string';
				}
				elsif ($c eq '"')
				{
					$state = 'ident';
				}
				elsif ($c eq '$' && substr($line, $i) =~ /^(\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$)/
					&& !($i > 0 && substr($line, $i - 1, 1) =~ /\w/))
				{
					($state, $tag) = ('dollar', $1);
					$text .= $tag;
					$i += length $tag;
					next;
				}
				$text .= $c;
				$i++;
				next;
			}

			# inside a string, a quoted identifier, a comment or a dollar quote
			if ($state eq 'dollar' && substr($line, $i, length $tag) eq $tag)
			{
				$text .= $tag;
				$i += length $tag;
				$state = 'code';
				next;
			}
			if ($state eq 'block' && ($two eq '*/' || $two eq '/*'))
			{
				$text .= $two;
				$i += 2;
				$depth += $two eq '/*' ? 1 : -1;
				$state = 'code' if $depth == 0;
				next;
			}
			if ($state eq 'estring' && $c eq '\\')
			{
				$text .= $two;
				$i += 2;
				next;
			}
			$text .= $c;
			$i++;
			$state = 'code'
			  if ($state eq 'string' || $state eq 'estring') && $c eq "'"
			  || $state eq 'ident' && $c eq '"';
		}
		$text .= "\n" if $text ne '';
	}
	push @statements, { line => $start, text => $text, unterminated => 1 }
	  if $text =~ /\S/;
	return \@statements;
}

my ($blocks, $skipped) = read_blocks($readme);
ok(@$blocks > 0, "README.md has sql blocks ($skipped marked illustrative)");

# one psql script that goes on after an error, reporting the SQLSTATE and
# message of every statement, so that each failure is told by its line
my $script = "\\set ON_ERROR_STOP 0\n\\set VERBOSITY default\n";
for my $block (@$blocks)
{
	$block->{statements} = split_statements($block->{lines});
	for my $s (@{ $block->{statements} })
	{
		next if $s->{unterminated};
		$script .= "$s->{text}\n";
		$script .= "\\echo README-RESULT $s->{line} :SQLSTATE :LAST_ERROR_MESSAGE\n"
		  unless $s->{text} =~ /^\s*\\/;
	}
}
$script .= "\\echo README-END\n";

my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE readme');
is($node->safe_psql('readme', 'SHOW search_path'), '"$user", public',
	'the database has the default search_path');

my ($ret, $stdout, $stderr) = $node->psql('readme', $script);
my (%result, $ended);
for my $out (split /\n/, $stdout)
{
	$result{$1} = [ $2, $3 ] if $out =~ /^README-RESULT (\d+) (\S+) ?(.*)$/;
	$ended = 1 if $out eq 'README-END';
}

for my $b (0 .. $#$blocks)
{
	my $block = $blocks->[$b];
	my $name = sprintf('README.md block %d (line %d)', $b + 1, $block->{first});
	my @problems;
	for my $s (@{ $block->{statements} })
	{
		my $statement = $s->{text} =~ s/^/    /mgr;
		if ($s->{unterminated})
		{
			push @problems, "line $s->{line}: the statement does not end with a semicolon:\n$statement";
			next;
		}
		next if $s->{text} =~ /^\s*\\/;
		my ($sqlstate, $message) = @{ $result{ $s->{line} } // [] };
		my $expected = $s->{expect} // '00000';
		if (!defined $sqlstate)
		{
			push @problems, "line $s->{line}: not run (psql ended early):\n$statement";
		}
		elsif ($sqlstate ne $expected && $expected eq '00000')
		{
			push @problems, "line $s->{line}: ERROR $sqlstate: $message\n$statement";
		}
		elsif ($sqlstate ne $expected)
		{
			my $got = $sqlstate eq '00000' ? 'it succeeded' : "it failed with $sqlstate: $message";
			push @problems, "line $s->{line}: should fail with SQLSTATE $expected"
			  . " (its \"-- ERROR ($expected)\" comment), but $got:\n$statement";
		}
	}
	my $expected_errors = grep { $_->{expect} } @{ $block->{statements} };
	ok(!@problems, "$name runs"
		  . ($expected_errors ? ", with the $expected_errors error(s) it shows" : ''))
	  or diag(join("\n", "$name:", @problems));
}
ok($ended && $ret == 0, 'psql reached the end of the README')
  or diag("psql exit code $ret, stderr:\n$stderr");

# grant_usage is described completely, and alike, in README's Installation
# section and its Reference row: each names every function and view that
# grant_usage grants, which are those idempotency.application_api lists
$node->safe_psql('readme', q{
	CREATE ROLE readme_granted;
	CREATE ROLE readme_not_granted;
	SELECT idempotency.grant_usage('readme_granted');
});
my @granted = split /\n/, $node->safe_psql('readme', q{
	SELECT p.proname FROM pg_catalog.pg_proc AS p
	 WHERE p.pronamespace = 'idempotency'::regnamespace
	   AND has_function_privilege('readme_granted', p.oid, 'EXECUTE')
	   AND NOT has_function_privilege('readme_not_granted', p.oid, 'EXECUTE')
	UNION
	SELECT c.relname FROM pg_catalog.pg_class AS c
	 WHERE c.relnamespace = 'idempotency'::regnamespace
	   AND has_table_privilege('readme_granted', c.oid, 'SELECT')
	   AND NOT has_table_privilege('readme_not_granted', c.oid, 'SELECT')
	 ORDER BY 1
});
ok(@granted > 0, 'grant_usage grants something: ' . join(', ', @granted));

# the list grant_usage grants from is exactly what it grants
is(join(', ', @granted),
	$node->safe_psql('readme', q{SELECT string_agg(object_name, ', ' ORDER BY object_name COLLATE "C")
								  FROM idempotency.application_api}),
	'idempotency.application_api lists what grant_usage grants');
open(my $fh, '<', $readme) or die "could not open $readme: $!";
my $text = do { local $/; <$fh> };
close($fh);
my ($installation) = $text =~ /^## Installation\n(.*?)^## /ms;
my ($paragraph) = grep { /`grant_usage\(role\)`/ } split /\n\s*\n/, $installation // '';
my ($row) = $text =~ /^(\|\s*`grant_usage\(.*)$/m;
my %descriptions = (
	'README.md, Installation' => $paragraph,
	'README.md, Reference' => $row);
for my $where (sort keys %descriptions)
{
	my $description = $descriptions{$where};
	if (!defined $description)
	{
		fail("$where describes grant_usage");
		diag("no description found: the Installation paragraph mentions `grant_usage(role)`,"
			  . " the Reference row starts with | `grant_usage(");
		next;
	}
	my @missing = grep { $description !~ /`\Q$_\E`/ } @granted;
	ok(!@missing, "$where names everything grant_usage grants")
	  or diag("$where does not name: " . join(', ', @missing));
}

$node->stop;
done_testing();
