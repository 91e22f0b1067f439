#!/usr/bin/env bash
#
# test/indent.sh: PostgreSQL's formatting for the C sources, checked.
#
#   bash test/indent.sh           exit 1, showing the diff, if a file under
#                                 src/ is not as pg_bsd_indent formats it or
#                                 typedefs.list is not the list of our typedefs
#   bash test/indent.sh --write   reformat the files and rewrite typedefs.list
#
# pg_bsd_indent (Debian package pg-bsd-indent) runs with the options
# PostgreSQL's pgindent uses.  pgindent itself is not packaged; of its extra
# steps one matters for this code base: pg_bsd_indent pads a pointer return
# type on a function definition's own line ("char\t   *"), which is put back
# as "char *".  Typedef names: ours from typedefs.list, and every one declared
# in the server's headers, since pg_bsd_indent formats a declaration by
# whether it knows the type's name.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
write=false
[ "${1:-}" = "--write" ] && write=true

if ! command -v pg_bsd_indent >/dev/null; then
	echo "pg_bsd_indent is missing: apt-get install pg-bsd-indent" >&2
	exit 2
fi
includedir=$(pg_config --includedir-server)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# our typedefs: a typedef'd struct, enum or union ("} Name;"), function
# pointer ("(*Name)") or plain type ("typedef int Name;")
# every C source and header under src/, in a stable order
sources() {
	find "$top/src" -name '*.[ch]' | LC_ALL=C sort
}

ours() {
	cat $(sources) |
		perl -0777 -ne '
			s{/\*.*?\*/}{}gs;
			while (/\btypedef\b((?:[^;{}]|\{(?:[^{}]|\{[^{}]*\})*\})*);/g)
			{
				my $t = $1;
				if ($t =~ /\}\s*(\w+)\s*$/) { print "$1\n"; }
				elsif ($t =~ /\(\s*\*\s*(\w+)\s*\)/) { print "$1\n"; }
				elsif ($t =~ /(\w+)\s*$/) { print "$1\n"; }
			}' |
		LC_ALL=C sort -u
}
ours > "$work/typedefs.list"

status=0
if $write; then
	cp "$work/typedefs.list" "$top/typedefs.list"
elif ! diff -u "$top/typedefs.list" "$work/typedefs.list" > "$work/typedefs.diff"; then
	echo "typedefs.list is not the list of typedefs in src/ (bash test/indent.sh --write):"
	cat "$work/typedefs.diff"
	status=1
fi

# the server's typedefs, as far as a pattern finds them
grep -rhoE '^\} [A-Za-z_][A-Za-z0-9_]*;|^typedef [^;(]*[ *][A-Za-z_][A-Za-z0-9_]*;' "$includedir" |
	sed -E 's/^\} //; s/;$//; s/.*[ *]//' > "$work/server.list"
LC_ALL=C sort -u "$work/typedefs.list" "$work/server.list" > "$work/all.list"

for f in $(sources); do
	rel=${f#"$top"/}
	out="$work/$(basename "$f")"
	pg_bsd_indent -bad -bap -bbb -bc -bl -cli1 -cp33 -cdb -nce -d0 -di12 -nfc1 \
		-i4 -l79 -lp -lpl -nip -npro -sac -tpg -ts4 -U"$work/all.list" "$f" "$out"
	perl -pi -e 's/^([A-Za-z_]\w*)\t+ *\*$/$1 */' "$out"
	if cmp -s "$f" "$out"; then
		$write || echo "test indent $rel ... ok"
	elif $write; then
		cp "$out" "$f"
	else
		echo "test indent $rel ... FAILED"
		diff -u "$f" "$out" | sed "s|$work/||" || true
		status=1
	fi
done

if [ $status -ne 0 ]; then
	echo "not formatted: run bash test/indent.sh --write"
fi
exit $status
