#!/usr/bin/env bash
#
# Runs every test suite: pg_regress (sql/, expected/), isolation specs
# (test/specs), TAP tests (test/t), pgTAP (test/pgtap) and the regression and
# isolation suites again against a build with AddressSanitizer and
# UndefinedBehaviorSanitizer (test/sanitize.sh), each on throwaway instances
# that pg_regress or PostgreSQL::Test::Cluster start themselves.
# Run as root on Debian 12: it installs the packages it needs, builds with
# warnings as errors and installs the extension first.  Exits non-zero if
# anything fails, after printing the diffs.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

install_packages make gcc libc6-dev git postgresql-$PG_MAJOR \
	postgresql-server-dev-$PG_MAJOR postgresql-$PG_MAJOR-pgtap libipc-run-perl \
	libasan8 libubsan1
build_and_install "$top"

work=$(private_copy "$top")
echo "==> running the suites in $work"

passed=0
failed=0
failures=()
tests_ok=0
tests_failed=0

# suite NAME MAKE-ARGS...: run one suite, remember how it went
suite() {
	local name=$1
	shift
	echo
	echo "==> suite: $name"
	local log="$work/suite-${name// /_}.log"
	local stamp="$work/.suite-start"
	touch "$stamp"
	if as_postgres make -C "$work" -s "$@" 2>&1 | tee "$log"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("$name")
		# what failed: pg_regress's diffs, and the TAP tests' server logs
		find "$work" -name regression.diffs -newer "$stamp" -print0 2>/dev/null |
			while IFS= read -r -d '' f; do echo "--- $f"; cat "$f"; done || true
		find "$work/tmp_check" -name '*.log' -print0 2>/dev/null |
			while IFS= read -r -d '' f; do echo "--- $f"; tail -n 60 "$f"; done || true
	fi
	# pg_regress: "name ... ok"/"... FAILED"; prove --verbose: "ok N"/"not ok N"
	tests_ok=$((tests_ok + $(grep -cE '\.\.\. ok|^ok [0-9]' "$log" || true)))
	tests_failed=$((tests_failed + $(grep -cE '\.\.\. FAILED|\.\.\. failed|^not ok [0-9]' "$log" || true)))
}

suite "pg_regress" installcheck ISOLATION= TAP_TESTS=
suite "isolation" installcheck REGRESS= TAP_TESTS=
suite "TAP" installcheck REGRESS= ISOLATION= PROVE_FLAGS=--verbose
suite "pgTAP" pgtapcheck
suite "sanitizers" sanitizecheck

echo
if [ "$failed" -ne 0 ]; then
	echo "failed suites: ${failures[*]}"
fi
echo "suites: $passed passed, $failed failed"
echo "tests: $tests_ok passed, $tests_failed failed"
[ "$failed" -eq 0 ]
