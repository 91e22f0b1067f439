#!/usr/bin/env bash
#
# test/packages.sh: the Debian package postgresql-MAJOR-idempotency for each
# MAJOR given (default: 15 17 18), each built from this tree in a throwaway
# root of the Debian release that ships that major (15 in bookworm, 17 in
# trixie, 18 in forky; see test/roots.sh), the way Debian packages
# PostgreSQL extensions: debian/control from debian/control.in by
# pg_buildext, then dpkg-buildpackage, with dh's pgxs_loop building one
# major.  The packages are left in build/debian (DEB_DIR).  "make deb" runs
# this.  Run as root; test/matrix.sh builds the same way, then installs each
# package into a clean root of its release and tests it there.
#
# Usage: bash test/packages.sh [MAJOR...]
#
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"
. "$top/test/roots.sh"

majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(15 17 18)

take_lock
current_root=
trap 'drop_root "$current_root"' EXIT
trap 'drop_root "$current_root"; exit 130' INT TERM

failed=0
for major in "${majors[@]}"; do
	if [ -z "${SUITE_OF[$major]:-}" ]; then
		echo "no Debian release known for PostgreSQL $major" >&2
		failed=1
		continue
	fi
	start=$SECONDS
	if build_package "$major"; then
		echo "==> PostgreSQL $major: built in $((SECONDS - start)) s"
	else
		echo "==> PostgreSQL $major: the package did not build" >&2
		failed=1
	fi
done
[ "$failed" -eq 0 ]
