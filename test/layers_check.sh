#!/usr/bin/env bash
#
# test/layers_check.sh: the C sources keep the order of floors that
# doc/contributing.md ("Code layout") describes.  A file in src/FOLDER may
# include the headers of its own folder and of the folders below it in
# $floors, never one above; the files at the top of src/ (the module's
# entry and the invalidation entry point) may include any.  And no circle:
# a module (a .c file with its header) that needs another, through the
# includes of either, must not be needed by it in turn, within a folder as
# well.  Exit 1, naming what is wrong, otherwise.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top/src"

# lowest first
floors=(base objects frame key distributed messages registry machines expiry admin)

floor_of() {
	local i
	for i in "${!floors[@]}"; do
		[ "${floors[$i]}" = "$1" ] && { echo "$i"; return; }
	done
	echo -1
}

status=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
for f in $(find . -name '*.[ch]' | sed 's|^\./||' | sort); do
	case "$f" in
		*/*) folder=${f%%/*} ;;
		*) folder= ;;
	esac
	if [ -n "$folder" ] && [ "$(floor_of "$folder")" = -1 ]; then
		echo "src/$f: folder $folder/ is not a floor of test/layers_check.sh"
		status=1
		continue
	fi
	while read -r inc; do
		target=${inc%%/*}
		[ "$target" = "$inc" ] && continue			# PostgreSQL's own, unqualified
		[ -f "$inc" ] || continue				# PostgreSQL's own, qualified
		# the module graph: file and header are one module
		echo "${f%.*} ${inc%.*}" >>"$edges"
		[ -z "$folder" ] && continue
		if [ "$(floor_of "$target")" -gt "$(floor_of "$folder")" ]; then
			echo "src/$f includes $inc: $target/ is above $folder/"
			status=1
		fi
	done < <(sed -n 's/^#include "\(.*\)"$/\1/p' "$f")
done

# tsort names a loop on stderr; self edges (a file and its header) are none
if ! loops=$(awk '$1 != $2' "$edges" | tsort 2>&1 >/dev/null) || [ -n "$loops" ]; then
	echo "a circle of modules:"
	sed 's/^tsort: //' <<<"$loops"
	status=1
fi
[ $status = 0 ] && echo "every include of src/ points down the floors: ${floors[*]}"
exit $status
