#!/usr/bin/env perl
#
# test/dist_check.pl ARCHIVE [VERSION]: checks a distribution archive as
# PGXN would take it (`make dist` runs it on the archive it made;
# test/dist_check.sh on one of the tree as it stands).  Perl core modules
# only: `pgxn check` needs the network, and Debian's pgxnclient parses
# META.json without validating it.
#
# What it checks:
#   - the archive is a zip whose every entry lies under NAME-VERSION/, and
#     its file is named NAME-VERSION.zip;
#   - NAME-VERSION/META.json follows the PGXN Meta Spec 1.0.0: the required
#     keys (name, abstract, version, maintainer, license, provides,
#     meta-spec) with their types, a semantic version wherever the spec asks
#     for one (version, each provides' version, prereqs), known license and
#     release_status values, and meta-spec.version 1.0.0;
#   - every provides' file and docfile, and every other file META.json
#     names, is in the archive;
#   - the archive's version is the one version: NAME and VERSION of the
#     prefix are META.json's name and version, VERSION if given, and the
#     archive's own control file's default_version X.Y gives X.Y.0.
#
# Prints one line on success; on failure every problem, and exits 1.
#
use strict;
use warnings;
use File::Basename qw(basename);
use IO::Uncompress::Unzip qw($UnzipError);
use JSON::PP;

my ($archive, $expected) = @ARGV;
die "usage: dist_check.pl ARCHIVE [VERSION]\n" unless defined $archive;

my @problems;
sub problem { push @problems, join('', @_) }

# the archive's entries, and the text of the few files read here
my (%entries, %content);
{
	my $z = IO::Uncompress::Unzip->new($archive)
	  or die "dist_check.pl: $archive: cannot read the zip: $UnzipError\n";
	my $status = 1;
	while ($status > 0)
	{
		my $name = $z->getHeaderInfo()->{Name};
		$entries{$name} = 1;
		if ($name =~ m{\A[^/]+/(?:META\.json|[^/]+\.control)\z})
		{
			local $/;
			my $data = '';
			my $buf;
			$data .= $buf while $z->read($buf) > 0;
			$content{$name} = $data;
		}
		$status = $z->nextStream();
	}
	die "dist_check.pl: $archive: $UnzipError\n" if $status < 0;
	$z->close();
}

# one top directory, NAME-VERSION/
my %tops = map { m{\A([^/]*)(?:/|\z)}; ($1 => 1) } keys %entries;
my @tops = sort keys %tops;
die "dist_check.pl: $archive: the entries lie under " . scalar(@tops)
  . " top directories (@tops), not one NAME-VERSION/\n"
  unless @tops == 1 && grep { m{\A\Q$tops[0]\E/} } keys %entries;
my $prefix = $tops[0];
my ($pname, $pversion) = $prefix =~ /\A(.+)-([^-]+)\z/
  or die "dist_check.pl: $archive: the top directory $prefix is not NAME-VERSION\n";
problem("the archive's file is ", basename($archive), ", not $prefix.zip")
  unless basename($archive) eq "$prefix.zip";

my $metaname = "$prefix/META.json";
die "dist_check.pl: $archive: no $metaname\n" unless exists $content{$metaname};
my $meta = eval { JSON::PP->new->utf8->decode($content{$metaname}) };
die "dist_check.pl: $metaname does not parse as JSON: $@" unless defined $meta;
die "dist_check.pl: $metaname is not a JSON object\n" unless ref $meta eq 'HASH';

# the types of the Meta Spec
my $semver = qr/\A(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)(?:-?[A-Za-z][0-9A-Za-z-]*)?\z/;
sub is_string { my ($v) = @_; defined $v && !ref $v && length $v }
sub is_term
{
	my ($v) = @_;
	is_string($v) && length($v) >= 2 && $v !~ m{[/\\:\s[:cntrl:]]};
}
sub is_bool { JSON::PP::is_bool($_[0]) }
sub is_list_of_strings
{
	my ($v) = @_;
	ref $v eq 'ARRAY' && @$v && !grep { !is_string($_) } @$v;
}
my %licenses = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1
  artistic_2 bsd freebsd gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1
  lgpl_3_0 mit mozilla_1_0 mozilla_1_1 openssl perl_5 postgresql qpl_1_0
  ssleay sun zlib open_source restricted unrestricted unknown);
# a prereq's version: 0 (any), a version, or a range of comparisons
my $cmp = qr/(?:(?:[<>]=?|[!=]=)\s*)?(?:0|(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)(?:-?[A-Za-z][0-9A-Za-z-]*)?)/;
my $range = qr/\A\s*$cmp(?:\s*,\s*$cmp)*\s*\z/;

for my $key (qw(name abstract version maintainer license provides meta-spec))
{
	problem("META.json: the required key \"$key\" is missing")
	  unless exists $meta->{$key};
}
problem("META.json: name \"", $meta->{name} // '', "\" is not a term of two or more characters without slashes, colons or spaces")
  if exists $meta->{name} && !is_term($meta->{name});
problem("META.json: abstract is not a non-empty string")
  if exists $meta->{abstract} && !is_string($meta->{abstract});
problem("META.json: version \"", $meta->{version} // '', "\" is not a semantic version")
  if exists $meta->{version} && !(is_string($meta->{version}) && $meta->{version} =~ $semver);
problem("META.json: maintainer is neither a string nor a list of strings")
  if exists $meta->{maintainer}
  && !(is_string($meta->{maintainer}) || is_list_of_strings($meta->{maintainer}));
if (exists $meta->{license})
{
	my $l = $meta->{license};
	if (is_string($l))
	{
		problem("META.json: license \"$l\" is not one the spec knows") unless $licenses{$l};
	}
	elsif (ref $l eq 'ARRAY')
	{
		problem("META.json: license list is empty") unless @$l;
		$licenses{ $_ // '' } or problem("META.json: license \"", $_ // '', "\" is not one the spec knows")
		  for @$l;
	}
	elsif (ref $l eq 'HASH')
	{
		problem("META.json: license object is empty") unless %$l;
		is_string($l->{$_}) or problem("META.json: license \"$_\" has no URL") for keys %$l;
	}
	else
	{
		problem("META.json: license is neither a string, a list nor an object");
	}
}
if (exists $meta->{'meta-spec'})
{
	my $ms = $meta->{'meta-spec'};
	if (ref $ms ne 'HASH')
	{
		problem("META.json: meta-spec is not an object");
	}
	else
	{
		problem("META.json: meta-spec.version is \"", $ms->{version} // '', "\", not \"1.0.0\"")
		  unless ($ms->{version} // '') eq '1.0.0';
		problem("META.json: meta-spec.url is not a string")
		  if exists $ms->{url} && !is_string($ms->{url});
	}
}

# provides: each extension's file, version, and the optional keys' types
my @files;    # what META.json says is in the archive: [where, path]
if (exists $meta->{provides})
{
	my $p = $meta->{provides};
	if (ref $p ne 'HASH' || !%$p)
	{
		problem("META.json: provides is not an object naming at least one extension");
	}
	else
	{
		for my $ext (sort keys %$p)
		{
			my $e = $p->{$ext};
			problem("META.json: provides key \"$ext\" is not a term") unless is_term($ext);
			if (ref $e ne 'HASH')
			{
				problem("META.json: provides.$ext is not an object");
				next;
			}
			for my $key (qw(file version))
			{
				problem("META.json: provides.$ext has no \"$key\"") unless exists $e->{$key};
			}
			problem("META.json: provides.$ext.version \"", $e->{version} // '', "\" is not a semantic version")
			  if exists $e->{version} && !(is_string($e->{version}) && $e->{version} =~ $semver);
			for my $key (qw(file docfile))
			{
				next unless exists $e->{$key};
				if (is_string($e->{$key}))
				{
					push @files, ["provides.$ext.$key", $e->{$key}];
				}
				else
				{
					problem("META.json: provides.$ext.$key is not a path");
				}
			}
			problem("META.json: provides.$ext.abstract is not a string")
			  if exists $e->{abstract} && !is_string($e->{abstract});
			problem("META.json: provides.$ext.unlisted is not a boolean")
			  if exists $e->{unlisted} && !is_bool($e->{unlisted});
			for my $key (sort keys %$e)
			{
				problem("META.json: provides.$ext has the unknown key \"$key\"")
				  unless $key =~ /\A(?:file|version|abstract|docfile|unlisted|[xX]_.+)\z/;
			}
		}
	}
}

# the optional keys this archive uses
problem("META.json: description is not a string")
  if exists $meta->{description} && !is_string($meta->{description});
problem("META.json: generated_by is not a string")
  if exists $meta->{generated_by} && !is_string($meta->{generated_by});
problem("META.json: tags is not a list of strings")
  if exists $meta->{tags} && !is_list_of_strings($meta->{tags});
problem("META.json: release_status is \"", $meta->{release_status} // '', "\", not stable, testing or unstable")
  if exists $meta->{release_status}
  && !grep { ($meta->{release_status} // '') eq $_ } qw(stable testing unstable);
if (exists $meta->{prereqs})
{
	my $pr = $meta->{prereqs};
	if (ref $pr ne 'HASH')
	{
		problem("META.json: prereqs is not an object");
	}
	else
	{
		for my $phase (sort keys %$pr)
		{
			problem("META.json: prereqs has the unknown phase \"$phase\"")
			  unless $phase =~ /\A(?:configure|build|test|runtime|develop)\z/;
			my $rels = $pr->{$phase};
			if (ref $rels ne 'HASH')
			{
				problem("META.json: prereqs.$phase is not an object");
				next;
			}
			for my $rel (sort keys %$rels)
			{
				problem("META.json: prereqs.$phase has the unknown relation \"$rel\"")
				  unless $rel =~ /\A(?:requires|recommends|suggests|conflicts)\z/;
				my $deps = $rels->{$rel};
				if (ref $deps ne 'HASH')
				{
					problem("META.json: prereqs.$phase.$rel is not an object");
					next;
				}
				for my $dep (sort keys %$deps)
				{
					my $v = $deps->{$dep};
					problem("META.json: prereqs.$phase.$rel.$dep \"", $v // '', "\" is not a version or range")
					  unless defined $v && !ref $v && ($v =~ $range || $v =~ /\A[0-9]+\z/);
				}
			}
		}
	}
}

# every file META.json names is in the archive
for my $f (@files)
{
	my ($where, $path) = @$f;
	problem("META.json: $where \"$path\" is not in the archive ($prefix/$path)")
	  unless $entries{"$prefix/$path"};
}

# one version: the prefix, META.json, the caller's, the control file's
my $name = $meta->{name} // '';
my $version = $meta->{version} // '';
problem("the archive's top directory is $prefix, META.json makes it $name-$version")
  unless $pname eq $name && $pversion eq $version;
problem("META.json: version is \"$version\", the release is \"$expected\"")
  if defined $expected && $version ne $expected;
for my $ext (sort keys %{ ref $meta->{provides} eq 'HASH' ? $meta->{provides} : {} })
{
	my $e = $meta->{provides}{$ext};
	next unless ref $e eq 'HASH' && defined $e->{version};
	problem("META.json: provides.$ext.version is \"$e->{version}\", not the distribution's \"$version\"")
	  unless $e->{version} eq $version;
	my $control = "$prefix/$ext.control";
	if (!exists $content{$control})
	{
		problem("the archive has no $ext.control for the extension provides.$ext");
		next;
	}
	my ($dv) = $content{$control} =~ /^\s*default_version\s*=\s*'([^']*)'/m;
	problem("$ext.control: default_version '", $dv // '', "' does not make the release $version (X.Y makes X.Y.0)")
	  unless defined $dv && "$dv.0" eq $version;
}

if (@problems)
{
	print STDERR "dist_check.pl: $archive:\n";
	print STDERR "  $_\n" for @problems;
	exit 1;
}
printf "dist_check.pl: %s: %s %s, %d entries under %s/, META.json valid (PGXN Meta Spec 1.0.0)\n",
  basename($archive), $name, $version, scalar(keys %entries), $prefix;
