/*-------------------------------------------------------------------------
 *
 * roles.c
 *	  Records belong to a role name: forget_role() and rename_owner(), the
 *	  administrator's tools for DROP ROLE and ALTER ROLE ... RENAME; and
 *	  forget_key(), the reset of one key.
 *
 * Every registry record, inbox entry, token and outbox message is stored
 * under the name of the role that wrote it (Citus rule 6: a name survives
 * dump and restore, pg_upgrade and Citus; an OID does not).  PostgreSQL tells no
 * extension about DROP ROLE or ALTER ROLE ... RENAME (roles belong to the
 * cluster, records to each database, and event triggers do not fire for
 * roles), so the rows stay under the name they were written with: a role
 * created later under that name inherits them, and a renamed role no longer
 * sees them.  The administrator decides, in each database:
 * forget_role(name) deletes them, rename_owner(old, new) moves them, and
 * with them the name's place among the application roles (owner.c).  Both
 * run their SQL as the tables' owner (SqlCallBegin) and are revoked
 * from PUBLIC.
 *
 * rename_owner moves rows with a DELETE ... RETURNING that feeds an INSERT, in
 * one statement, rather than an UPDATE of owner: one snapshot, so a row
 * written meanwhile is either moved whole or left alone; and Citus refuses an
 * UPDATE of the distribution column, which owner may be (Citus rule 1 in
 * doc/scaling-out.md).  jsonb_populate_record copies each row whole but for its owner, so
 * a column added to a table later moves with the row.
 *
 * These are rare administrative calls: their statements are planned each
 * time and go by sequential scan (owner is the last column of every
 * primary key).
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/admin/roles.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "base/compat.h"
#include "base/stats.h"
#include "frame/owner.h"
#include "frame/sqlcall.h"
#include "key/args.h"
#include "key/key.h"
#include "objects/extension.h"

/*
 * A table whose rows belong to a role, and how to find a row of the old
 * name whose natural key the new name already holds ($1 old, $2 new; the
 * two key columns come back as text).
 */
typedef enum RoleTableKind
{
	ROLE_TABLE_REGISTRY,
	ROLE_TABLE_INBOX,
	ROLE_TABLE_TOKENS,
	ROLE_TABLE_OUTBOX
} RoleTableKind;

typedef struct RoleTable
{
	RoleTableKind kind;
	const char *name;			/* in schema idempotency */
	const char *collision_sql;
} RoleTable;

static const RoleTable role_tables[] = {
	{
		ROLE_TABLE_REGISTRY, "registry",
		"SELECT o.scope, o.key FROM idempotency.registry AS o"
		" WHERE o.owner OPERATOR(pg_catalog.=) $1 AND EXISTS (SELECT FROM idempotency.registry AS n"
		"  WHERE n.owner OPERATOR(pg_catalog.=) $2 AND n.scope OPERATOR(pg_catalog.=) o.scope"
		"  AND n.key OPERATOR(pg_catalog.=) o.key) LIMIT 1"
	},
	{
		ROLE_TABLE_INBOX, "inbox",
		"SELECT o.consumer, o.message_id FROM idempotency.inbox AS o"
		" WHERE o.owner OPERATOR(pg_catalog.=) $1 AND EXISTS (SELECT FROM idempotency.inbox AS n"
		"  WHERE n.owner OPERATOR(pg_catalog.=) $2 AND n.consumer OPERATOR(pg_catalog.=) o.consumer"
		"  AND n.message_id OPERATOR(pg_catalog.=) o.message_id) LIMIT 1"
	},
	{
		ROLE_TABLE_TOKENS, "tokens",
		"SELECT o.scope, o.token FROM idempotency.tokens AS o"
		" WHERE o.owner OPERATOR(pg_catalog.=) $1 AND EXISTS (SELECT FROM idempotency.tokens AS n"
		"  WHERE n.owner OPERATOR(pg_catalog.=) $2 AND n.scope OPERATOR(pg_catalog.=) o.scope"
		"  AND n.token OPERATOR(pg_catalog.=) o.token) LIMIT 1"
	},

	/*
	 * Two pending streams of one ordering key cannot be merged: their
	 * messages' numbers would collide and their order would mean nothing.
	 */
	{
		ROLE_TABLE_OUTBOX, "outbox",
		"SELECT o.ordering_key, o.message_id FROM idempotency.outbox AS o"
		" WHERE o.owner OPERATOR(pg_catalog.=) $1 AND EXISTS (SELECT FROM idempotency.outbox AS n"
		"  WHERE n.owner OPERATOR(pg_catalog.=) $2 AND n.ordering_key OPERATOR(pg_catalog.=) o.ordering_key"
		"  AND (n.message_id OPERATOR(pg_catalog.=) o.message_id"
		"       OR (n.delivered_at IS NULL AND o.delivered_at IS NULL))) LIMIT 1"
	},
};

#define NUM_ROLE_TABLES ((int) lengthof(role_tables))

/*
 * roles_name_arg
 *		A role name argument: not null, not empty, no longer than a role name
 *		can be.
 */
static Datum
roles_name_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	text	   *name;
	int			len;

	IdempotencyRequireArg(fcinfo, argno, argname);
	name = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(name);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", argname)));
	if (len >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("%s \"%s\" is too long", argname, text_to_cstring(name)),
				 errdetail("Role names are at most %d bytes long.", NAMEDATALEN - 1)));
	return PointerGetDatum(name);
}

/*
 * roles_execute
 *		Run one statement with the role name(s) as $1 (and $2).
 */
static uint64
roles_execute(const char *sql, int nargs, Datum *values, int expected_rc)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};

	return SqlExecuteOnce(sql, nargs, argtypes, values, expected_rc);
}

/*
 * roles_report_collision
 *		The error for a row of the old name whose natural key the new name
 *		already holds (the row is in SPI_tuptable).
 */
static void
roles_report_collision(const RoleTable *table, Datum old_name, Datum new_name)
{
	char	   *first = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	char	   *second = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	char	   *to = TextDatumGetCString(new_name);

	first = IdempotencyDisplayValue(first, strlen(first));
	second = IdempotencyDisplayValue(second, strlen(second));
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("cannot move the records of role \"%s\" to role \"%s\"",
					TextDatumGetCString(old_name), to),
			 table->kind == ROLE_TABLE_REGISTRY ?
			 errdetail("Role \"%s\" already has a record with key \"%s\" in scope \"%s\".",
					   to, second, first) :
			 table->kind == ROLE_TABLE_INBOX ?
			 errdetail("Role \"%s\" already has message \"%s\" in the inbox of consumer \"%s\".",
					   to, second, first) :
			 table->kind == ROLE_TABLE_OUTBOX ?
			 errdetail("Role \"%s\" already has message \"%s\", or undelivered messages, under outbox ordering key \"%s\".",
					   to, second, first) :
			 errdetail("Role \"%s\" already has token \"%s\" in scope \"%s\".",
					   to, second, first),
			 errhint("Forget the records of one of the two names with idempotency.forget_role(), or keep both names.")));
}

PG_FUNCTION_INFO_V1(idempotency_forget_role);

/*
 * idempotency_forget_role
 *		forget_role(role_name): delete every registry record, inbox entry,
 *		token and outbox message stored under that name in this database;
 *		return how many.
 */
Datum
idempotency_forget_role(PG_FUNCTION_ARGS)
{
	Datum		values[1];
	SqlCall		call;
	uint64		deleted = 0;

	IdempotencyCheckNargs(fcinfo, 1);
	values[0] = roles_name_arg(fcinfo, 0, "role_name");

	SqlCallBegin(&call);
	for (int i = 0; i < NUM_ROLE_TABLES; i++)
		deleted += roles_execute(psprintf("DELETE FROM idempotency.%s AS t"
										  " WHERE t.owner OPERATOR(pg_catalog.=) $1",
										  role_tables[i].name),
								 1, values, SPI_OK_DELETE);

	/*
	 * A dropped role's name is no longer an application role's, so that a
	 * role created later under it is not one unless grant_usage() says so; a
	 * role that exists keeps its standing.
	 */
	if (OwnerRolesRecorded() &&
		!OidIsValid(get_role_oid(TextDatumGetCString(values[0]), true)))
		(void) roles_execute("DELETE FROM idempotency.application_roles AS a"
							 " WHERE a.role_name OPERATOR(pg_catalog.=) $1",
							 1, values, SPI_OK_DELETE);
	SqlCallEnd(&call);

	PG_RETURN_INT64((int64) deleted);
}

/*
 * forget_key's statements: $1 role name, $2 key, $3 scope.  The record is
 * read first, and deleted only as it was read ($4 its attempt, $5 its
 * updated_at): a claim not finished is refused before anything is deleted,
 * and a record that another transaction changed meanwhile (a finish, a
 * take-over of an expired record by a request still running) is not
 * deleted in a version the caller never saw.
 */
#define FORGET_KEY_WHERE \
	" WHERE r.owner OPERATOR(pg_catalog.=) $1 AND r.key OPERATOR(pg_catalog.=) $2" \
	" AND r.scope OPERATOR(pg_catalog.=) $3"

static const char forget_key_read_sql[] =
"SELECT r.attempt, r.updated_at, r.status OPERATOR(pg_catalog.=) 'processing'"
" AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.now()"
" FROM idempotency.registry AS r" FORGET_KEY_WHERE;

static const char forget_key_delete_sql[] =
"DELETE FROM idempotency.registry AS r" FORGET_KEY_WHERE
" AND r.attempt OPERATOR(pg_catalog.=) $4 AND r.updated_at OPERATOR(pg_catalog.=) $5";

PG_FUNCTION_INFO_V1(idempotency_forget_key);

/*
 * idempotency_forget_key
 *		forget_key(role_name, key, scope, force): delete the record of one key
 *		stored under role_name in this database, so that its next request
 *		executes; true if there was one.  Counted in the stats and written
 *		to the server's log, with who did it.
 *
 * A claim not finished (processing, not expired) is deleted only by force:
 * its holder may be doing the work now (outside the database, under a
 * lease), and a request after the delete would do it again.  A finish not
 * committed yet leaves the claim a claim.  A claim held in memory by a
 * transaction still open is not a record: there is nothing to forget, and
 * its finish writes one.  A record that changed while the DELETE waited for
 * the transaction changing it is a serialization failure: the caller looks
 * again at what it holds now.
 */
Datum
idempotency_forget_key(PG_FUNCTION_ARGS)
{
	Oid			argtypes[5] = {TEXTOID, TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID};
	Datum		values[5];
	bool		force;
	bool		isnull;
	bool		claimed;
	char	   *role;
	SqlCall		call;

	IdempotencyCheckNargs(fcinfo, 4);
	values[0] = roles_name_arg(fcinfo, 0, "role_name");
	values[1] = IdempotencyKeyArg(fcinfo, 1);
	values[2] = IdempotencyScopeArg(fcinfo, 2);
	IdempotencyRequireArg(fcinfo, 3, "force");
	force = PG_GETARG_BOOL(3);
	role = IdempotencyKeyDisplay(values[0]);

	SqlCallBegin(&call);
	if (SqlExecuteOnce(forget_key_read_sql, 3, argtypes, values, SPI_OK_SELECT) == 0)
	{
		SqlCallEnd(&call);
		PG_RETURN_BOOL(false);
	}
	values[3] = SqlResult(0, 1, &isnull);
	values[4] = SqlResult(0, 2, &isnull);
	claimed = DatumGetBool(SqlResult(0, 3, &isnull));
	if (claimed && !force)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("idempotency key \"%s\" in scope \"%s\" of role \"%s\" is claimed and not finished",
						IdempotencyKeyDisplay(values[1]), IdempotencyKeyDisplay(values[2]), role),
				 errdetail("Its holder may be doing the work now; a request after the record is gone would do it again."),
				 errhint("Let the claim finish, or its lease run out and take it over; force => true deletes it anyway.")));
	if (SqlExecuteOnce(forget_key_delete_sql, 5, argtypes, values, SPI_OK_DELETE) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("the record of idempotency key \"%s\" in scope \"%s\" of role \"%s\" changed while forget_key waited for it",
						IdempotencyKeyDisplay(values[1]), IdempotencyKeyDisplay(values[2]), role),
				 errdetail("Another transaction finished, took over or deleted it; nothing was deleted."),
				 errhint("Call forget_key again to forget what the key holds now.")));
	SqlCallEnd(&call);

	IdempotencyCount(STAT_KEY_FORGOTTEN, 1);
	ereport(LOG,
			(errmsg("idempotency: role \"%s\" forgot the record of key \"%s\" in scope \"%s\" of role \"%s\"",
					IdempotencyDisplayValue(GetUserNameFromId(GetUserId(), false),
											strlen(GetUserNameFromId(GetUserId(), false))),
					IdempotencyKeyDisplay(values[1]), IdempotencyKeyDisplay(values[2]), role),
			 errhidestmt(true)));
	PG_RETURN_BOOL(true);
}

PG_FUNCTION_INFO_V1(idempotency_rename_owner);

/*
 * idempotency_rename_owner
 *		rename_owner(old_name, new_name): move everything stored under
 *		old_name to new_name; return how many rows moved.  Refused, moving
 *		nothing, if new_name already holds a row with the same natural key
 *		as one of old_name's.
 */
Datum
idempotency_rename_owner(PG_FUNCTION_ARGS)
{
	Datum		values[2];
	SqlCall		call;
	uint64		moved = 0;

	IdempotencyCheckNargs(fcinfo, 2);
	values[0] = roles_name_arg(fcinfo, 0, "old_name");
	values[1] = roles_name_arg(fcinfo, 1, "new_name");
	if (strcmp(TextDatumGetCString(values[0]), TextDatumGetCString(values[1])) == 0)
		PG_RETURN_INT64(0);		/* nothing to move */

	SqlCallBegin(&call);

	/* check everything first, so that a refusal moves nothing */
	for (int i = 0; i < NUM_ROLE_TABLES; i++)
		if (roles_execute(role_tables[i].collision_sql, 2, values, SPI_OK_SELECT) > 0)
			roles_report_collision(&role_tables[i], values[0], values[1]);

	/*
	 * A row written under the new name after the check makes the INSERT fail
	 * on the primary key, with the same SQLSTATE.
	 */
	for (int i = 0; i < NUM_ROLE_TABLES; i++)
		moved += roles_execute(psprintf("WITH moved AS ("
										"DELETE FROM idempotency.%s AS t"
										" WHERE t.owner OPERATOR(pg_catalog.=) $1 RETURNING t)"
										" INSERT INTO idempotency.%s"
										" SELECT n.* FROM moved AS m, LATERAL pg_catalog.jsonb_populate_record(m.t,"
										" pg_catalog.jsonb_build_object('owner'::pg_catalog.text, $2)) AS n",
										role_tables[i].name, role_tables[i].name),
							   2, values, SPI_OK_INSERT);

	/*
	 * An application role renamed is one under its new name (records and the
	 * role's standing move together); a name that is one already stays.
	 */
	if (OwnerRolesRecorded())
		(void) roles_execute("WITH moved AS (DELETE FROM idempotency.application_roles AS a"
							 " WHERE a.role_name OPERATOR(pg_catalog.=) $1 RETURNING a.role_name)"
							 " INSERT INTO idempotency.application_roles (role_name)"
							 " SELECT $2 FROM moved ON CONFLICT (role_name) DO NOTHING",
							 2, values, SPI_OK_INSERT);

	SqlCallEnd(&call);

	PG_RETURN_INT64((int64) moved);
}
