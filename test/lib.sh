# test/lib.sh: shared by test/demo.sh and test/run_all.sh (sourced, not run).
#
# Installs what the build and the tests need from Debian's packages, builds
# with warnings as errors, and installs the extension into the system's
# PostgreSQL 15.  Everything that starts a server runs as the unprivileged
# user "postgres" (initdb refuses root), in a copy of the tree it owns.

PG_MAJOR=${PG_MAJOR:-15}
# PG_BINDIR may point at another installation of the same major (a private
# copy, so that several checkouts can install and test side by side)
PG_BINDIR=${PG_BINDIR:-/usr/lib/postgresql/$PG_MAJOR/bin}
PG_CFLAGS_STRICT="-Wall -Wextra -Werror -Wno-unused-parameter -DUSE_ASSERT_CHECKING"
# what benchmarks build with: the same warnings, no assertions
PG_CFLAGS_RELEASE="-Wall -Wextra -Werror -Wno-unused-parameter"
export PATH="$PG_BINDIR:$PATH"

# suite_packages [MAJOR]: the Debian packages that building and every suite
# need, for one major (default $PG_MAJOR); test/matrix.sh installs the same
# list into the Debian roots of the other majors
suite_packages() {
	local major=${1:-$PG_MAJOR}
	echo make gcc libc6-dev git postgresql-$major postgresql-server-dev-$major \
		postgresql-$major-pgtap libipc-run-perl pgbouncer
}

# root_packages MAJOR: what test/roots.sh puts into the Debian root of
# MAJOR: suite_packages, and what building the Debian package needs
root_packages() {
	# shellcheck disable=SC2046
	echo $(suite_packages "$1") build-essential debhelper dpkg-dev postgresql-server-dev-all
}

# client_packages: what the HTTP service, driver, monitoring and Python
# client tests (test/tap/040, 041, 042 and 044) need beside suite_packages on this machine: Debian's nodejs and npm
# unless node and npm are installed already (NodeSource's nodejs carries its
# own npm and conflicts with Debian's), a JDK unless javac is there, the
# Python and Java drivers, PgBouncer, postgres_exporter, and the Python
# client's frameworks, ASGI server and HTTP client (Django 3.2 needs
# psycopg2).  The matrix's roots leave them out: the tests skip there, saying why.
client_packages() {
	command -v node >/dev/null 2>&1 || echo nodejs
	command -v npm >/dev/null 2>&1 || echo npm
	command -v javac >/dev/null 2>&1 || echo default-jdk-headless
	echo python3-psycopg python3-asyncpg libpostgresql-jdbc-java pgbouncer prometheus-postgres-exporter
	echo python3-psycopg2 python3-starlette python3-fastapi python3-django python3-uvicorn python3-httpx
	# pg_cron, for the portable edition's schedule (test/tap/051)
	echo postgresql-$PG_MAJOR-cron
}

# install_packages PKG...: install any that are missing, as root
install_packages() {
	local missing=()
	for pkg in "$@"; do
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
			|| missing+=("$pkg")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "==> installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
}

# build_and_install SRCDIR [CFLAGS]: a warning-free build (with assertions
# unless other flags are given), installed system-wide
build_and_install() {
	echo "==> building and installing the extension"
	make -C "$1" -s clean
	make -C "$1" -s PG_CFLAGS="${2:-$PG_CFLAGS_STRICT}"
	make -C "$1" -s install
}

# check_package: that the extension PostgreSQL $PG_MAJOR loads is the one
# the Debian package postgresql-$PG_MAJOR-idempotency installed (dpkg owns
# its library, control file and SQL scripts), and that the package was built
# from this tree (the same control file and SQL scripts, none missing)
check_package() {
	local pkg=postgresql-$PG_MAJOR-idempotency libdir extdir f owner scripts rc
	if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
		echo "the package $pkg is not installed" >&2
		return 1
	fi
	libdir=$(pg_config --pkglibdir)
	extdir=$(pg_config --sharedir)/extension
	echo "==> testing the installed package $pkg $(dpkg-query -W -f='${Version}' "$pkg")"
	for f in "$libdir/idempotency.so" "$extdir/idempotency.control" "$extdir"/idempotency--*.sql; do
		owner=$(dpkg -S "$f" 2>/dev/null | sed -n 's/: .*//p')
		if [ "$owner" != "$pkg" ]; then
			echo "$f is not installed by $pkg (${owner:-by no package})" >&2
			return 1
		fi
	done
	# the tree's scripts, as the build writes them (sql/include.pl)
	scripts=$(mktemp -d)
	rc=0
	for f in "$top"/sql/idempotency--*.sql.in; do
		perl "$top/sql/include.pl" "$top/sql/released.sha256" "$f" "$scripts/$(basename "${f%.in}")" || rc=1
	done
	for f in "$top/idempotency.control" "$scripts"/idempotency--*.sql; do
		if [ "$rc" -eq 0 ] && ! cmp -s "$f" "$extdir/$(basename "$f")"; then
			echo "$extdir/$(basename "$f") differs from this tree's (or is missing): the package was built from another tree" >&2
			rc=1
		fi
	done
	for f in "$extdir"/idempotency--*.sql; do
		if [ "$rc" -eq 0 ] && [ ! -f "$scripts/$(basename "$f")" ]; then
			echo "$f is not in this tree: the package was built from another tree" >&2
			rc=1
		fi
	done
	rm -rf "$scripts"
	return "$rc"
}

# use_extension SRCDIR: build and install the extension from SRCDIR; with
# IDEMPOTENCY_INSTALLED=1, use the one the Debian package installed instead
# (check_package)
use_extension() {
	if [ "${IDEMPOTENCY_INSTALLED:-0}" = 1 ]; then
		check_package
	else
		build_and_install "$1"
	fi
}

# private_copy SRCDIR: print the path of a copy of the tree owned by postgres
private_copy() {
	local dest
	dest=$(mktemp -d /tmp/idempotency.XXXXXX)
	if git -C "$1" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$1" && git ls-files -z --cached --others --exclude-standard |
			xargs -0 cp --parents -t "$dest" 2>/dev/null || true)
	else
		cp -a "$1"/. "$dest"/
	fi
	chown -R postgres:postgres "$dest"
	echo "$dest"
}

# as_postgres CMD...: run a command as the postgres user with our PATH
as_postgres() {
	runuser -u postgres -- env PATH="$PATH" HOME=/tmp "$@"
}

# start_cluster [SETTING...]: initdb and start a throwaway cluster owned by
# postgres, with the library preloaded; sets $cluster and $port, and stops
# and removes it on exit.  Extra arguments are added to postgresql.conf.
# The cluster's locale is $CLUSTER_LOCALE, or C when that is unset.
start_cluster() {
	cluster=$(mktemp -d /tmp/idempotency-cluster.XXXXXX)
	chown postgres:postgres "$cluster"
	port=$((20000 + RANDOM % 20000))
	trap 'as_postgres pg_ctl -D "$cluster/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$cluster"' EXIT
	echo "==> starting a throwaway cluster in $cluster (port $port)"
	as_postgres initdb -D "$cluster/data" -A trust -E UTF8 --locale="${CLUSTER_LOCALE:-C}" >/dev/null
	{
		echo "shared_preload_libraries = 'idempotency'"
		echo "port = $port"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$cluster'"
		for setting in "$@"; do echo "$setting"; done
	} >>"$cluster/data/postgresql.conf"
	as_postgres pg_ctl -D "$cluster/data" -l "$cluster/log" -w start >/dev/null
}

# psql_cluster ARGS...: psql on the throwaway cluster, stopping on errors
psql_cluster() {
	as_postgres psql -X -q -v ON_ERROR_STOP=1 -h "$cluster" -p "$port" -d postgres "$@"
}

# bench_prepare [SETTING...]: what every benchmark starts with: the packages,
# a release build installed, a throwaway cluster with these settings
bench_prepare() {
	install_packages make gcc libc6-dev postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR postgresql-contrib
	build_and_install "$top" "$PG_CFLAGS_RELEASE"
	start_cluster "$@"
}

# median NUMBER...: the middle one (the lower middle of an even count)
median() {
	printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

# ratio A B: A / B to two decimals
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
}
