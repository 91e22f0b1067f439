# test/roots.sh: Debian root file systems for test/matrix.sh and
# test/packages.sh (sourced after test/lib.sh, not run).  Run as root.
#
# A root per PostgreSQL major, of the Debian release that ships it, made
# with mmdebstrap from the Debian mirror this machine's apt uses and holding
# the packages of root_packages (test/lib.sh).  The roots are cached under
# $MATRIX_CACHE, keyed by a hash of suite, mirror and package list: a second
# run reuses them, a changed package list makes a new one.  A cached root is
# never written to: every build and every test runs in a throwaway root, an
# overlay on the cached one (a copy where overlays cannot be mounted), so
# each starts from the root exactly as mmdebstrap made it.

NATIVE_MAJOR=15
MATRIX_CACHE=${MATRIX_CACHE:-/var/cache/idempotency-matrix}
# the Debian release that ships each major
declare -A SUITE_OF=([15]=bookworm [17]=trixie [18]=forky)
# where test/packages.sh leaves the packages
DEB_DIR=${DEB_DIR:-$top/build/debian}

# take_lock: one user of the roots at a time on a machine (test/matrix.sh,
# test/packages.sh): they share the cache and its mounts.  Throwaway roots
# that an interrupted run left behind are removed once the lock is held.
take_lock() {
	local old
	mkdir -p "$MATRIX_CACHE"
	exec 9>"$MATRIX_CACHE/.lock"
	if ! flock -n 9; then
		echo "==> waiting for another user of $MATRIX_CACHE to finish"
		flock 9
	fi
	for old in "$MATRIX_CACHE"/.run-*; do
		[ -d "$old" ] || continue
		unmount_under "$old"
		mounted_under "$old" || rm -rf "$old"
	done
}

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
	packages=$(root_packages "$major" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
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

# fresh_root MAJOR: make a throwaway root for MAJOR, an overlay on its cached
# root, and print its path; drop_root removes it
fresh_root() {
	local base tmp
	base=$(root_for "$1") || return 1
	tmp=$(mktemp -d "$MATRIX_CACHE/.run-${SUITE_OF[$1]}-XXXXXX")
	mkdir "$tmp/upper" "$tmp/work" "$tmp/root"
	if ! mount -t overlay overlay -o "lowerdir=$base,upperdir=$tmp/upper,workdir=$tmp/work" "$tmp/root" 2>/dev/null; then
		echo "==> no overlay file system here: copying $base" >&2
		if ! cp -a "$base"/. "$tmp/root"/; then
			rm -rf "$tmp"
			return 1
		fi
	fi
	echo "$tmp/root"
}

# drop_root ROOT: unmount and remove a throwaway root of fresh_root
drop_root() {
	[ -n "$1" ] || return 0
	unmount_under "$1"
	mounted_under "$1" || rm -rf "$(dirname "$1")"
}

# mount_root ROOT: /proc, and a private /dev/shm for the servers' shared
# memory; the root's own /dev holds the device nodes (mmdebstrap made them),
# so nothing of this machine's /dev is mounted into it
mount_root() {
	local root=$1 dev name maj min
	for dev in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
		IFS=: read -r name maj min <<<"$dev"
		[ -c "$root/dev/$name" ] || mknod -m 666 "$root/dev/$name" c "$maj" "$min"
	done
	mkdir -p "$root/dev/shm"
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
	mountpoint -q "$root/proc" || mount -t proc proc "$root/proc" || return 1
	mountpoint -q "$root/dev/shm" || mount -t tmpfs -o mode=1777 shm "$root/dev/shm" ||
		{ unmount_under "$root"; return 1; }
}

# in_root ROOT [NAME=VALUE...] CMD...: run CMD in ROOT with a clean
# environment
in_root() {
	local root=$1
	shift
	chroot "$root" /usr/bin/env -i \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 CI="${CI:-}" "$@"
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

# deb_path MAJOR: where build_package leaves the package for MAJOR
deb_path() {
	local version
	version=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$top/debian/changelog")
	echo "$DEB_DIR/postgresql-$1-idempotency_${version}_$(dpkg --print-architecture).deb"
}

# build_package MAJOR: build the Debian package postgresql-MAJOR-idempotency
# from this tree in a throwaway root of MAJOR's release, the Debian way
# (pg_buildext updatecontrol, then dpkg-buildpackage), with warnings as
# errors; leave it (and its -dbgsym) in $DEB_DIR, with the build's log
# (printed if the build fails)
build_package() {
	local major=$1 root rc deb log
	deb=$(deb_path "$major")
	log="$DEB_DIR/postgresql-$major-idempotency.build.log"
	mkdir -p "$DEB_DIR"
	rm -f "$DEB_DIR/postgresql-$major-idempotency"*.deb "$log"
	root=$(fresh_root "$major") || return 1
	current_root=$root
	copy_tree "$top" "$root/build/idempotency"
	mount_root "$root" || { drop_root "$root"; return 1; }
	echo "==> building $(basename "$deb") in a ${SUITE_OF[$major]} root (log: $log)"
	# only MAJOR, whichever majors the release supports
	in_root "$root" PG_SUPPORTED_VERSIONS="$major" DEB_CFLAGS_MAINT_APPEND="$PG_CFLAGS_RELEASE" \
		DEB_BUILD_OPTIONS=nocheck \
		sh -c 'cd /build/idempotency && pg_buildext updatecontrol && dpkg-buildpackage -b -us -uc' \
		>"$log" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		cp "$root/build/postgresql-$major-idempotency"*.deb "$DEB_DIR/"
		[ -f "$deb" ] || { echo "no $deb after the build" >&2; rc=1; }
	else
		cat "$log"
		echo "the package did not build (dpkg-buildpackage exit code $rc)" >&2
	fi
	drop_root "$root"
	current_root=
	[ "$rc" -eq 0 ] && echo "==> $deb"
	return "$rc"
}
