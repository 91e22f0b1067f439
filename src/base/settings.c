/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The extension's settings (GUCs), defined whenever the library loads.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/base/settings.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "base/compat.h"
#include "base/idempotency.h"

/* Largest response, in kilobytes, that idempotent_finish stores. */
int			idempotency_max_response_size = 1024;

/* Background cleanup: seconds between passes (0: off), rows per batch ... */
int			idempotency_cleanup_interval = 60;
int			idempotency_cleanup_batch_size = 10000;

/* ... at most this many rows a second (0: no cap), as this role. */
int			idempotency_cleanup_max_rows_per_second = 10000;
char	   *idempotency_cleanup_role = NULL;

/* How long state history rows are kept, in seconds. */
int			idempotency_history_ttl = 30 * 24 * 3600;

/* Whether permission errors on the API carry a hint at grant_usage(). */
bool		idempotency_permission_hints = false;

int			idempotency_outbox_delivery = OUTBOX_DELIVERY_RELAY;

/* idempotent_begin's wait when the call names none, in ms (registry/begin.c) */
int			idempotency_max_wait = 5000;

/* which claims may commit unfinished (registry/begin.c, registry/xactclaims.c) */
int			idempotency_commit_rule = COMMIT_RULE_EXTERNAL_REQUIRED;

static const struct config_enum_entry commit_rule_options[] = {
	{"external_required", COMMIT_RULE_EXTERNAL_REQUIRED, false},
	{"lease_is_external", COMMIT_RULE_LEASE_IS_EXTERNAL, false},
	{NULL, 0, false}
};

static const struct config_enum_entry outbox_delivery_options[] = {
	{"relay", OUTBOX_DELIVERY_RELAY, false},
	{"logical", OUTBOX_DELIVERY_LOGICAL, false},
	{NULL, 0, false}
};

/*
 * IdempotencySettingsInit
 *		Define the GUCs; from _PG_init.
 */
void
IdempotencySettingsInit(void)
{
	DefineCustomIntVariable("idempotency.max_response_size",
							"Sets the largest response that idempotent_finish stores.",
							"A larger response is rejected, so that a runaway "
							"result cannot bloat the registry.",
							&idempotency_max_response_size,
							1024,
							1,
							MAX_KILOBYTES,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.cleanup_interval",
							"Sets the time between two passes of the background cleanup.",
							"Zero turns the background cleanup off.",
							&idempotency_cleanup_interval,
							60,
							0,
							INT_MAX / 1000,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.cleanup_batch_size",
							"Sets how many expired records one cleanup transaction deletes.",
							NULL,
							&idempotency_cleanup_batch_size,
							10000,
							1,
							INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.cleanup_max_rows_per_second",
							"Sets the most expired records the background cleanup deletes per second.",
							"Zero means no limit.",
							&idempotency_cleanup_max_rows_per_second,
							10000,
							0,
							INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("idempotency.cleanup_role",
							   "Sets the role the background cleanup connects as.",
							   "Empty means the bootstrap superuser.  The role needs only "
							   "LOGIN and CONNECT on each database.",
							   &idempotency_cleanup_role,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.history_ttl",
							"Sets how long state history rows are kept before the cleanup removes them.",
							NULL,
							&idempotency_history_ttl,
							30 * 24 * 3600,
							1,
							INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("idempotency.permission_hints",
							 "Adds a hint at grant_usage() to permission errors on the extension's API.",
							 "Off by default: it changes core's error reports, in every "
							 "session of the server.",
							 &idempotency_permission_hints,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.max_wait",
							"Sets how long idempotent_begin waits for a concurrent claim when no max_wait is passed.",
							"When it runs out, the answer is in_progress.  -1 waits "
							"as long as it takes (lock_timeout still bounds it); "
							"0 does not wait, as wait => false.",
							&idempotency_max_wait,
							5000,
							-1,
							INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("idempotency.outbox_delivery",
							 "Sets how messages sent with outbox_send reach their consumers.",
							 "relay: relays fetch and acknowledge them; logical: each is "
							 "written as a transactional logical decoding message, for "
							 "change data capture, and kept only as delivered.",
							 &idempotency_outbox_delivery,
							 OUTBOX_DELIVERY_RELAY,
							 outbox_delivery_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * USERSET: the rule protects the application's own writes, and a client
	 * written for 1.0 must be able to keep 1.0's rule for itself (SET, SET
	 * LOCAL, ALTER ROLE) while the operator rolls the update out.
	 */
	DefineCustomEnumVariable("idempotency.commit_rule",
							 "Sets which claims of idempotent_begin may commit before their finish.",
							 "external_required: only those taken with external => true; "
							 "a transaction that commits with another claim unfinished fails. "
							 "lease_is_external: every claim but a deferred one, bounded by "
							 "its lease, as in version 1.0, for clients written for 1.0 "
							 "while the extension is updated.",
							 &idempotency_commit_rule,
							 COMMIT_RULE_EXTERNAL_REQUIRED,
							 commit_rule_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	IdempotencyReserveGUCPrefix("idempotency");
}
