#!/usr/bin/env bash
#
# test/dist_check.sh: `make dist` on the tree as it stands, and its archive
# checked (test/dist_check.pl, which `make dist` runs).  The tree need not be
# a git checkout, nor its changes committed: its files (those git would
# track: .gitignore applies) are committed to a throwaway repository beside
# it, and `make dist` archives that commit into a temporary directory.  Also
# checks that make dist's last line is the archive's path and that the
# archive holds every file of the tree.  `make indentcheck` runs it (the
# format suite of test/run_all.sh).
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d /tmp/idempotency-dist.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

export GIT_DIR="$tmp/git" GIT_WORK_TREE="$top"
git init -q
git add -A
git -c user.name=dist_check -c user.email=dist_check@localhost -c commit.gpgsign=false \
	commit -q -m "the tree as it stands"
git ls-files | sort >"$tmp/tree-files"

mkdir "$tmp/out"
out=$(make -s -C "$top" --no-print-directory dist DIST_DIR="$tmp/out")
echo "$out"
archive=$(tail -n 1 <<<"$out")
if [ ! -f "$archive" ] || [ "$(dirname "$archive")" != "$tmp/out" ]; then
	echo "dist_check.sh: make dist's last line is not the archive's path: $archive" >&2
	exit 1
fi

# every file of the tree is in the archive, under NAME-VERSION/
prefix=$(basename "$archive" .zip)
perl -MIO::Uncompress::Unzip=\$UnzipError -e '
	my $z = IO::Uncompress::Unzip->new($ARGV[0]) or die "$UnzipError\n";
	my $s = 1;
	while ($s > 0) { print $z->getHeaderInfo()->{Name}, "\n"; $s = $z->nextStream() }
' "$archive" | sed -n "s|^$prefix/||p" | grep -v '/$' | sort >"$tmp/archive-files"
if ! missing=$(comm -23 "$tmp/tree-files" "$tmp/archive-files") || [ -n "$missing" ]; then
	echo "dist_check.sh: files of the tree missing from $(basename "$archive"):" >&2
	echo "$missing" >&2
	exit 1
fi
echo "dist_check.sh: $(basename "$archive") holds the tree's $(wc -l <"$tmp/tree-files") files"
