/*-------------------------------------------------------------------------
 *
 * hints.c
 *	  A hint at grant_usage() on permission errors for the extension's API.
 *
 * A role that was never granted the API gets core's "permission denied for
 * function idempotent_begin" before any of our code runs, with nothing to
 * say how to fix it.  With idempotency.permission_hints on (it is off by
 * default: a hook that edits core's error reports in every session of a
 * shared server is no default to impose), an emit_log_hook adds a hint to
 * exactly those errors:
 * SQLSTATE 42501, no hint yet, and core's aclcheck_error message (its
 * untranslated format in message_id, the name in the message as sent) for
 * one of the functions or views that grant_usage() grants (the view
 * application_api, as the build writes it out).  Everything else
 * about the error stays as it was.  Core's comment on emit_log_hook supports
 * only turning output_to_server off; a hint set here is nevertheless what
 * the client receives (PostgreSQL 15 to 18 send the same ErrorData after the
 * hook), and a change there would only lose the hint, never the error.
 *
 * The hook sees only what is in the message: the object's name, not its
 * schema.  A function of another schema with one of these names gets the
 * hint too; the names are distinctive enough that this is rare, and the
 * hint says which extension it is about.  The hook runs no catalog lookup:
 * it is called while an error is being reported, in every process.
 *
 * Core calls emit_log_hook only for messages that go to the server log, so
 * the hint needs log_min_messages at "error" or below (the default is
 * "warning"); and it needs the library loaded before the error, which
 * shared_preload_libraries guarantees (without it, the library is loaded
 * only if something of ours, the key type's input say, ran first).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/admin/hints.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/elog.h"

#include "admin/hints.h"
#include "base/idempotency.h"

/*
 * What grant_usage() grants, by the name core puts in its message: the
 * view application_api lists it, and the build writes its rows out for us.
 */
#define API_FUNCTION(name) name,
#define API_VIEW(name)
static const char *const hint_functions[] = {
#include "application_api.def"
	NULL
};

#undef API_FUNCTION
#undef API_VIEW
#define API_FUNCTION(name)
#define API_VIEW(name) name,
static const char *const hint_views[] = {
#include "application_api.def"
	NULL
};

#undef API_FUNCTION
#undef API_VIEW

static emit_log_hook_type prev_emit_log_hook = NULL;

/*
 * hints_match
 *		Whether message is core's format (one %s) filled with one of names.
 */
static bool
hints_match(const char *message, const char *format, const char *const *names)
{
	const char *arg = strstr(format, "%s");
	size_t		prefix_len;
	size_t		suffix_len;
	size_t		len = strlen(message);

	if (arg == NULL)
		return false;
	prefix_len = arg - format;
	suffix_len = strlen(arg + 2);
	if (len <= prefix_len + suffix_len ||
		strncmp(message, format, prefix_len) != 0 ||
		strcmp(message + len - suffix_len, arg + 2) != 0)
		return false;

	for (int i = 0; names[i] != NULL; i++)
		if (strlen(names[i]) == len - prefix_len - suffix_len &&
			strncmp(message + prefix_len, names[i], len - prefix_len - suffix_len) == 0)
			return true;
	return false;
}

/*
 * idempotency_emit_log_hook
 *		Add the hint to a permission error on the API, then chain.
 */
static void
idempotency_emit_log_hook(ErrorData *edata)
{
	const char *const *names = NULL;

	/* message_id is the untranslated format, message the text as sent */
	if (idempotency_permission_hints && edata->elevel == ERROR &&
		edata->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE &&
		edata->hint == NULL && edata->message_id != NULL && edata->message != NULL)
	{
		if (strcmp(edata->message_id, "permission denied for function %s") == 0)
			names = hint_functions;
		else if (strcmp(edata->message_id, "permission denied for view %s") == 0)
			names = hint_views;
	}

	if (names != NULL &&
		hints_match(edata->message,
					dgettext(PG_TEXTDOMAIN("postgres"), edata->message_id), names))
	{
		/* EmitErrorReport runs us in the error's own memory context */
		edata->hint = pstrdup("If it belongs to extension \"idempotency\", an administrator "
							  "grants it with SELECT idempotency.grant_usage('role_name').");
	}

	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * IdempotencyHintsInit
 *		Install the hook; called once from _PG_init.
 */
void
IdempotencyHintsInit(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = idempotency_emit_log_hook;
}
