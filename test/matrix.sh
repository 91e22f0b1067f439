#!/usr/bin/env bash
#
# test/matrix.sh: every suite that test/run_all.sh runs, on every PostgreSQL
# major this machine can reach, then one line per major.  Run as root.
#
#   15  natively, on this Debian 12 (bookworm) machine
#   17  inside a Debian 13 (trixie) root file system
#   18  inside a Debian testing (forky) root file system
#
# Each major runs test/run_all.sh itself (with PG_MAJOR set), so the suite
# list lives in one place and new tests are picked up here too.  The roots
# are made with mmdebstrap from the Debian mirror this machine's apt uses,
# holding the packages of suite_packages (test/lib.sh), and cached under
# $MATRIX_CACHE keyed by a hash of suite, mirror and package list: a second
# run reuses them, a changed package list makes a new one.
#
# pg_upgrade from 15 needs 15's binaries beside the new ones: after the native
# run has built and installed the extension into PostgreSQL 15, that
# installation is copied into each root under /opt/pg15 (same layout, so its
# relative paths hold), with those of bookworm's shared libraries it links to
# that the root lacks (ICU 72, libldap 2.5, ...) in /opt/pg15/compat-lib; the
# TAP tests find it through IDEMPOTENCY_UPGRADE_FROM.  Where the new major
# cannot read this machine's 15 (see install_pg15), the 15 comes from a
# cached bookworm root instead, with the extension built in it.
#
# Usage: bash test/matrix.sh [MAJOR...]      (default: 15 17 18)
# Environment: PG_BINDIR (the PostgreSQL 15 to use natively, as for
# run_all.sh), MATRIX_CACHE (default /var/cache/idempotency-matrix),
# MATRIX_MIRROR (default: the mirror apt uses for this machine's release).
# Exits non-zero if any major fails, or its root cannot be made.
#
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

NATIVE_MAJOR=15
MATRIX_CACHE=${MATRIX_CACHE:-/var/cache/idempotency-matrix}
# the Debian release that ships each major
declare -A SUITE_OF=([15]=bookworm [17]=trixie [18]=forky)
# where the copy of PostgreSQL 15 goes inside a root
PG15_IN_ROOT=/opt/pg15

majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(15 17 18)

# one run at a time on a machine: the roots and their mounts are shared
mkdir -p "$MATRIX_CACHE"
exec 9>"$MATRIX_CACHE/.lock"
if ! flock -n 9; then
	echo "==> waiting for another test/matrix.sh to finish"
	flock 9
fi

logdir=$(mktemp -d /tmp/idempotency-matrix.XXXXXX)
declare -A result times

# unmount_under DIR: unmount everything mounted at or below DIR, innermost
# first (the trap's job too, so that an interrupted run leaves nothing)
unmount_under() {
	local m
	[ -n "$1" ] || return 0
	awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done
}
current_root=
trap 'unmount_under "$current_root"' EXIT
trap 'unmount_under "$current_root"; exit 130' INT TERM

# mounted_under DIR: whether anything is mounted at or below DIR
mounted_under() {
	awk -v d="$1" '$2 == d || index($2, d "/") == 1 { found = 1 } END { exit !found }' /proc/mounts
}

# debian_mirror: the archive URI apt uses for this machine's release
debian_mirror() {
	local codename
	codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
	apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 2>/dev/null |
		awk -v c="$codename" '$2 == c && $3 == "main" { print $1; exit }'
}

# root_for MAJOR: make (or reuse) the cached root for MAJOR, print its path
root_for() {
	local major=$1 suite=${SUITE_OF[$1]} mirror packages key root tmp
	mirror=${MATRIX_MIRROR:-$(debian_mirror)}
	mirror=${mirror:-http://deb.debian.org/debian/}
	packages=$(suite_packages "$major" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
	# the recipe below is part of the key: change "recipe" when it changes
	key=$(printf 'recipe 2\nsuite %s\nmirror %s\npackages %s\n' "$suite" "$mirror" "$packages" |
		sha256sum | cut -c1-16)
	root="$MATRIX_CACHE/$suite-pg$major-$key"
	if [ -x "$root/usr/lib/postgresql/$major/bin/postgres" ]; then
		echo "==> PostgreSQL $major: reusing the $suite root $root" >&2
		echo "$root"
		return 0
	fi
	install_packages mmdebstrap >&2
	mkdir -p "$MATRIX_CACHE"
	tmp=$(mktemp -d "$MATRIX_CACHE/.new-$suite-XXXXXX")
	rmdir "$tmp"
	echo "==> PostgreSQL $major: making a $suite root from $mirror ($packages)" >&2
	# no "main" cluster: the suites make their own throwaway ones
	if ! mmdebstrap --variant=minbase --quiet \
		--aptopt='APT::Install-Recommends "false"' \
		--aptopt='Acquire::Check-Valid-Until "false"' \
		--essential-hook='mkdir -p "$1/etc/postgresql-common/createcluster.d" && echo "create_main_cluster = false" >"$1/etc/postgresql-common/createcluster.d/idempotency-matrix.conf"' \
		--include="${packages// /,}" \
		"$suite" "$tmp" "deb $mirror $suite main" >&2; then
		mounted_under "$tmp" || rm -rf "$tmp"
		return 1
	fi
	# drop the roots made from an older key, unless something is mounted there
	for old in "$MATRIX_CACHE/$suite-pg$major-"* "$MATRIX_CACHE/.new-$suite-"*; do
		[ "$old" != "$tmp" ] && [ -d "$old" ] && ! mounted_under "$old" && rm -rf "$old"
	done
	mv "$tmp" "$root"
	echo "$root"
}

# copy_tree SRC DEST: the files of a checkout (tracked and new, not ignored)
copy_tree() {
	mkdir -p "$2"
	if git -C "$1" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$1" && git ls-files -z --cached --others --exclude-standard |
			xargs -0 cp --parents -t "$2" 2>/dev/null || true)
	else
		cp -a "$1"/. "$2"/
	fi
}

# missing_libs ROOT: sonames that the copy of PostgreSQL 15 in ROOT cannot find
missing_libs() {
	chroot "$1" /bin/sh -c "for f in $PG15_IN_ROOT/usr/lib/postgresql/$NATIVE_MAJOR/bin/* \
		$PG15_IN_ROOT/usr/lib/postgresql/$NATIVE_MAJOR/lib/*.so; do ldd \"\$f\" 2>/dev/null; done" |
		awk '$2 == "=>" && $3 == "not" { print $1 }' | sort -u
}

# pg15_root: print the path of a bookworm root (from the mirror's bookworm
# suite alone, without its security updates) with the extension built and
# installed into its PostgreSQL 15; see install_pg15
pg15_root() {
	local broot
	broot=$(root_for "$NATIVE_MAJOR") || return 1
	rm -rf "$broot/build"
	copy_tree "$top" "$broot/build/idempotency"
	echo "==> building the extension for $(chroot "$broot" /usr/lib/postgresql/$NATIVE_MAJOR/bin/postgres --version) in $broot" >&2
	chroot "$broot" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		make -C /build/idempotency -s PG_CFLAGS="$PG_CFLAGS_STRICT" all install >&2 || return 1
	echo "$broot"
}

# install_pg15 ROOT MAJOR: copy a PostgreSQL 15 with the extension into ROOT
# under /opt/pg15, with the libraries it needs that ROOT lacks.  Normally
# this machine's, as the native run just built and installed it.  But 15.20
# and later store a column option, pg_attver, in every table, which a new
# major released before them rejects (18.6, the newest 18 on the mirror,
# does), so pg_upgrade from them to it fails whatever the tables hold; for
# such a MAJOR the copy is the PostgreSQL 15 of the mirror's bookworm suite
# (15.18 today) with the extension built against it (pg15_root): a library
# built against 15.20's headers does not load into 15.18.
install_pg15() {
	local root=$1 major=$2 from="" libdir sharedir dest libs lib path round
	libdir=$(dirname "$PG_BINDIR")
	sharedir=$("$PG_BINDIR/pg_config" --sharedir)
	if grep -qa pg_attver "$PG_BINDIR/postgres" &&
		! grep -qa pg_attver "$root/usr/lib/postgresql/$major/bin/postgres"; then
		from=$(pg15_root) || return 1
		libdir="$from/usr/lib/postgresql/$NATIVE_MAJOR"
		sharedir="$from/usr/share/postgresql/$NATIVE_MAJOR"
		if grep -qa pg_attver "$libdir/bin/postgres"; then
			echo "no PostgreSQL $NATIVE_MAJOR on the mirror that $major can upgrade from" >&2
			return 1
		fi
		echo "==> PostgreSQL $major predates pg_attver: upgrading from the $NATIVE_MAJOR of $from" >&2
	fi
	dest="$root$PG15_IN_ROOT"
	rm -rf "$dest"
	mkdir -p "$dest/usr/lib/postgresql" "$dest/usr/share/postgresql" "$dest/compat-lib"
	cp -a "$libdir" "$dest/usr/lib/postgresql/$NATIVE_MAJOR"
	cp -a "$sharedir" "$dest/usr/share/postgresql/$NATIVE_MAJOR"
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

# run_native: run_all.sh on this machine
run_native() {
	PG_MAJOR=$NATIVE_MAJOR bash "$top/test/run_all.sh"
}

# run_in_root MAJOR ROOT: run_all.sh inside ROOT, on a fresh copy of the tree
run_in_root() {
	local major=$1 root=$2 rc start
	rm -rf "$root/build" "$root"/tmp/idempotency*
	copy_tree "$top" "$root/build/idempotency"
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
	start=$SECONDS
	install_pg15 "$root" "$major" || return 1
	echo "$((SECONDS - start))" >"$logdir/pg$major.prepare"

	# /proc, and a private /dev/shm for the servers' shared memory; the
	# root's own /dev holds the device nodes (mmdebstrap made them), so
	# nothing of this machine's /dev is mounted into it
	for dev in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
		IFS=: read -r name maj min <<<"$dev"
		[ -c "$root/dev/$name" ] || mknod -m 666 "$root/dev/$name" c "$maj" "$min"
	done
	mkdir -p "$root/dev/shm"
	mount -t proc proc "$root/proc" || return 1
	mount -t tmpfs -o mode=1777 shm "$root/dev/shm" || { unmount_under "$root"; return 1; }
	chroot "$root" /usr/bin/env -i \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 CI="${CI:-}" PG_MAJOR="$major" \
		IDEMPOTENCY_UPGRADE_FROM="$PG15_IN_ROOT/usr/lib/postgresql/$NATIVE_MAJOR" \
		bash /build/idempotency/test/run_all.sh
	rc=$?
	unmount_under "$root"
	return $rc
}

# summary LOG: the closing lines of a run_all.sh log, on one line
summary() {
	grep -E '^(suites|files|tests|assertions[^:]*): ' "$1" | tr '\n' ';' | sed 's/;$//; s/;/; /g'
}

# the native major always runs first: it builds and installs the extension
# into the PostgreSQL 15 that the roots copy for pg_upgrade
ordered=()
for m in "${majors[@]}"; do [ "$m" = "$NATIVE_MAJOR" ] && ordered+=("$m"); done
for m in "${majors[@]}"; do [ "$m" != "$NATIVE_MAJOR" ] && ordered+=("$m"); done
needs_pg15=0
for m in "${ordered[@]}"; do [ "$m" != "$NATIVE_MAJOR" ] && needs_pg15=1; done
if [ "$needs_pg15" = 1 ] && [ "${ordered[0]}" != "$NATIVE_MAJOR" ]; then
	install_packages $(suite_packages $NATIVE_MAJOR)
	build_and_install "$top"
fi

for major in "${ordered[@]}"; do
	log="$logdir/pg$major.log"
	start=$SECONDS
	if [ -z "${SUITE_OF[$major]:-}" ]; then
		result[$major]="FAILED (no Debian release known for this major)"
		times[$major]="0 s"
		continue
	fi
	echo
	echo "################ PostgreSQL $major ################"
	if [ "$major" = "$NATIVE_MAJOR" ]; then
		run_native 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
		where="native, Debian ${SUITE_OF[$major]}"
		times[$major]="$((SECONDS - start)) s"
	else
		where="Debian ${SUITE_OF[$major]} root"
		if root=$(root_for "$major"); then
			made=$((SECONDS - start))
			current_root=$root
			run_in_root "$major" "$root" 2>&1 | tee "$log"
			rc=${PIPESTATUS[0]}
			prepared=$(cat "$logdir/pg$major.prepare" 2>/dev/null || echo 0)
			times[$major]="$((SECONDS - start)) s (root $made s, PostgreSQL $NATIVE_MAJOR for pg_upgrade $prepared s, build and suites $((SECONDS - start - made - prepared)) s)"
		else
			rc=1
			echo "could not make the ${SUITE_OF[$major]} root" >"$log"
			times[$major]="$((SECONDS - start)) s"
		fi
	fi
	if [ "$rc" -eq 0 ]; then
		result[$major]="ok"
	else
		result[$major]="FAILED"
	fi
	result[$major]="${result[$major]} ($where) $(summary "$log")"
done

echo
echo "################ matrix ################"
passed=0
failed=0
for major in "${ordered[@]}"; do
	printf 'PostgreSQL %s: %s, %s\n' "$major" "${result[$major]}" "${times[$major]}"
	case ${result[$major]} in
	ok*) passed=$((passed + 1)) ;;
	*) failed=$((failed + 1)) ;;
	esac
done
echo "logs: $logdir"
echo "total: $SECONDS s"
echo "majors: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
