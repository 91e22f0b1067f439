#!/usr/bin/env bash
#
# test/portable_check.sh: the pg_regress and isolation suites against the
# portable edition, beside the C edition.
#
# Two throwaway servers: one with the C library preloaded and CREATE
# EXTENSION (as the suites run it), one that never loads it, where a
# database owner who is not a superuser ran the portable script.  Each
# pg_regress test of the list below runs against both, with psql's
# SHOW_CONTEXT off (the two editions raise the same errors from different
# places: a C function has no PL/pgSQL context lines), and the two outputs
# must be the same, but where test/regress/portable/NAME.diff documents a
# difference the portable edition has by design (doc/portable.md): then
# the diff between them must be exactly that one.  Each isolation spec of
# its list runs against the portable server and must give the spec's own
# expected output (isolationtester prints no context lines), or
# test/isolation/portable/NAME.out where that documents a difference.
# Each pgTAP file of test/pgtap (privileges, errors, schema) runs against
# both too, in a database "pgtap" of its own on each server (the portable
# one's installed by its owner, as the other) with pgTAP created in it,
# and the two outputs must be the same but for test/pgtap/portable/NAME.diff,
# as for pg_regress; where pgTAP is not installed they are reported skipped.
# Every test runs as the bootstrap superuser, as in the C edition's suites
# (the pgTAP files create roles and SET ROLE to them).
#
# Run from a built tree (make, make portable), as a user that may run
# initdb: bash test/portable_check.sh [TEST...] (make portablecheck).  With
# TEST, only those.  KEEP_TMP=1 keeps the outputs and prints where; a
# documented difference is written by copying the test's regress-NAME.diff
# (or pgtap-NAME.diff) from there, once each line of it is one
# doc/portable.md explains.  Exits non-zero if any test differs.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pg_config=${PG_CONFIG:-pg_config}
bindir=$("$pg_config" --bindir)
pgxs_dir=$(dirname "$("$pg_config" --pgxs)")/../..
pg_regress=$pgxs_dir/src/test/regress/pg_regress
pg_isolation_regress=$pgxs_dir/src/test/isolation/pg_isolation_regress
export PATH="$bindir:$PATH"

# The pg_regress tests whose subject the portable edition has; the others
# test what it lacks (the key type's operators and casts, the statistics,
# the cleanup worker, the CREATE TRIGGER check, CREATE
# EXTENSION and its updates, the planner hook, registry_begin_order's
# choice of statement order, which it shows in DEBUG lines that a PL/pgSQL
# function's own vary with the major).
regress_tests=(registry registry_errors recovery recovery_own_claim registry_http xactclaims
	inbox tokens locks registry_attempts registry_previous registry_max_wait
	idempotent_call forget_key outbox statemachine statemachine_limits version_guard trigger_paths)
# The isolation specs whose subject it has.
isolation_tests=(registry_begin_commit registry_read_first registry_begin_rollback registry_nowait
	registry_lease_takeover registry_expired_reclaim registry_finish_vs_begin
	registry_abandon_vs_begin inbox_race tokens_race registry_max_wait_bound xactclaims_order
	xactclaims_defer_race registry_default_wait_race registry_previous_race
	recovery_checkpoint_vs_takeover recovery_renew_vs_takeover forget_key_race outbox_relay_race
	outbox_ack_vs_lease outbox_order transition_race version_guard_race transition_partition_move)
# (registry_in_memory tests how the C edition holds a claim before its
# finish, in a lock space of its own: the portable edition writes it)
# The pgTAP files: all three (schema's differences are the catalog's
# documented ones: the key a domain, no extension, plain settings, the
# portable_ bodies).
pgtap_tests=(privileges errors schema)
if [ $# -gt 0 ]; then
	wanted=" $* "
	filter() { local t; for t in "$@"; do [[ $wanted == *" $t "* ]] && echo "$t"; done; }
	mapfile -t regress_tests < <(filter "${regress_tests[@]}")
	mapfile -t isolation_tests < <(filter "${isolation_tests[@]}")
	mapfile -t pgtap_tests < <(filter "${pgtap_tests[@]}")
fi

script=$(make -s -C "$top" PG_CONFIG="$pg_config" portable | tail -n 1)
work=$(mktemp -d)
trap 'for d in "$work"/data_*; do [ -d "$d" ] && pg_ctl -D "$d" -m immediate stop >/dev/null 2>&1; done; [ "${KEEP_TMP:-0}" = 1 ] && echo "outputs kept in $work" || rm -rf "$work"' EXIT
sock=$work/sock
mkdir -p "$sock"

# start_server EDITION PORT: a throwaway server, the C one with the library
start_server() {
	local data=$work/data_$1
	initdb -D "$data" -A trust --no-locale -E UTF8 >"$work/initdb_$1.log" 2>&1
	{
		echo "port = $2"
		echo "unix_socket_directories = '$sock'"
		echo "listen_addresses = ''"
		if [ "$1" = c ]; then
			cat "$top/test/idempotency.conf"
		else
			grep -v '^shared_preload_libraries' "$top/test/idempotency.conf"
		fi
	} >>"$data/postgresql.conf"
	pg_ctl -D "$data" -l "$work/server_$1.log" -w start >/dev/null
}

start_server c 54391
start_server portable 54392
psql_c() { psql -X -q -v ON_ERROR_STOP=1 -h "$sock" -p 54391 "$@"; }
psql_p() { psql -X -q -v ON_ERROR_STOP=1 -h "$sock" -p 54392 "$@"; }
psql_c -d postgres -c 'CREATE DATABASE regression' >/dev/null
psql_c -d regression -c 'CREATE EXTENSION idempotency' >/dev/null
psql_p -d postgres -c 'CREATE ROLE portable_owner LOGIN' -c 'CREATE DATABASE regression OWNER portable_owner' >/dev/null
psql_p -d regression -U portable_owner --single-transaction -f "$script" >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log"; exit 1; }

failed=0
passed=0

# compare KIND NAME DOCUMENTED: NAME's outputs of the two editions under
# $work/out_c_KIND and $work/out_portable_KIND, the same but for the
# documented difference DOCUMENTED (a file that may not exist)
compare() {
	local kind=$1 t=$2 documented=$3
	# (the hunks' line numbers left out: a documented difference
	# stays one when the test changes elsewhere)
	diff -U3 "$work/out_c_$kind/results/$t.out" "$work/out_portable_$kind/results/$t.out" |
		tail -n +3 | sed 's/^@@ .* @@$/@@/' >"$work/$kind-$t.diff" || true
	if { [ ! -s "$work/$kind-$t.diff" ] && [ ! -f "$documented" ]; } ||
		{ [ -f "$documented" ] && cmp -s "$work/$kind-$t.diff" "$documented"; }; then
		passed=$((passed + 1))
		echo "test portable $kind $t ... ok"
	else
		failed=$((failed + 1))
		echo "test portable $kind $t ... FAILED: the portable edition answers differently"
		if [ -f "$documented" ]; then
			diff -u "$documented" "$work/$kind-$t.diff" | head -n 200 || true
		else
			head -n 200 "$work/$kind-$t.diff"
		fi
	fi
}

# run_both KIND DATABASE INPUTDIR TEST...: pg_regress on both servers, the
# outputs under $work/out_c_KIND and $work/out_portable_KIND (compared
# afterwards, so that its own verdict against INPUTDIR's expected files
# does not count)
run_both() {
	local kind=$1 db=$2 inputdir=$3 edition port
	shift 3
	for edition in c portable; do
		port=54391
		[ $edition = portable ] && port=54392
		mkdir -p "$work/out_${edition}_$kind"
		(cd "$top" && "$pg_regress" --use-existing --host="$sock" --port=$port --dbname="$db" \
			--inputdir="$inputdir" --outputdir="$work/out_${edition}_$kind" "$@") \
			>"$work/${kind}_$edition.log" 2>&1 || true
	done
}

# the regression tests, with SHOW_CONTEXT off, on both servers
if [ ${#regress_tests[@]} -gt 0 ]; then
	mkdir -p "$work/in/sql" "$work/in/expected"
	for t in "${regress_tests[@]}"; do
		{ echo '\set SHOW_CONTEXT never'; cat "$top/test/regress/sql/$t.sql"; } >"$work/in/sql/$t.sql"
		: >"$work/in/expected/$t.out"
	done
	run_both regress regression "$work/in" "${regress_tests[@]}"
	for t in "${regress_tests[@]}"; do
		compare regress "$t" "$top/test/regress/portable/$t.diff"
	done
fi

# the pgTAP files, on both servers, each in a database "pgtap" where pgTAP
# is created beside the edition
if [ ${#pgtap_tests[@]} -gt 0 ]; then
	if [ "$(psql_c -d postgres -At -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'pgtap'")" = 0 ]; then
		for t in "${pgtap_tests[@]}"; do
			echo "test portable pgtap $t ... skipped: pgTAP is not installed"
		done
	else
		psql_c -d postgres -c 'CREATE DATABASE pgtap' >/dev/null
		psql_c -d pgtap -c 'CREATE EXTENSION idempotency' -c 'CREATE EXTENSION pgtap' >/dev/null
		psql_p -d postgres -c 'CREATE DATABASE pgtap OWNER portable_owner' >/dev/null
		psql_p -d pgtap -U portable_owner --single-transaction -f "$script" >"$work/install_pgtap.log" 2>&1 ||
			{ cat "$work/install_pgtap.log"; exit 1; }
		psql_p -d pgtap -c 'CREATE EXTENSION pgtap' >/dev/null
		run_both pgtap pgtap "$top/test/pgtap" "${pgtap_tests[@]}"
		for t in "${pgtap_tests[@]}"; do
			# (the C edition's output is its expected one, as in make
			# pgtapcheck: a file cut short in both is no comparison)
			if ! cmp -s "$top/test/pgtap/expected/$t.out" "$work/out_c_pgtap/results/$t.out"; then
				failed=$((failed + 1))
				echo "test portable pgtap $t ... FAILED: the C edition's output is not test/pgtap/expected/$t.out"
				diff -U3 "$top/test/pgtap/expected/$t.out" "$work/out_c_pgtap/results/$t.out" | head -n 200 || true
				continue
			fi
			compare pgtap "$t" "$top/test/pgtap/portable/$t.diff"
		done
	fi
fi

# the isolation specs, on the portable server
if [ ${#isolation_tests[@]} -gt 0 ]; then
	mkdir -p "$work/iso/specs" "$work/iso/expected" "$work/out_iso"
	for t in "${isolation_tests[@]}"; do
		cp "$top/test/isolation/specs/$t.spec" "$work/iso/specs/"
		if [ -f "$top/test/isolation/portable/$t.out" ]; then
			cp "$top/test/isolation/portable/$t.out" "$work/iso/expected/$t.out"
		else
			cp "$top/test/isolation/expected/$t.out" "$work/iso/expected/$t.out"
		fi
	done
	(cd "$top" && "$pg_isolation_regress" --use-existing --host="$sock" --port=54392 --dbname=regression \
		--inputdir="$work/iso" --outputdir="$work/out_iso" "${isolation_tests[@]}") \
		>"$work/isolation.log" 2>&1 || true
	for t in "${isolation_tests[@]}"; do
		if cmp -s "$work/iso/expected/$t.out" "$work/out_iso/results/$t.out"; then
			passed=$((passed + 1))
			echo "test portable isolation $t ... ok"
		else
			failed=$((failed + 1))
			echo "test portable isolation $t ... FAILED"
			diff -U3 "$work/iso/expected/$t.out" "$work/out_iso/results/$t.out" | head -n 200 || true
		fi
	done
fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
