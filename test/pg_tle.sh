#!/usr/bin/env bash
#
# test/pg_tle.sh SRC [PG_CONFIG]: build pg_tle (Trusted Language Extensions,
# github.com/aws/pg_tle) from its public source and install it into the
# PostgreSQL of PG_CONFIG (default: pg_config on PATH), for
# test/tap/054_pg_tle.pl; as root, or as a user who may write there.  SRC
# is a source tree, or a git directory holding the tag PG_TLE_TAG (default
# v1.5.2), such as a bare clone of the public repository.  For tests only.
#
set -euo pipefail
src=${1:?usage: pg_tle.sh SRC [PG_CONFIG]}
pg_config=${2:-pg_config}
tag=${PG_TLE_TAG:-v1.5.2}
# its build needs flex and the Kerberos headers PostgreSQL's server headers
# include; as root, install them
if [ "$(id -u)" = 0 ]; then
	# shellcheck source=test/lib.sh
	. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
	install_packages flex libkrb5-dev
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -f "$src/Makefile" ]; then
	cp -a "$src/." "$work/"
else
	git --git-dir="$src" archive "$tag" | tar -x -C "$work"
fi
make -s -C "$work" PG_CONFIG="$pg_config" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
make -s -C "$work" PG_CONFIG="$pg_config" install >/dev/null
echo "pg_tle $tag installed into $("$pg_config" --sharedir)"
