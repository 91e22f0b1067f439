#!/usr/bin/env bash
#
# test/matrix.sh: every suite that test/run_all.sh runs, on every PostgreSQL
# major this machine can reach, then one line per run.  Run as root.
#
#   15  from source, natively on this Debian 12 (bookworm) machine: every
#       suite, built with assertions, including the sanitizers, the format
#       check, Citus and the HTTP service's and drivers' tests
#   15  as the Debian package postgresql-15-idempotency, in a bookworm root
#   17  as postgresql-17-idempotency, in a Debian 13 (trixie) root
#   18  as postgresql-18-idempotency, in a Debian testing (forky) root
#
# A package run builds the package from this tree in a throwaway root of the
# major's release (build_package in test/roots.sh: pg_buildext and
# dpkg-buildpackage, as "make deb" does; the .deb is left in build/debian),
# installs it with apt into another, clean, throwaway root of that release,
# one that never saw the source tree's build, then runs the demo
# (test/demo.sh) and test/run_all.sh there with IDEMPOTENCY_INSTALLED=1:
# nothing is built, dpkg must own the extension's files, and the suites
# (pg_regress, isolation, TAP, pgTAP) run against the installed package.
# The suites that build from the source (sanitizers, format) run with the
# build from source only.  The roots (test/roots.sh) are made with
# mmdebstrap, cached under $MATRIX_CACHE and never written to: each build
# and each test runs in an overlay on the cached root, removed afterwards.
# With the roots cached, on a 2-core machine, a package run takes 4 to 5
# minutes (the build about 20 s, the demo 5 s, the suites the rest), the
# whole matrix about 20; making the three roots adds a few minutes.
#
# pg_upgrade from 15 needs 15's binaries beside the new ones: after the native
# run has built and installed the extension into PostgreSQL 15, that
# installation is copied into each root of 17 and 18 under /opt/pg15 (same
# layout, so its relative paths hold), with those of bookworm's shared
# libraries it links to that the root lacks (ICU 72, libldap 2.5, ...) in
# /opt/pg15/compat-lib; the TAP tests find it through
# IDEMPOTENCY_UPGRADE_FROM.  Where the new major cannot read this machine's
# 15 (see install_pg15), the 15 comes from the cached bookworm root instead,
# with the extension of the bookworm package.
#
# Usage: bash test/matrix.sh [MAJOR...]      (default: 15 17 18; 15 makes
# both of its runs, 15-source or 15-package one of them)
# Environment: PG_BINDIR (the PostgreSQL 15 to use natively, as for
# run_all.sh), MATRIX_CACHE (default /var/cache/idempotency-matrix),
# MATRIX_MIRROR (default: the mirror apt uses for this machine's release),
# DEB_DIR (where the packages go, default build/debian).
# Exits non-zero if any run fails, or its root cannot be made.
#
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"
. "$top/test/roots.sh"

# where the copy of PostgreSQL 15 goes inside a root
PG15_IN_ROOT=/opt/pg15

majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(15 17 18)

# one run at a time on a machine: the roots and their mounts are shared
take_lock

logdir=$(mktemp -d /tmp/idempotency-matrix.XXXXXX)
declare -A result times

# every throwaway root is this run's (the lock is held): an interrupted run
# leaves none, and nothing mounted
drop_all_roots() {
	local r
	for r in "$MATRIX_CACHE"/.run-*/root; do
		[ -d "$r" ] && drop_root "$r"
	done
}
trap drop_all_roots EXIT
trap 'drop_all_roots; exit 130' INT TERM

# missing_libs ROOT: sonames that the copy of PostgreSQL 15 in ROOT cannot find
missing_libs() {
	chroot "$1" /bin/sh -c "for f in $PG15_IN_ROOT/usr/lib/postgresql/$NATIVE_MAJOR/bin/* \
		$PG15_IN_ROOT/usr/lib/postgresql/$NATIVE_MAJOR/lib/*.so; do ldd \"\$f\" 2>/dev/null; done" |
		awk '$2 == "=>" && $3 == "not" { print $1 }' | sort -u
}

# package_15: print the path of the bookworm package of PostgreSQL 15,
# built in this run (by the run of 15's package, or here)
package_15() {
	if [ ! -f "$logdir/built-$NATIVE_MAJOR" ]; then
		build_package "$NATIVE_MAJOR" >&2 || return 1
		touch "$logdir/built-$NATIVE_MAJOR"
	fi
	deb_path "$NATIVE_MAJOR"
}

# install_pg15 ROOT MAJOR: copy a PostgreSQL 15 with the extension into ROOT
# under /opt/pg15, with the libraries it needs that ROOT lacks.  Normally
# this machine's, as the native run just built and installed it.  But 15.20
# and later store a column option, pg_attver, in every table, which a new
# major released before them rejects (18.6, the newest 18 on the mirror,
# does), so pg_upgrade from them to it fails whatever the tables hold; for
# such a MAJOR the copy is the PostgreSQL 15 of the cached bookworm root
# (the mirror's bookworm suite, 15.18 today) with the extension of the
# bookworm package: a library built against 15.20's headers does not load
# into 15.18.
install_pg15() {
	local root=$1 major=$2 from="" deb="" libdir sharedir dest libs lib path round x
	libdir=$(dirname "$PG_BINDIR")
	sharedir=$("$PG_BINDIR/pg_config" --sharedir)
	if grep -qa pg_attver "$PG_BINDIR/postgres" &&
		! grep -qa pg_attver "$root/usr/lib/postgresql/$major/bin/postgres"; then
		from=$(root_for "$NATIVE_MAJOR") || return 1
		deb=$(package_15) || return 1
		libdir="$from/usr/lib/postgresql/$NATIVE_MAJOR"
		sharedir="$from/usr/share/postgresql/$NATIVE_MAJOR"
		if grep -qa pg_attver "$libdir/bin/postgres"; then
			echo "no PostgreSQL $NATIVE_MAJOR on the mirror that $major can upgrade from" >&2
			return 1
		fi
		echo "==> PostgreSQL $major predates pg_attver: upgrading from the $NATIVE_MAJOR of $from, with $(basename "$deb")" >&2
	fi
	dest="$root$PG15_IN_ROOT"
	rm -rf "$dest"
	mkdir -p "$dest/usr/lib/postgresql" "$dest/usr/share/postgresql" "$dest/compat-lib"
	cp -a "$libdir" "$dest/usr/lib/postgresql/$NATIVE_MAJOR"
	cp -a "$sharedir" "$dest/usr/share/postgresql/$NATIVE_MAJOR"
	if [ -n "$deb" ]; then
		x=$(mktemp -d)
		dpkg-deb -x "$deb" "$x" &&
			cp -a "$x/usr/lib/postgresql/$NATIVE_MAJOR/." "$dest/usr/lib/postgresql/$NATIVE_MAJOR/" &&
			cp -a "$x/usr/share/postgresql/$NATIVE_MAJOR/." "$dest/usr/share/postgresql/$NATIVE_MAJOR/" ||
			{ rm -rf "$x"; return 1; }
		rm -rf "$x"
	fi
	# no JIT for the old server: it would drag in LLVM
	rm -rf "$dest/usr/lib/postgresql/$NATIVE_MAJOR/lib/llvmjit"* \
		"$dest/usr/lib/postgresql/$NATIVE_MAJOR/lib/bitcode"
	echo "$PG15_IN_ROOT/compat-lib" >"$root/etc/ld.so.conf.d/zz-idempotency-pg15.conf"
	for round in 1 2 3 4 5; do
		chroot "$root" /sbin/ldconfig
		libs=$(missing_libs "$root")
		[ -n "$libs" ] || return 0
		for lib in $libs; do
			# from the system the copy came from: this machine, or the bookworm root
			if [ -n "$from" ]; then
				path=$(chroot "$from" /sbin/ldconfig -p |
					awk -v s="$lib" '$1 == s && /x86-64/ { print $NF; exit }')
				[ -z "$path" ] || path="$from$path"
			else
				path=$(ldconfig -p | awk -v s="$lib" '$1 == s && /x86-64/ { print $NF; exit }')
			fi
			if [ -z "$path" ]; then
				echo "PostgreSQL $NATIVE_MAJOR needs $lib, which its system lacks" >&2
				return 1
			fi
			cp -L "$path" "$dest/compat-lib/"
		done
	done
	echo "the copy of PostgreSQL $NATIVE_MAJOR still lacks: $(missing_libs "$root" | tr '\n' ' ')" >&2
	return 1
}

# run_native: run_all.sh on this machine, from source
run_native() {
	PG_MAJOR=$NATIVE_MAJOR bash "$top/test/run_all.sh"
}

# step NAME: end the step under way, start NAME; the steps' times go to
# $logdir/pgMAJOR-package.steps
step() {
	local now=$SECONDS
	[ -z "${step_name:-}" ] || echo "$step_name $((now - step_start)) s" >>"$steps"
	step_name=$1
	step_start=$now
}

# run_package MAJOR: build the package of MAJOR, install it into a clean
# root of its release, run the demo and the suites there against it
run_package() {
	local major=$1 root="" rc
	steps="$logdir/pg$major-package.steps"
	: >"$steps"
	step_name=
	package_steps "$major"
	rc=$?
	step ""
	drop_root "$root"
	return $rc
}

# package_steps MAJOR: run_package's steps, in the throwaway root $root
package_steps() {
	local major=$1 deb extdir upgrade_from=""
	step root
	root_for "$major" >/dev/null || return 1
	step build
	build_package "$major" || return 1
	[ "$major" != "$NATIVE_MAJOR" ] || touch "$logdir/built-$major"
	deb=$(deb_path "$major")

	step "clean root and install"
	root=$(fresh_root "$major") || return 1
	# clean: PostgreSQL, the suites' tools, no extension
	extdir="$root/usr/share/postgresql/$major/extension"
	if [ -e "$root/usr/lib/postgresql/$major/lib/idempotency.so" ] ||
		compgen -G "$extdir/idempotency*" >/dev/null || [ -e "$root/build" ]; then
		echo "the ${SUITE_OF[$major]} root is not clean: it holds the extension or a build" >&2
		return 1
	fi
	mount_root "$root" || return 1
	cp "$deb" "$root/tmp/"
	echo "==> apt-get install ./$(basename "$deb") in a clean ${SUITE_OF[$major]} root"
	in_root "$root" DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q -o Dpkg::Use-Pty=0 --no-install-recommends "/tmp/$(basename "$deb")" ||
		return 1
	rm -f "$root/tmp/$(basename "$deb")"
	copy_tree "$top" "$root/build/idempotency"

	if [ "$major" != "$NATIVE_MAJOR" ]; then
		step "PostgreSQL $NATIVE_MAJOR for pg_upgrade"
		install_pg15 "$root" "$major" || return 1
		upgrade_from="$PG15_IN_ROOT/usr/lib/postgresql/$NATIVE_MAJOR"
	fi

	step demo
	if ! in_root "$root" PG_MAJOR="$major" IDEMPOTENCY_INSTALLED=1 \
		bash /build/idempotency/test/demo.sh; then
		echo "the demo failed" >&2
		return 1
	fi

	step suites
	in_root "$root" PG_MAJOR="$major" IDEMPOTENCY_INSTALLED=1 \
		IDEMPOTENCY_UPGRADE_FROM="$upgrade_from" \
		bash /build/idempotency/test/run_all.sh
}

# summary LOG: the closing lines of a run_all.sh log, on one line
summary() {
	grep -E '^(suites|files|tests|assertions[^:]*): ' "$1" | tr '\n' ';' | sed 's/;$//; s/;/; /g'
}

# the runs, "MAJOR source" (natively, 15 only) and "MAJOR package" (in a
# root): the run from source first, as it builds and installs the extension
# into the PostgreSQL 15 that the roots copy for pg_upgrade
runs=()
for how in source package; do
	for m in $(printf '%s\n' "${majors[@]}" | sort -u -V); do
		case $m in
		*-"$how") runs+=("${m%-*} $how") ;;
		*-*) ;;
		"$NATIVE_MAJOR") runs+=("$m $how") ;;
		*) [ "$how" = source ] || runs+=("$m $how") ;;
		esac
	done
done
needs_pg15=0
has_native=0
for run in "${runs[@]}"; do
	case $run in
	"$NATIVE_MAJOR source") has_native=1 ;;
	"$NATIVE_MAJOR package") ;;
	*" package") needs_pg15=1 ;;
	esac
done
if [ "$needs_pg15" = 1 ] && [ "$has_native" = 0 ]; then
	install_packages $(suite_packages $NATIVE_MAJOR)
	build_and_install "$top"
fi

for run in "${runs[@]}"; do
	read -r major how <<<"$run"
	log="$logdir/pg$major-$how.log"
	start=$SECONDS
	if [ -z "${SUITE_OF[$major]:-}" ] || { [ "$how" = source ] && [ "$major" != "$NATIVE_MAJOR" ]; }; then
		result[$run]="FAILED (no Debian release known for this major, or no run from source here)"
		times[$run]="0 s"
		continue
	fi
	echo
	echo "################ PostgreSQL $major, $how ################"
	if [ "$how" = source ]; then
		run_native 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
		where="from source, natively on Debian ${SUITE_OF[$major]}"
		times[$run]="$((SECONDS - start)) s"
	else
		run_package "$major" 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
		where="postgresql-$major-idempotency in a clean Debian ${SUITE_OF[$major]} root"
		times[$run]="$((SECONDS - start)) s ($(paste -sd, "$logdir/pg$major-package.steps" | sed 's/,/, /g'))"
	fi
	if [ "$rc" -eq 0 ]; then
		result[$run]="ok"
	else
		result[$run]="FAILED"
	fi
	result[$run]="${result[$run]} ($where) $(summary "$log")"
done

echo
echo "################ matrix ################"
passed=0
failed=0
for run in "${runs[@]}"; do
	read -r major how <<<"$run"
	printf 'PostgreSQL %s, %s: %s, %s\n' "$major" "$how" "${result[$run]}" "${times[$run]}"
	case ${result[$run]} in
	ok*) passed=$((passed + 1)) ;;
	*) failed=$((failed + 1)) ;;
	esac
done
echo "logs: $logdir"
echo "packages: $DEB_DIR"
echo "total: $SECONDS s"
echo "runs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
