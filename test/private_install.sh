#!/usr/bin/env bash
#
# test/private_install.sh DIR [PG_CONFIG]: a private copy of a PostgreSQL
# installation under DIR that a contributor without root can install the
# extension into and test against.  The server's binaries are copied (they
# find their libraries and share files relative to their own location);
# everything else is linked, except the extension's own files.  Prints the
# pg_config of the copy.  Then, as that user:
#
#   pgc=$(bash test/private_install.sh ~/pg-copy)
#   make PG_CONFIG=$pgc install
#   PATH=$(dirname $pgc):$PATH make PG_CONFIG=$pgc installcheck    # pg_regress, isolation, TAP
#   PATH=$(dirname $pgc):$PATH make PG_CONFIG=$pgc pgtapcheck
#
# Several checkouts can each have their own copy.  Run it again after
# installing other extensions (Citus, pgTAP) into the original: it links
# what is new.
#
set -euo pipefail
dir=${1:?usage: private_install.sh DIR [PG_CONFIG]}
pg_config=${2:-pg_config}
bindir=$("$pg_config" --bindir)
pkglibdir=$("$pg_config" --pkglibdir)
sharedir=$("$pg_config" --sharedir)
includedir=$("$pg_config" --includedir)

mkdir -p "$dir$bindir" "$dir$pkglibdir" "$dir$sharedir/extension" "$(dirname "$dir$includedir")"
[ -x "$dir$bindir/postgres" ] || cp -a "$bindir"/. "$dir$bindir"/
# link_missing SRC DEST: link each entry of SRC into DEST, but ours
link_missing() {
	local f
	for f in "$1"/*; do
		case "$(basename "$f")" in
			idempotency*) ;;
			*) [ -e "$2/$(basename "$f")" ] || ln -s "$f" "$2/" ;;
		esac
	done
}
# the JIT's bitcode is a directory of its own, where the extension's goes
if [ -d "$pkglibdir/bitcode" ]; then
	[ -L "$dir$pkglibdir/bitcode" ] && rm "$dir$pkglibdir/bitcode"
	mkdir -p "$dir$pkglibdir/bitcode"
	link_missing "$pkglibdir/bitcode" "$dir$pkglibdir/bitcode"
fi
link_missing "$pkglibdir" "$dir$pkglibdir"
link_missing "$sharedir/extension" "$dir$sharedir/extension"
for f in "$sharedir"/*; do
	[ "$(basename "$f")" = extension ] || [ -e "$dir$sharedir/$(basename "$f")" ] || ln -s "$f" "$dir$sharedir/"
done
[ -e "$dir$includedir" ] || ln -s "$includedir" "$dir$includedir"
echo "$dir$bindir/pg_config"
