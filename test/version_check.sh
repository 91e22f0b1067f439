#!/usr/bin/env bash
#
# test/version_check.sh: the release's version is written once, as
# default_version in idempotency.control (the SQL objects' version, X.Y;
# the release is X.Y.0).  The Makefile reads it from there (EXTVERSION,
# DISTVERSION) and builds the library with it; this script fails if any
# other place that names the version says something else:
#
#   META.json            "version" and every "provides" version: X.Y.0
#   debian/changelog     the newest entry: X.Y.0-N
#   CHANGELOG.md         the newest "## " heading: X.Y.0, "(unreleased)" or not
#   src/**/*.h           a literal IDEMPOTENCY_LIBRARY_VERSION, if one is left: "X.Y"
#
# `make indentcheck` runs it (the format suite of test/run_all.sh).
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"

failed=0
fail() {
	echo "version_check.sh: $*" >&2
	failed=1
}

sqlversion=$(sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" idempotency.control)
if ! [[ $sqlversion =~ ^[0-9]+\.[0-9]+$ ]]; then
	echo "version_check.sh: idempotency.control: default_version '$sqlversion' is not X.Y" >&2
	exit 1
fi
release=$sqlversion.0

# META.json: the distribution's version and each extension's
meta=$(perl -MJSON::PP -e '
	local $/;
	open(my $fh, "<", "META.json") or die "META.json: $!\n";
	my $m = JSON::PP->new->decode(<$fh>);
	print "version $m->{version}\n";
	print "provides.$_ $m->{provides}{$_}{version}\n" for sort keys %{ $m->{provides} || {} };
') || fail "META.json does not parse"
while read -r what version; do
	[ "$version" = "$release" ] || fail "META.json: $what is \"$version\", the control file's default_version '$sqlversion' makes it \"$release\""
done <<<"$meta"
grep -q '^provides\.' <<<"$meta" || fail "META.json provides no extension"

# debian/changelog: the newest entry
deb=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' debian/changelog)
[[ $deb =~ ^${release//./\\.}-[0-9]+$ ]] ||
	fail "debian/changelog: the newest entry is $deb, not $release-N"

# CHANGELOG.md: the newest release's heading
heading=$(grep -m 1 '^## ' CHANGELOG.md || true)
[[ $heading =~ ^"## ${release}"( |$) ]] ||
	fail "CHANGELOG.md: the newest heading is \"$heading\", not \"## $release\""

# a literal library version left in a header must agree (the Makefile
# defines it; a header that defines it too must say the same)
while IFS=: read -r file line text; do
	literal=$(sed -n 's/.*IDEMPOTENCY_LIBRARY_VERSION *"\([^"]*\)".*/\1/p' <<<"$text")
	[ "$literal" = "$sqlversion" ] ||
		fail "$file:$line: IDEMPOTENCY_LIBRARY_VERSION is \"$literal\", not \"$sqlversion\""
done < <(grep -rn --include='*.h' '^#define IDEMPOTENCY_LIBRARY_VERSION ' src || true)

if [ "$failed" -ne 0 ]; then
	echo "version_check.sh: the version is written in idempotency.control (default_version); make the others follow it" >&2
	exit 1
fi
echo "version_check.sh: $release everywhere (default_version '$sqlversion')"
