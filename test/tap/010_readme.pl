# The documentation runs verbatim: every ```sql block of README.md and of
# every Markdown page under doc/, in order, top to bottom, one page at a time,
# in one psql session on a fresh database with the default search_path, as a
# newcomer would paste them.  README.md starts from an empty database; a page
# under doc/ from one where CREATE EXTENSION idempotency has run.  Roles a
# page creates are dropped after it, and ALTER SYSTEM settings it makes are
# reset, so every page starts alike.
#
# Also, what the pages must name, checked against the catalog and the code:
# - grant_usage: README's Installation section and
#   doc/reference/grant_usage.md each name every function and view it grants,
#   which idempotency.application_api lists;
# - doc/reference/: one page per function of the API (the list below says
#   which functions are internal and why);
# - doc/settings.md: every idempotency.* setting;
# - doc/views.md: every view of the extension;
# - doc/errors.md: every SQLSTATE that src/ raises (errcode() in the C code,
#   custom codes, RAISE ... USING ERRCODE in the install scripts) and every
#   SQLSTATE test/regress/sql/error_contexts.sql expects; and every SQLSTATE that a
#   reference page names;
# - every relative link between the pages (and in BENCHMARKS.md) leads to a
#   file that exists, and an #anchor to a heading of that page.
#
# Conventions the extractor understands (doc/contributing.md, "The
# documentation is a test"):
# - only blocks fenced ```sql run; shell and configuration blocks use other
#   fences (```sh, ```, ```ini);
# - a statement followed by a comment "-- ERROR (SQLSTATE)", on the same line
#   or on the comment lines right below it, must fail with that SQLSTATE;
#   every other statement must succeed;
# - a ```sql block preceded (blank lines aside) by the line
#   <!-- readme-test: illustrative --> is shown but not run.
#
# psql goes on after an error and reports every statement's SQLSTATE, so a
# failure names the page, the block, the line of each statement that went
# wrong, the error and the statement.

use strict;
use warnings FATAL => 'all';

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Find;
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $top = abs_path(dirname(__FILE__) . '/../..');
my $readme = "$top/README.md";
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

# split_statements(LINES): the statements of a block, each { line => the
# page's line of its first character, text => the statement, expect =>
# SQLSTATE or undef }.  Knows quotes, dollar quotes, comments and psql
# meta-commands (a line starting with a backslash is one statement).
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


# the pages: README.md first, then every Markdown file under doc/, sorted
my @pages = ('README.md');
find(
	{
		no_chdir => 1,
		wanted => sub {
			push @pages, substr($File::Find::name, length("$top/")) if /\.md\z/ && -f $_;
		}
	},
	"$top/doc") if -d "$top/doc";
@pages = ($pages[0], sort @pages[ 1 .. $#pages ]);
ok(grep({ m{^doc/} } @pages) > 0, 'doc/ has pages: ' . (@pages - 1));

my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;
# the pages under doc/ start from a copy of this database, which the
# background cleanup never visits (it is a template that takes no connections)
$node->safe_psql('postgres', 'CREATE DATABASE doc_template');
$node->safe_psql('doc_template', 'CREATE EXTENSION idempotency');
$node->safe_psql('postgres',
	'ALTER DATABASE doc_template WITH IS_TEMPLATE true ALLOW_CONNECTIONS false');
my $roles_before = $node->safe_psql('postgres',
	'SELECT string_agg(quote_literal(rolname), \',\') FROM pg_roles');

# run_page(PAGE, NUMBER): every sql block of PAGE in a database of its own
sub run_page
{
	my ($page, $number) = @_;
	my ($blocks, $skipped) = read_blocks("$top/$page");
	note("$page: " . @$blocks . " sql blocks, $skipped marked illustrative");
	return unless @$blocks;

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

	# README.md starts from nothing, as a newcomer does; the pages under doc/
	# start in a database that has the extension (doc/README.md says so)
	my $db = "doc_$number";
	$node->safe_psql('postgres',
		"CREATE DATABASE $db" . ($page =~ m{^doc/} ? ' TEMPLATE doc_template' : ''));
	is($node->safe_psql($db, 'SHOW search_path'), '"$user", public',
		"$page: the database has the default search_path")
	  if $number <= 1;

	my ($ret, $stdout, $stderr) = $node->psql($db, $script);
	my (%result, $ended);
	for my $out (split /\n/, $stdout)
	{
		$result{$1} = [ $2, $3 ] if $out =~ /^README-RESULT (\d+) (\S+) ?(.*)$/;
		$ended = 1 if $out eq 'README-END';
	}

	for my $b (0 .. $#$blocks)
	{
		my $block = $blocks->[$b];
		my $name = sprintf('%s block %d (line %d)', $page, $b + 1, $block->{first});
		my @problems;
		for my $s (@{ $block->{statements} })
		{
			my $statement = $s->{text} =~ s/^/    /mgr;
			if ($s->{unterminated})
			{
				push @problems,
				  "line $s->{line}: the statement does not end with a semicolon:\n$statement";
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
				my $got =
				  $sqlstate eq '00000' ? 'it succeeded' : "it failed with $sqlstate: $message";
				push @problems, "line $s->{line}: should fail with SQLSTATE $expected"
				  . " (its \"-- ERROR ($expected)\" comment), but $got:\n$statement";
			}
		}
		my $expected_errors = grep { $_->{expect} } @{ $block->{statements} };
		ok(!@problems,
			"$name runs"
			  . ($expected_errors ? ", with the $expected_errors error(s) it shows" : ''))
		  or diag(join("\n", "$name:", @problems));
	}
	ok($ended && $ret == 0, "psql reached the end of $page")
	  or diag("psql exit code $ret, stderr:\n$stderr");

	# the next page starts alike: no database, role or setting of this one
	# (one psql session, each statement in a transaction of its own)
	$node->safe_psql('postgres', qq{
		DROP DATABASE $db WITH (FORCE);
		DO \$\$
		DECLARE
			r name;
		BEGIN
			FOR r IN SELECT rolname FROM pg_roles
					  WHERE rolname <> ALL (ARRAY[$roles_before]::name[]) LOOP
				EXECUTE format('DROP ROLE %I', r);
			END LOOP;
		END \$\$;
		ALTER SYSTEM RESET ALL;
		SELECT pg_reload_conf();
	});
}

run_page($pages[$_], $_) for 0 .. $#pages;

# what the pages must name is checked in a database of its own
$node->safe_psql('postgres', 'CREATE DATABASE doc_names');
$node->safe_psql('doc_names', 'CREATE EXTENSION idempotency');

# read_page(PAGE): its text, or undef if there is no such page
sub read_page
{
	my ($page) = @_;
	open(my $fh, '<', "$top/$page") or return undef;
	my $text = do { local $/; <$fh> };
	close($fh);
	return $text;
}

# grant_usage is described completely, and alike, in README's Installation
# section and its reference page: each names every function and view that
# grant_usage grants, which are those idempotency.application_api lists
$node->safe_psql('doc_names', q{
	CREATE ROLE readme_granted;
	CREATE ROLE readme_not_granted;
	SELECT idempotency.grant_usage('readme_granted');
});
my @granted = split /\n/, $node->safe_psql('doc_names', q{
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
	$node->safe_psql('doc_names', q{SELECT string_agg(object_name, ', ' ORDER BY object_name COLLATE "C")
								  FROM idempotency.application_api}),
	'idempotency.application_api lists what grant_usage grants');
my $text = read_page('README.md');
my ($installation) = $text =~ /^## Install[^\n]*\n(.*?)^## /ms;
my ($paragraph) = grep { /`grant_usage\(role\)`/ } split /\n\s*\n/, $installation // '';
my $reference = read_page('doc/reference/grant_usage.md');
my ($grants) = ($reference // '') =~ /^## What it grants\n(.*?)(?=^## |\z)/ms;
my %descriptions = (
	'README.md, Installation' => $paragraph,
	'doc/reference/grant_usage.md, "What it grants"' => $grants);
for my $where (sort keys %descriptions)
{
	my $description = $descriptions{$where};
	if (!defined $description)
	{
		fail("$where describes grant_usage");
		diag("no description found: README's Installation paragraph mentions"
			  . " `grant_usage(role)`, the reference page has a section \"## What it grants\"");
		next;
	}
	my @missing = grep { $description !~ /`\Q$_\E`/ } @granted;
	ok(!@missing, "$where names everything grant_usage grants")
	  or diag("$where does not name: " . join(', ', @missing));
}

# one reference page per function of the API; these are not called by name
# by an application or an administrator
my %internal = (
	map({ $_ => 'the key type: its I/O, casts and operators' }
		qw(key_in key_out key_recv key_send key text), grep { $_ }
		  split /\n/, $node->safe_psql('doc_names', q{
			SELECT DISTINCT p.proname FROM pg_proc AS p
			  JOIN pg_depend AS d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
			 WHERE p.pronamespace = 'idempotency'::regnamespace
			   AND (EXISTS (SELECT FROM pg_operator AS o WHERE o.oprcode = p.oid)
				 OR EXISTS (SELECT FROM pg_amproc AS a WHERE a.amproc = p.oid))})),
	state_machines_changed => 'the trigger on state_machines',
	check_new_triggers => 'the event trigger',
	cleanup_status => 'behind the cleanup_status view (doc/views.md)',
	stats => 'behind the stats view (doc/views.md)',
	metrics => 'behind the metrics view (doc/views.md)',
	citus_my_records => 'behind my_records under Citus (doc/scaling-out.md)',
	citus_my_tokens => 'behind my_tokens under Citus (doc/scaling-out.md)',
	citus_my_outbox => 'behind my_outbox under Citus (doc/scaling-out.md)',
	citus_require_coordinator => 'a check inside citus_setup',
	carry_privileges => 'for update scripts (doc/contributing.md)',
	(map { $_ => 'what the API hands its calls to on Citus (doc/scaling-out-single-shard.md)' }
		qw(citus_idempotent_begin citus_idempotent_finish citus_idempotent_abandon citus_lookup
		   citus_idempotent_checkpoint citus_idempotent_renew)),
	extend_usage => 'for update scripts (doc/contributing.md)');
my @functions = split /\n/, $node->safe_psql('doc_names', q{
	SELECT DISTINCT p.proname FROM pg_proc AS p
	 WHERE p.pronamespace = 'idempotency'::regnamespace ORDER BY 1});
my @unpaged = grep { !$internal{$_} && !-f "$top/doc/reference/$_.md" } @functions;
ok(!@unpaged, 'every function of the API has its page in doc/reference')
  or diag('no doc/reference/<name>.md for: ' . join(', ', @unpaged));
my $index = read_page('doc/README.md') // '';
my @unlisted = grep { !$internal{$_} && $index !~ m{\(reference/\Q$_\E\.md\)} } @functions;
ok(!@unlisted, 'doc/README.md links every reference page')
  or diag('doc/README.md does not link: ' . join(', ', @unlisted));

# every setting in doc/settings.md
my $settings = read_page('doc/settings.md') // '';
my @unnamed = grep { $settings !~ /`\Q$_\E`/ } split /\n/, $node->safe_psql('doc_names',
	q{SELECT name FROM pg_settings WHERE name LIKE 'idempotency.%' ORDER BY 1});
ok(!@unnamed, 'doc/settings.md names every setting')
  or diag('doc/settings.md does not name: ' . join(', ', @unnamed));

# every view in doc/views.md
my $views = read_page('doc/views.md') // '';
@unnamed = grep { $views !~ /`idempotency\.\Q$_\E`/ } split /\n/, $node->safe_psql('doc_names',
	q{SELECT relname FROM pg_class WHERE relnamespace = 'idempotency'::regnamespace
	  AND relkind = 'v' ORDER BY 1});
ok(!@unnamed, 'doc/views.md names every view')
  or diag('doc/views.md does not name: ' . join(', ', @unnamed));

# every SQLSTATE the code raises, in doc/errors.md: errcode(ERRCODE_...) in
# src/ (PostgreSQL's codes from errcodes.h, ours from src/base/idempotency.h),
# RAISE ... USING ERRCODE = 'condition' in the install scripts, and what
# test/regress/sql/error_contexts.sql expects (errors of PostgreSQL's own that reach a
# caller: timeouts, privileges)
my %sqlstate;    # ERRCODE_ name => SQLSTATE
my ($includedir) = $node->config_data('--includedir-server');
for my $header ("$includedir/utils/errcodes.h", "$top/src/base/idempotency.h")
{
	# a server installed without its development files has no errcodes.h
	open(my $fh, '<', $header) or next;
	while (<$fh>)
	{
		next unless /^#define\s+(ERRCODE_\w+)\s+MAKE_SQLSTATE\(([^)]*)\)/;
		my ($errcode, $characters) = ($1, $2);
		$sqlstate{$errcode} = join('', $characters =~ /'(.)'/g);
	}
	close($fh);
}

my %raised;      # SQLSTATE => where
for my $file (glob("$top/src/*.c"), glob("$top/src/*/*.c"), glob("$top/sql/*.sql.in"),
	glob("$top/sql/functions/*/*.sql"), glob("$top/sql/views/*/*.sql"), glob("$top/sql/checks/*/*.sql"),
	"$top/test/regress/sql/error_contexts.sql")
{
	my $code = read_page(substr($file, length("$top/")));
	my $name = substr($file, length("$top/"));
	if ($file =~ /\.c\z/)
	{
		while ($code =~ /\berrcode\(((?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)/g)
		{
			my $argument = $1;
			for my $errcode ($argument =~ /\b(ERRCODE_\w+)/g)
			{
				$raised{ $sqlstate{$errcode} // "$errcode (not in errcodes.h)" } //= $name;
			}
		}
	}
	elsif ($name eq 'test/regress/sql/error_contexts.sql')
	{
		$raised{$1} //= $name while $code =~ /'([0-9A-Z]{5})'\),?\s*$/mg;
	}
	else
	{
		while ($code =~ /\bERRCODE\s*=\s*'(\w+)'/g)
		{
			# a SQLSTATE written as one (IK007), or a condition's name
			my $given = $1;
			if ($given =~ /^[0-9A-Z]{5}\z/)
			{
				$raised{$given} //= $name;
				next;
			}
			my $errcode = 'ERRCODE_' . uc $given;
			$raised{ $sqlstate{$errcode} // "$errcode (not in errcodes.h)" } //= $name;
		}
	}
}
my $errors = read_page('doc/errors.md') // '';
SKIP:
{
	skip "$includedir/utils/errcodes.h is not installed (the server's development files)", 1
	  unless -e "$includedir/utils/errcodes.h";
	my @undocumented = grep { $errors !~ /`\Q$_\E`/ } sort keys %raised;
	ok(keys %raised > 20 && !@undocumented,
		'doc/errors.md names every SQLSTATE raised (' . scalar(keys %raised) . ')')
	  or diag('doc/errors.md does not name: '
		  . join(', ', map { "$_ (raised in $raised{$_})" } @undocumented));
}

# every SQLSTATE a reference page names is explained in doc/errors.md
my @stray;
for my $page (grep { m{^doc/reference/} } @pages)
{
	my $content = read_page($page);
	for my $code ($content =~ /`([0-9A-Z]{5})`/g)
	{
		push @stray, "$code ($page)" if $code =~ /\d/ && $errors !~ /`\Q$code\E`/;
	}
}
ok(!@stray, 'every SQLSTATE of a reference page is in doc/errors.md')
  or diag('not in doc/errors.md: ' . join(', ', @stray));

# relative links lead to files that exist, and an #anchor to a heading of
# the page it names (the anchor as GitHub makes it: lower case, punctuation
# dropped, spaces as hyphens)
sub anchors
{
	my ($path) = @_;
	my $content = read_page($path) // '';
	$content =~ s/^```.*?^```//msg;
	my %anchors;
	for my $heading ($content =~ /^#+\s+(.*?)\s*$/mg)
	{
		my $anchor = lc $heading;
		$anchor =~ s/[^\w\- ]//g;
		$anchor =~ s/ /-/g;
		$anchors{$anchor} = 1;
	}
	return \%anchors;
}
my @broken;
for my $page (@pages, 'BENCHMARKS.md')
{
	my $content = read_page($page);
	my $dir = dirname($page);
	while ($content =~ /\]\(([^)\s]+)\)/g)
	{
		my $link = $1;
		next if $link =~ m{^[a-z]+:};
		my ($file, $anchor) = $link =~ /^([^#]*)(?:#(.*))?$/;
		my $target = $file eq '' ? $page : File::Spec->canonpath("$dir/$file");
		1 while $target =~ s{(^|/)(?!\.\./)[^/]+/\.\./}{$1};
		if (!-e "$top/$target")
		{
			push @broken, "$page: $link (no such file)";
		}
		elsif (defined $anchor && $target =~ /\.md\z/ && !anchors($target)->{$anchor})
		{
			push @broken, "$page: $link (no such heading)";
		}
	}
}
ok(!@broken, 'every relative link between the pages leads to a file, and an anchor to a heading')
  or diag("broken links:\n" . join("\n", @broken));

$node->stop;
done_testing();
