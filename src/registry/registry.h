/*-------------------------------------------------------------------------
 *
 * registry.h
 *	  The registry's row, defined once, and the statements on
 *	  idempotency.registry, one typed function each.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/registry/registry.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_REGISTRY_H
#define IDEMPOTENCY_REGISTRY_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "catalog/pg_type.h"

#include "frame/sqlcall.h"
#include "objects/extension.h"

/*
 * The registry's columns, in the table's order (the install script's CREATE
 * TABLE idempotency.registry is the only other place that lists them all).
 * X(name, type, claim, ends, since): claim says whether a fresh claim can
 * hold a value in the column (the others it leaves NULL: the answer and the
 * recovery point); ends whether ending a claim (finish or abandon) writes the
 * column; since is the version of the SQL objects whose scripts added it.
 * Every statement that writes a whole record (a claim, a reclaim, a deferred
 * claim's finish), every read of one and the answers of idempotent_begin and
 * lookup are built from this list, so a column added here is written, or
 * reset to NULL, by every claim (a fresh claim's INSERT leaves out the
 * columns with claim false, which the table, having no column defaults, makes
 * NULL), and a column of an answer is written by every finish and cleared by
 * every abandon. The statements name only the columns the installed SQL
 * objects have (IdempotencyCatalog.sql_version): a column added by a later
 * version is added at the table's end, and is NULL in every image read from
 * an older table.
 *
 * recovery_point and recovery_state are the last step a claim recorded
 * (idempotent_checkpoint): a take-over keeps them, so that the new attempt
 * resumes after that step, and any new claim of the record resets them.
 */
#define REGISTRY_COLUMNS(X) \
	X(owner, TEXTOID, true, false, IDEMPOTENCY_SQL_1_0) \
	X(scope, TEXTOID, true, false, IDEMPOTENCY_SQL_1_0) \
	X(key, SQL_KEYTYPE, true, false, IDEMPOTENCY_SQL_1_0) \
	X(status, TEXTOID, true, true, IDEMPOTENCY_SQL_1_0) \
	X(attempt, INT4OID, true, false, IDEMPOTENCY_SQL_1_0) \
	X(fingerprint, BYTEAOID, true, false, IDEMPOTENCY_SQL_1_0) \
	X(response, JSONBOID, false, true, IDEMPOTENCY_SQL_1_0) \
	X(status_code, INT4OID, false, true, IDEMPOTENCY_SQL_1_0) \
	X(body, BYTEAOID, false, true, IDEMPOTENCY_SQL_1_0) \
	X(headers, JSONBOID, false, true, IDEMPOTENCY_SQL_1_0) \
	X(created_at, TIMESTAMPTZOID, true, false, IDEMPOTENCY_SQL_1_0) \
	X(updated_at, TIMESTAMPTZOID, true, true, IDEMPOTENCY_SQL_1_0) \
	X(lease_until, TIMESTAMPTZOID, true, true, IDEMPOTENCY_SQL_1_0) \
	X(expires_at, TIMESTAMPTZOID, true, true, IDEMPOTENCY_SQL_1_0) \
	X(recovery_point, TEXTOID, false, false, IDEMPOTENCY_SQL_1_1) \
	X(recovery_state, JSONBOID, false, false, IDEMPOTENCY_SQL_1_1)

#define REGISTRY_COLUMN_ENUM(name, type, claim, ends, since) RC_##name,
typedef enum RegistryColumn
{
	REGISTRY_COLUMNS(REGISTRY_COLUMN_ENUM)
	REGISTRY_NCOLUMNS
} RegistryColumn;

/* The identity of a record: the primary key, the first three columns. */
#define REGISTRY_NIDENTITY 3

/* A record's status, stored as its name (RegistryStatusName). */
typedef enum RegistryStatus
{
	RS_PROCESSING,
	RS_COMPLETED,
	RS_FAILED,
	RS_ABANDONED
} RegistryStatus;

/*
 * A record, or the image of one about to be written: a value or a NULL per
 * column, and the status decoded.  Varlena values read from the table point
 * into SPI's memory until RegistryRowKeep copies them out.
 */
typedef struct RegistryRow
{
	Datum		values[REGISTRY_NCOLUMNS];
	bool		nulls[REGISTRY_NCOLUMNS];
	RegistryStatus status;
} RegistryRow;

/* What a finish stores; 0 stands for NULL. */
typedef struct RegistryAnswer
{
	bool		failed;
	Datum		response;		/* jsonb */
	int32		status_code;
	Datum		body;			/* bytea */
	Datum		headers;		/* jsonb: http_headers.c's forms */
	TimestampTz expires_at;		/* a new expiry; 0 keeps the claim's */
} RegistryAnswer;

/* An attempt a finish or abandon names, if it names one. */
typedef struct RegistryAttempt
{
	bool		given;
	int32		value;
} RegistryAttempt;

/* Where each column of a function's result comes from (RegistryOutputMap). */
typedef struct RegistryOutput
{
	TupleDesc	desc;
	int			source[FLEXIBLE_ARRAY_MEMBER];	/* a RegistryColumn, or -1 */
} RegistryOutput;

extern const char *RegistryStatusName(RegistryStatus status);
extern bool RegistryColumnVarlena(RegistryColumn col);
extern void RegistryRowSet(RegistryRow *row, RegistryColumn col, Datum value);
extern Datum RegistryRowGet(const RegistryRow *row, RegistryColumn col);
extern void RegistryRowClaim(RegistryRow *row, SqlCall *call, Datum scope, Datum key,
							 Datum fingerprint, TimestampTz lease_until,
							 TimestampTz expires_at);
extern void RegistryRowKeep(SqlCall *call, RegistryRow *row);
extern bool RegistryRowLive(const RegistryRow *row, TimestampTz now);
extern void RegistryRowFromTuple(RegistryRow *row, HeapTuple tuple, TupleDesc desc);
extern uint64 RegistrySelectOwn(SqlCall *call);
extern RegistryOutput *RegistryOutputMap(TupleDesc desc);
extern void RegistryOutputFill(const RegistryOutput *out, const RegistryRow *row,
							   Datum *values, bool *nulls);

extern int32 RegistryFence(void);
extern int32 RegistryFenceAt(TimestampTz t);

extern bool RegistryInsertClaim(SqlCall *call, const RegistryRow *claim);
extern bool RegistryLookup(SqlCall *call, Datum scope, Datum key, RegistryRow *rec);
extern bool RegistryReclaim(SqlCall *call, RegistryRow *claim, const RegistryRow *seen);
extern bool RegistryTakeover(SqlCall *call, RegistryRow *claim, const RegistryRow *seen);
extern bool RegistryFinish(SqlCall *call, Datum scope, Datum key,
						   const RegistryAnswer *answer, RegistryAttempt attempt);
extern bool RegistryAbandon(SqlCall *call, Datum scope, Datum key, RegistryAttempt attempt);
extern void RegistryInsertFinished(SqlCall *call, const RegistryRow *claim,
								   const RegistryAnswer *answer);
extern bool RegistryCheckpoint(SqlCall *call, Datum scope, Datum key, Datum point,
							   Datum state, RegistryAttempt attempt);
extern bool RegistryRenew(SqlCall *call, Datum scope, Datum key, TimestampTz lease_until,
						  RegistryAttempt attempt, TimestampTz *granted);
extern uint64 RegistryClaimStalled(SqlCall *call, Datum scope, int32 limit,
								   TimestampTz lease_until, Datum passed_over);
extern void RegistryStalledRow(uint64 i, RegistryRow *claim, int32 *previous_attempt);

/* finish.c: why a fenced statement on a claim changed no row */
extern void RegistryExplainMiss(SqlCall *call, Datum scope, Datum key,
								RegistryAttempt attempt, const char *doing);

#endif							/* IDEMPOTENCY_REGISTRY_H */
