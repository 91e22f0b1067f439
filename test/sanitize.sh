#!/usr/bin/env bash
#
# test/sanitize.sh [PG_CONFIG]: the regression and isolation suites against
# a build of the extension with AddressSanitizer and
# UndefinedBehaviorSanitizer.  Fails on any test failure and on any
# sanitizer report.  `make sanitizecheck` runs it; test/run_all.sh runs it as
# its own suite.  Run it as an unprivileged user (servers refuse root) in a
# copy of the tree it may write to.
#
# The server itself is not instrumented, so the sanitizers' runtime is
# preloaded into it (LD_PRELOAD) by a wrapper that replaces the postgres
# binary in a private copy of the installation: the instrumented library is
# installed there, never into the installation other suites use.  Every
# finding makes the process that found it exit, so it fails a test; its
# report goes to a file of its own (log_path) or to the server's log, and
# both are searched and printed here.  SANITIZE_KEEP=1 keeps the files.
#
# What it can find: overflows of stack and global buffers and of malloc'd
# memory, use after free of malloc'd memory, and undefined behaviour (bounds,
# overflow, shifts, alignment, null pointers).  Memory from palloc lives in
# larger blocks that ASan sees as one object, so an overflow inside a memory
# context is only found if it leaves the block (valgrind sees more there).
#
set -euo pipefail

pg_config=${1:-pg_config}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
started=$(date +%s)

bindir=$("$pg_config" --bindir)
pkglibdir=$("$pg_config" --pkglibdir)
sharedir=$("$pg_config" --sharedir)

asan=$(gcc -print-file-name=libasan.so)
ubsan=$(gcc -print-file-name=libubsan.so)
for lib in "$asan" "$ubsan"; do
	if [ ! -e "$lib" ]; then
		echo "sanitize.sh: the sanitizer runtime $lib is missing (Debian: libasan8, libubsan1)" >&2
		exit 1
	fi
done
asan=$(readlink -f "$asan")
ubsan=$(readlink -f "$ubsan")

tree=$(mktemp -d /tmp/idempotency-sanitize.XXXXXX)
reports="$tree/reports"
# SANITIZE_KEEP=1 keeps the private installation and the logs
[ -n "${SANITIZE_KEEP:-}" ] || trap 'rm -rf "$tree"' EXIT
mkdir -p "$reports"

# A private copy of the installation at the same paths under $tree: its
# binaries find their libraries and share files relative to their own
# location.  Binaries are copied (a symbolic link would lead back to the
# original); everything else is linked, except our own files.
echo "==> a private installation in $tree"
mkdir -p "$tree$bindir" "$tree$pkglibdir" "$tree$sharedir/extension"
cp -a "$bindir"/. "$tree$bindir"/
for f in "$pkglibdir"/*; do
	case "$(basename "$f")" in
		idempotency.so | bitcode) ;;
		*) ln -s "$f" "$tree$pkglibdir/" ;;
	esac
done
if [ -d "$pkglibdir/bitcode" ]; then
	mkdir "$tree$pkglibdir/bitcode"
	for f in "$pkglibdir"/bitcode/*; do
		case "$(basename "$f")" in
			idempotency*) ;;
			*) ln -s "$f" "$tree$pkglibdir/bitcode/" ;;
		esac
	done
fi
for f in "$sharedir"/*; do
	[ "$(basename "$f")" = extension ] || ln -s "$f" "$tree$sharedir/"
done
for f in "$sharedir"/extension/*; do
	case "$(basename "$f")" in
		idempotency*) ;;
		*) ln -s "$f" "$tree$sharedir/extension/" ;;
	esac
done

# A preloaded runtime initialises lazily, at the first malloc, which here
# happens inside another library's constructor (libgpg-error's
# bindtextdomain) while glibc's gettext lock is held for writing.  The
# runtime's start-up looks up swift_demangle, fails, and dlerror() then
# translates its message under the same lock: the server hangs before main.
# A swift_demangle of our own (never called: it only demangles Swift names)
# makes that lookup succeed.
cat >"$tree/swift_demangle.c" <<'SRC'
#include <stddef.h>
#include <stdint.h>

char	   *swift_demangle(const char *mangled, size_t len, char *out, size_t *outlen, uint32_t flags);

char *
swift_demangle(const char *mangled, size_t len, char *out, size_t *outlen, uint32_t flags)
{
	return NULL;
}
SRC
gcc -shared -fPIC -O2 -o "$tree/swift_demangle.so" "$tree/swift_demangle.c"

# The server with the runtimes preloaded, each report in a file of its own.
# Both start with the process: a runtime that started later would no longer
# find its options in the environment, which the server overwrites with its
# process titles.
mv "$tree$bindir/postgres" "$tree$bindir/postgres.bin"
cat >"$tree$bindir/postgres" <<EOF
#!/bin/sh
# postgres with the sanitizers' runtime preloaded (test/sanitize.sh)
export LD_PRELOAD="$asan $ubsan $tree/swift_demangle.so"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=1:log_path=$reports/asan"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
exec "\$0.bin" "\$@"
EOF
chmod +x "$tree$bindir/postgres"

# The instrumented build, in a copy of the source
echo "==> building with -fsanitize=address,undefined"
build="$tree/src"
mkdir -p "$build"
(cd "$src" && tar --exclude=./tmp_check\* --exclude=./test/regress/results \
	--exclude=./test/isolation/results --exclude=./test/pgtap/results \
	--exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - .) | (cd "$build" && tar -xf -)
make -C "$build" -s clean PG_CONFIG="$pg_config"
# no LLVM bitcode: JIT would inline uninstrumented code
make -C "$build" -s PG_CONFIG="$pg_config" with_llvm=no \
	PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter -DUSE_ASSERT_CHECKING -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
make -C "$build" -s install DESTDIR="$tree" PG_CONFIG="$pg_config" with_llvm=no
if ! nm -D "$tree$pkglibdir/idempotency.so" | grep __asan_ >/dev/null; then
	echo "sanitize.sh: the library is not instrumented" >&2
	exit 1
fi

# The suites, against the private installation
status=0
echo "==> regression and isolation suites"
make -C "$build" -s installcheck PG_CONFIG="$tree$bindir/pg_config" ISOLATION= TAP_TESTS= || status=1
make -C "$build" -s installcheck PG_CONFIG="$tree$bindir/pg_config" REGRESS= TAP_TESTS= || status=1

if compgen -G "$reports/*" >/dev/null; then
	echo "==> sanitizer reports"
	for f in "$reports"/*; do
		echo "--- $f"
		cat "$f"
	done
	status=1
fi
# and anything a runtime wrote to a server's log instead
for f in "$build"/test/regress/log/*.log "$build"/test/isolation/log/*.log; do
	[ -f "$f" ] || continue
	if grep -E 'runtime error:|ERROR: AddressSanitizer|SUMMARY: (Address|UndefinedBehavior)Sanitizer' "$f" >/dev/null; then
		echo "==> sanitizer messages in $f"
		grep -E -A 20 'runtime error:|ERROR: AddressSanitizer' "$f" | head -100
		status=1
	fi
done
if [ "$status" -ne 0 ]; then
	for f in "$build"/test/regress/regression.diffs "$build"/test/isolation/regression.diffs; do
		[ -f "$f" ] && { echo "--- $f"; cat "$f"; }
	done
	echo "sanitizer suite: FAILED ($(($(date +%s) - started)) s)"
	exit 1
fi
echo "sanitizer suite: no test failed, no sanitizer report ($(($(date +%s) - started)) s)"
