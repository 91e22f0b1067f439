#!/usr/bin/env bash
#
# Runs every test suite: pg_regress (test/regress), isolation specs
# (test/isolation), TAP tests (test/tap), pgTAP (test/pgtap), the regression
# and isolation suites against the portable edition beside the C edition
# (test/portable_check.sh), the regression and
# isolation suites again against a build with AddressSanitizer and
# UndefinedBehaviorSanitizer (test/sanitize.sh), each on throwaway instances
# that pg_regress or PostgreSQL::Test::Cluster start themselves, and the
# format suite (make indentcheck): the C sources' formatting (test/indent.sh,
# pgindent's rules), SPI only in the frame (test/frame_check.sh), one version
# everywhere (test/version_check.sh) and the PGXN archive (test/dist_check.sh).
# Run as root on Debian 12: it installs the packages it needs, builds with
# warnings as errors and installs the extension first.  With
# IDEMPOTENCY_INSTALLED=1 it builds nothing: the suites run against the
# extension that the Debian package postgresql-$PG_MAJOR-idempotency
# installed, after checking that dpkg owns its files and that they are this
# tree's (check_package in test/lib.sh); the sanitizer and format suites,
# which build from the source, are left to the run from source.
#
# Quiet unless something fails: one line per suite, and a failed suite's
# whole log (with pg_regress's diffs and the TAP servers' logs).  The counts
# at the end are honest about their units: test files (a pg_regress or
# isolation test, a TAP or pgTAP file), assertions (TAP and pgTAP only; a
# pg_regress file compares its whole output), suites.  The last line,
# "N passed, M failed", counts test files; CI reads it.  A suite that fails
# outside any test file (a build or set-up error) counts as one failed file.
# Exits non-zero if anything failed.  The temporary copy of the tree is
# removed on exit (kept if KEEP_TMP=1).
#
# Adding a suite: "suite NAME MAKE-ARGS..." runs make MAKE-ARGS in the copy
# as postgres and parses its output; "suite_skip NAME REASON" reports one
# that cannot run here.  A suite whose TAP files all skip is reported as
# skipped too.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/test/lib.sh"

# shellcheck disable=SC2046
install_packages $(suite_packages)
# the sanitizer suite runs on this machine's own major (the matrix's roots
# run the others), built from the source with the runtimes of this
# machine's gcc; so do the HTTP service's and the drivers' tests, which skip
# in the roots
from_source=1
[ "${IDEMPOTENCY_INSTALLED:-0}" = 1 ] && from_source=0
if [ "$PG_MAJOR" = 15 ] && [ "$from_source" = 1 ]; then
	# shellcheck disable=SC2046
	install_packages libasan8 libubsan1 pg-bsd-indent $(client_packages)
fi
use_extension "$top"
# pg_tle, for test/tap/054_pg_tle.pl, from its source where PG_TLE_SRC names
# one (no registry these machines reach has it); the test says it is
# skipped otherwise
if [ -n "${PG_TLE_SRC:-}" ] && [ ! -f "$(pg_config --sharedir)/extension/pg_tle.control" ]; then
	bash "$top/test/pg_tle.sh" "$PG_TLE_SRC" "$(command -v pg_config)"
fi

work=$(private_copy "$top")
trap '[ "${KEEP_TMP:-0}" = 1 ] || rm -rf "$work"' EXIT
echo "==> running the suites in $work"

passed=0
failed=0
skipped=0
failures=()
files_ok=0
files_failed=0
files_skipped=0
asserts_ok=0
asserts_failed=0

# count PATTERN FILE...: lines matching an extended regex, 0 if none
count() {
	local pattern=$1
	shift
	cat "$@" 2>/dev/null | grep -cE "$pattern" || true
}

# report STATUS NAME DETAIL: the one line a suite gets
report() {
	printf '  %-8s %-14s %s\n' "$1" "$2" "$3"
}

# suite_skip NAME REASON: a suite that cannot run here
suite_skip() {
	skipped=$((skipped + 1))
	report skipped "$1" "$2"
}

# suite NAME MAKE-ARGS...: run one suite, count its files and assertions,
# print one line, and the whole log if it failed
suite() {
	local name=$1
	shift
	local log="$work/suite-${name// /_}.log"
	local stamp="$work/.suite-start"
	local started=$SECONDS status=0
	touch "$stamp"
	as_postgres make -C "$work" -s "$@" >"$log" 2>&1 || status=$?
	local seconds=$((SECONDS - started))

	# pg_regress and isolation (and pgTAP through pg_regress): a line per
	# file, "test name ... ok" up to PostgreSQL 15, "ok 1 - name 12 ms" after
	local f_ok f_failed f_skipped a_ok a_failed
	f_ok=$(count '\.\.\. ok( |$)|^ok [0-9]+ +[-+] .* [0-9]+ ms$' "$log")
	f_failed=$(count '\.\.\. (FAILED|failed)|^not ok [0-9]+ +[-+] .* [0-9]+ ms' "$log")
	# prove: "Files=N, Tests=M", a summary line per failed file, "skipped:"
	local tap_files tap_tests tap_failed_files tap_failed_tests
	tap_files=$(sed -nE 's/^Files=([0-9]+), Tests=.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
	tap_tests=$(sed -nE 's/^Files=[0-9]+, Tests=([0-9]+).*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
	tap_failed_files=$(count '^[^ ]+\.(pl|t) +\(Wstat: ' "$log")
	tap_failed_tests=$(sed -nE 's/^[^ ]+\.(pl|t) +\(Wstat: .* Failed: ([0-9]+)\)$/\2/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
	f_skipped=$(count '(\.\. |^)skipped: ' "$log")
	f_ok=$((f_ok + tap_files - tap_failed_files - f_skipped))
	f_failed=$((f_failed + tap_failed_files))
	a_ok=$((tap_tests - tap_failed_tests))
	a_failed=$tap_failed_tests
	# pgTAP: the "ok N" lines of the outputs this suite wrote
	local outputs
	outputs=$(find "$work" -path '*pgtap*/results/*.out' -newer "$stamp" 2>/dev/null || true)
	if [ -n "$outputs" ]; then
		# shellcheck disable=SC2086
		a_ok=$((a_ok + $(count '^ok [0-9]+( |$)' $outputs)))
		# shellcheck disable=SC2086
		a_failed=$((a_failed + $(count '^not ok [0-9]+( |$)' $outputs)))
		# a file that stopped before its plan (an error aborted its
		# transaction) fails, even if its expected output took that in
		local out planned ran
		for out in $outputs; do
			planned=$(sed -nE 's/^1\.\.([0-9]+)$/\1/p' "$out" | head -n 1)
			ran=$(count '^(not )?ok [0-9]+( |$)' "$out")
			if [ -z "$planned" ] || [ "$planned" -ne "$ran" ]; then
				echo "$out: planned ${planned:-no} tests, ran $ran" >>"$log"
				status=1
				f_failed=$((f_failed + 1))
			fi
		done
	fi
	files_skipped=$((files_skipped + f_skipped))

	if [ "$status" -eq 0 ] && [ "$f_failed" -eq 0 ] && [ "$f_ok" -eq 0 ] && [ "$f_skipped" -gt 0 ]; then
		skipped=$((skipped + 1))
		report skipped "$name" "all $f_skipped test files skipped: $(sed -nE 's/.*skipped: //p' "$log" | head -n 1)"
		return 0
	fi
	files_ok=$((files_ok + f_ok))
	asserts_ok=$((asserts_ok + a_ok))
	asserts_failed=$((asserts_failed + a_failed))
	local extra=""
	if [ "$f_skipped" -gt 0 ]; then
		extra=", $f_skipped skipped"
	fi
	if [ "$status" -eq 0 ] && [ "$f_failed" -eq 0 ]; then
		passed=$((passed + 1))
		if [ $((a_ok + a_failed)) -gt 0 ]; then
			report ok "$name" "$f_ok files$extra, $a_ok assertions ($seconds s)"
		else
			report ok "$name" "$f_ok files$extra ($seconds s)"
		fi
		return 0
	fi

	failed=$((failed + 1))
	failures+=("$name")
	# a failure outside any test file still counts as one
	if [ "$f_failed" -eq 0 ]; then
		f_failed=1
	fi
	files_failed=$((files_failed + f_failed))
	local detail="files: $f_ok passed, $f_failed failed$extra"
	if [ $((a_ok + a_failed)) -gt 0 ]; then
		detail="$detail; assertions: $a_ok passed, $a_failed failed"
	fi
	report FAILED "$name" "$detail (make exit code $status, $seconds s)"
	echo "----- $name: log"
	cat "$log"
	# what failed: pg_regress's diffs, and the TAP tests' server logs
	find "$work" -name regression.diffs -newer "$stamp" -print0 2>/dev/null |
		while IFS= read -r -d '' f; do echo "----- $f"; cat "$f"; done || true
	find "$work/tmp_check" -name '*.log' -newer "$stamp" -print0 2>/dev/null |
		while IFS= read -r -d '' f; do echo "----- $f (last 60 lines)"; tail -n 60 "$f"; done || true
	echo "----- end of $name"
	# what failed, once more in a few lines: the logs above can be long,
	# and a reader of the output's end (CI's) should see which file and why
	grep -E '^not ok |^#   Failed test|^#   at |^# +(got|expected):|^[^ ]+\.(pl|t) +\(Wstat: |^Failed [0-9]+/|\.\.\. (FAILED|failed)|planned .* tests, ran ' \
		"$log" 2>/dev/null | head -n 40 | sed "s/^/  $name: /" >>"$work/what-failed" || true
}

suite "pg_regress" installcheck ISOLATION= TAP_TESTS=
suite "isolation" installcheck REGRESS= TAP_TESTS=
suite "TAP" installcheck REGRESS= ISOLATION= PROVE_FLAGS=--verbose
suite "pgTAP" pgtapcheck
suite "portable" portablecheck
if [ "$from_source" = 0 ]; then
	suite_skip "sanitizers" "they build from the source: run with the build from source on PostgreSQL 15"
	suite_skip "format" "checked with the build from source on PostgreSQL 15"
elif [ "$PG_MAJOR" = 15 ]; then
	suite "sanitizers" sanitizecheck
	suite "format" indentcheck
else
	suite_skip "sanitizers" "run on PostgreSQL 15, the machine's own major"
	suite_skip "format" "checked on PostgreSQL 15, whose headers give the typedef names"
fi

# Citus (test/tap/citus): a coordinator and two workers, only where Citus is
# installed in the PostgreSQL under test; otherwise said so, not hidden
citus_so="$(pg_config --pkglibdir)/citus.so"
if [ -f "$citus_so" ]; then
	suite "Citus" installcheck REGRESS= ISOLATION= PROVE_TESTS='test/tap/citus/*.pl' PROVE_FLAGS=--verbose
else
	suite_skip "Citus" "Citus is not installed ($citus_so is missing; see doc/scaling-out.md)"
fi

echo
if [ "$failed" -ne 0 ]; then
	if [ -s "$work/what-failed" ]; then
		echo "what failed:"
		cat "$work/what-failed"
	fi
	echo "failed suites: ${failures[*]}"
fi
echo "suites: $passed passed, $failed failed, $skipped skipped"
echo "files: $files_ok passed, $files_failed failed, $files_skipped skipped"
echo "assertions (TAP and pgTAP): $asserts_ok passed, $asserts_failed failed"
echo "$files_ok passed, $files_failed failed"
[ "$failed" -eq 0 ]
