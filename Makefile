# Makefile for the idempotency extension (PGXS)

EXTENSION = idempotency
# The version is written once, as the control file's default_version (the
# SQL objects' version, X.Y); the release is X.Y.0.  The library is built
# with it, and test/version_check.sh checks every other place that names it.
EXTVERSION := $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" $(EXTENSION).control)
DISTVERSION = $(EXTVERSION).0

MODULE_big = idempotency
# the sources' own headers are named by their folder: "frame/sqlcall.h"
PG_CPPFLAGS = -I$(srcdir)/src -Isql/built -DIDEMPOTENCY_LIBRARY_VERSION='"$(EXTVERSION)"'
OBJS = \
	src/init.o \
	src/cache_invalidate.o \
	src/base/settings.o \
	src/base/sha256.o \
	src/base/shmem.o \
	src/base/stats.o \
	src/objects/citus_metadata.o \
	src/objects/extension.o \
	src/frame/owner.o \
	src/frame/sqlcall.o \
	src/key/args.o \
	src/key/key.o \
	src/key/keycmp.o \
	src/key/keyfuncs.o \
	src/key/locks.o \
	src/distributed/delegate.o \
	src/distributed/planner_guard.o \
	src/distributed/shards.o \
	src/messages/idset.o \
	src/messages/inbox.o \
	src/messages/outbox.o \
	src/messages/tokens.o \
	src/registry/citus_records.o \
	src/registry/http_headers.o \
	src/registry/recovery.o \
	src/registry/registry.o \
	src/registry/begin.o \
	src/registry/finish.o \
	src/registry/fingerprint.o \
	src/registry/lookup.o \
	src/registry/result.o \
	src/registry/xactclaims.o \
	src/machines/history.o \
	src/machines/statemachine.o \
	src/machines/transition.o \
	src/machines/trigger.o \
	src/machines/trigger_ddl.o \
	src/machines/version_guard.o \
	src/expiry/citus_cleanup.o \
	src/expiry/cleanup.o \
	src/expiry/sweep.o \
	src/expiry/worker.o \
	src/admin/hints.o \
	src/admin/roles.o

# The install and update scripts, written by sql/include.pl from their
# sources sql/$(EXTENSION)--*.sql.in and the object files they include
# (sql/functions/NAME/VERSION.sql, sql/views/NAME/VERSION.sql, and
# sql/checks/NAME/VERSION.sql: statements that more than one script runs).
SQL_SOURCES = $(wildcard sql/$(EXTENSION)--*.sql.in)
SQL_OBJECTS = $(wildcard sql/functions/*/*.sql sql/views/*/*.sql sql/checks/*/*.sql)
DATA_built = $(patsubst sql/%.sql.in,sql/built/%.sql,$(SQL_SOURCES))

# The tests, each kind in one place under test/: regress (pg_regress),
# isolation, tap (prove; citus/ the Citus suite), pgtap.  pg_regress and
# the isolation specs run on throwaway instances with the library preloaded
# (test/idempotency.conf), so they need no configured server.

# Plain regression tests: test/regress/sql and test/regress/expected.
REGRESS = extension_catalog extension_update key keycmp keyfuncs registry registry_errors recovery recovery_own_claim registry_http xactclaims \
	registry_begin_order owner_isolation roles hints cleanup sweep statemachine inbox tokens outbox \
	locks version_guard stats extension_hostile error_contexts statemachine_limits key_printable \
	trigger_ddl trigger_paths registry_attempts owner registry_previous registry_max_wait planner_guard \
	idempotent_call forget_key
REGRESS_OPTS = --inputdir=test/regress --outputdir=test/regress \
	--temp-instance=./tmp_check_regress --temp-config=test/idempotency.conf \
	--encoding=UTF8 --no-locale --load-extension=idempotency

# Isolation specs: test/isolation/specs and test/isolation/expected.
ISOLATION = registry_begin_commit registry_read_first registry_begin_rollback registry_nowait \
	registry_lease_takeover registry_expired_reclaim registry_finish_vs_begin \
	registry_abandon_vs_begin cleanup_vs_claim transition_race inbox_race version_guard_race \
	tokens_race registry_max_wait_bound xactclaims_order xactclaims_defer_race locks_key_space \
	transition_partition_move outbox_relay_race outbox_ack_vs_lease outbox_order owner_locks \
	registry_default_wait_race registry_previous_race recovery_checkpoint_vs_takeover \
	recovery_renew_vs_takeover registry_in_memory forget_key_race
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=test/isolation --temp-instance=./tmp_check_iso \
	--temp-config=test/idempotency.conf --load-extension=idempotency

# TAP tests: test/tap (the Citus suite, test/tap/citus, runs where Citus is
# installed: PROVE_TESTS='test/tap/citus/*.pl').
TAP_TESTS = 1
PROVE_TESTS = test/tap/*.pl

# pgTAP files: test/pgtap/sql and test/pgtap/expected, run by pg_regress.
PGTAP = schema privileges errors

EXTRA_CLEAN = sql/built tmp_check_regress tmp_check_iso tmp_check_pgtap output_iso \
	$(foreach d,test/regress test/isolation test/pgtap,$(d)/results $(d)/log \
		$(d)/regression.diffs $(d)/regression.out) \
	$(EXTENSION)-*.zip

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# the TAP tests' shared Perl modules
PG_PROVE_FLAGS += -I $(srcdir)/test/tap/perl

# PGXS tracks no header dependencies, and an enum or struct that changes
# under a stale object is a crash: every object depends on every header.
$(OBJS): $(wildcard src/*.h src/*/*.h)

# What grant_usage() grants, for the C code that names it: from the view
# application_api, the one list (sql/api_list.pl).
sql/built/application_api.def: $(wildcard sql/views/application_api/*.sql) sql/api_list.pl
	@mkdir -p sql/built
	perl sql/api_list.pl sql/views/application_api $@

# (the JIT's bitcode of hints.c includes it too)
src/admin/hints.o src/admin/hints.bc: sql/built/application_api.def

# A released script that comes out different is refused (sql/released.sha256).
sql/built/%.sql: sql/%.sql.in $(SQL_OBJECTS) sql/include.pl sql/released.sha256
	@mkdir -p sql/built
	perl sql/include.pl sql/released.sha256 $< $@

# The portable edition, for servers where the library cannot be loaded: one
# script a database owner runs (doc/portable.md), written from the same
# sources; its path is the last line of the output.
PORTABLE_SCRIPT = sql/built/$(EXTENSION)-portable--$(EXTVERSION).sql

$(PORTABLE_SCRIPT): $(SQL_SOURCES) $(SQL_OBJECTS) sql/include.pl sql/released.sha256
	@mkdir -p sql/built
	perl sql/include.pl --edition=portable sql/released.sha256 $(SQL_SOURCES) $@

# The portable edition began at 1.2: each update script from a version
# since then has a portable counterpart, which the portable edition's owner
# runs, and a pg_tle one, which a pgtle_admin runs before ALTER EXTENSION
# UPDATE (sql/built/idempotency-portable--A--B.sql, ...-pgtle--A--B.sql).
PORTABLE_SINCE = 1.2
PORTABLE_STEPS := $(shell perl -e '$$since = sprintf("%05d%05d", split /\./, shift); \
	for (@ARGV) { my ($$from, $$to) = /--(\d+\.\d+)--(\d+\.\d+)\.sql\.in$$/ or next; \
		print "$$from--$$to\n" if sprintf("%05d%05d", split /\./, $$from) ge $$since }' \
	$(PORTABLE_SINCE) $(SQL_SOURCES))
PORTABLE_UPDATES = $(foreach s,$(PORTABLE_STEPS),sql/built/$(EXTENSION)-portable--$(s).sql)
PGTLE_UPDATES = $(foreach s,$(PORTABLE_STEPS),sql/built/$(EXTENSION)-pgtle--$(s).sql)

sql/built/$(EXTENSION)-portable--%.sql: sql/$(EXTENSION)--%.sql.in $(SQL_OBJECTS) sql/include.pl sql/released.sha256
	@mkdir -p sql/built
	perl sql/include.pl --edition=portable sql/released.sha256 $< $@

portable: $(PORTABLE_SCRIPT) $(PORTABLE_UPDATES)
	@echo $(abspath $(PORTABLE_SCRIPT))

# The same for pg_tle: the tle edition's script, wrapped in
# pgtle.install_extension (sql/pgtle.pl); a pgtle_admin runs it, and then
# CREATE EXTENSION idempotency works without the library (doc/portable.md).
TLE_SCRIPT = sql/built/$(EXTENSION)-tle--$(EXTVERSION).sql
PGTLE_SCRIPT = sql/built/$(EXTENSION)-pgtle--$(EXTVERSION).sql

$(TLE_SCRIPT): $(SQL_SOURCES) $(SQL_OBJECTS) sql/include.pl sql/released.sha256
	@mkdir -p sql/built
	perl sql/include.pl --edition=tle sql/released.sha256 $(SQL_SOURCES) $@

$(PGTLE_SCRIPT): $(TLE_SCRIPT) sql/pgtle.pl $(EXTENSION).control
	perl sql/pgtle.pl $(EXTENSION).control $(EXTVERSION) $(TLE_SCRIPT) > $@

sql/built/$(EXTENSION)-tle--%.sql: sql/$(EXTENSION)--%.sql.in $(SQL_OBJECTS) sql/include.pl sql/released.sha256
	@mkdir -p sql/built
	perl sql/include.pl --edition=tle sql/released.sha256 $< $@

sql/built/$(EXTENSION)-pgtle--%.sql: sql/built/$(EXTENSION)-tle--%.sql sql/pgtle.pl $(EXTENSION).control
	perl sql/pgtle.pl $(EXTENSION).control $* $< > $@

tle: $(PGTLE_SCRIPT) $(PGTLE_UPDATES)
	@echo $(abspath $(PGTLE_SCRIPT))

.PHONY: prove_installcheck pgtapcheck sanitizecheck indentcheck dist deb portable portablecheck tle

# The pg_regress and isolation suites against the portable edition, beside
# the C edition (test/portable_check.sh), on throwaway servers of their own
portablecheck: $(PORTABLE_SCRIPT)
	PG_CONFIG='$(PG_CONFIG)' bash test/portable_check.sh

# The TAP tests alone (PGXS runs them last in installcheck), each test
# starting its own servers: make prove_installcheck PROVE_TESTS=test/tap/010_readme.pl
prove_installcheck:
	$(prove_installcheck)

pgtapcheck:
	$(pg_regress_installcheck) --inputdir=test/pgtap --outputdir=test/pgtap \
		--temp-instance=./tmp_check_pgtap --temp-config=test/idempotency.conf \
		--load-extension=idempotency --load-extension=pgtap \
		$(PGTAP)

# The regression and isolation suites against a build with AddressSanitizer
# and UndefinedBehaviorSanitizer, in a private copy of the installation.
sanitizecheck:
	bash test/sanitize.sh '$(PG_CONFIG)'

# The format suite: the C sources formatted as pgindent formats them
# (test/indent.sh), SPI only in the frame (test/frame_check.sh), includes
# that point down the floors (test/layers_check.sh), one
# version everywhere (test/version_check.sh), and an archive of the tree
# that PGXN would take (test/dist_check.sh).
indentcheck:
	bash test/indent.sh
	bash test/frame_check.sh
	bash test/layers_check.sh
	bash test/version_check.sh
	bash test/dist_check.sh

# The release's archive for PGXN, of the commit HEAD (not of changes not yet
# committed): NAME-VERSION.zip in DIST_DIR, every file under NAME-VERSION/
# (VERSION as META.json has it), checked by test/dist_check.pl.  The last
# line printed is the archive's path.
DIST_DIR = .
DIST = $(DIST_DIR)/$(EXTENSION)-$(DISTVERSION).zip
dist:
	rm -f $(DIST)
	git archive --format zip --prefix=$(EXTENSION)-$(DISTVERSION)/ --output $(DIST) HEAD
	perl test/dist_check.pl $(DIST) $(DISTVERSION)
	@echo $(abspath $(DIST))

# Debian packages, postgresql-MAJOR-idempotency for each of DEB_MAJORS, each
# built in a root file system of the Debian release that ships that major
# (test/packages.sh; as root): build/debian/*.deb
DEB_MAJORS ?= 15 17 18
deb:
	bash test/packages.sh $(DEB_MAJORS)
