/*-------------------------------------------------------------------------
 *
 * statemachine.c
 *	  State machine definitions: a per-backend cache of
 *	  idempotency.state_machines, and the SQL functions that read it.
 *
 * The transition checker runs for every row written, so it must not run SQL
 * per row.  Each backend keeps the machines it has used in a hash table under
 * CacheMemoryContext, as arrays: state names, an "initial" flag per state and
 * an nstates x nstates matrix of allowed transitions.
 *
 * Invalidation: a statement-level trigger on idempotency.state_machines
 * (state_machines_changed, in transition.c) sends a relcache invalidation of
 * that table whenever it changes.  Every backend handles it, when it next
 * accepts invalidation messages (at the latest when its next statement opens
 * a table), by marking the whole cache stale and bumping
 * StateMachineCacheGeneration; entries are rebuilt lazily.  A rebuild reads
 * the table with the latest snapshot, not the transaction's: a REPEATABLE
 * READ transaction must never put a definition older than the newest
 * committed one back into the shared-by-all-transactions cache.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/statemachine.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "idempotency.h"

uint64		StateMachineCacheGeneration = 1;

static HTAB *machine_cache = NULL;
static Oid	machines_relid = InvalidOid;
static SPIPlanPtr machine_plan = NULL;

/*
 * machine_relcache_callback
 *		Mark every cached machine stale when the definitions table (or
 *		everything) is invalidated.
 */
static void
machine_relcache_callback(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	StateMachine *entry;

	if (machine_cache == NULL ||
		(relid != InvalidOid && relid != machines_relid && OidIsValid(machines_relid)))
		return;

	hash_seq_init(&status, machine_cache);
	while ((entry = (StateMachine *) hash_seq_search(&status)) != NULL)
		entry->valid = false;
	StateMachineCacheGeneration++;

	/* the table itself may have been dropped and created again */
	if (relid == InvalidOid || relid == machines_relid)
		machines_relid = InvalidOid;
}

/*
 * machine_cache_init
 *		Create the hash table and register the callback, once per backend.
 */
static void
machine_cache_init(void)
{
	HASHCTL		ctl;

	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = sizeof(StateMachine);
	ctl.hcxt = CacheMemoryContext;
	machine_cache = hash_create("idempotency state machines", 16, &ctl,
								HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	CacheRegisterRelcacheCallback(machine_relcache_callback, (Datum) 0);
}

/*
 * machine_load
 *		Read one machine's definition and build its arrays.  Returns false if
 *		there is no such machine.
 */
static bool
machine_load(StateMachine *entry)
{
	Datum		values[1];
	Oid			argtypes[1] = {TEXTOID};
	Jsonb	   *transitions;
	ArrayType  *initial;
	Datum	   *init_elems;
	bool	   *init_nulls;
	int			ninit;
	bool		isnull;
	List	   *names = NIL;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			from = -1;
	int			depth = 0;
	bool		found;
	MemoryContext cxt;
	MemoryContext oldcxt;
	Oid			relid;

	/* the table as the extension's catalog entries have it (extension.c) */
	relid = IdempotencyCatalogGet()->relids[IR_STATE_MACHINES];
	if (relid != machines_relid)
	{
		machines_relid = relid;
		if (machine_plan != NULL)
			SPI_freeplan(machine_plan);
		machine_plan = NULL;
	}

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (machine_plan == NULL)
	{
		machine_plan = SPI_prepare("SELECT m.transitions, m.initial FROM idempotency.state_machines AS m"
								   " WHERE m.name OPERATOR(pg_catalog.=) $1", 1, argtypes);
		if (machine_plan == NULL || SPI_keepplan(machine_plan) != 0)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	}

	values[0] = CStringGetTextDatum(entry->name);
	if (SPI_execute_snapshot(machine_plan, values, NULL, GetLatestSnapshot(),
							 InvalidSnapshot, true, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_snapshot failed");
	found = SPI_processed == 1;
	if (!found)
	{
		SPI_finish();
		return false;
	}

	/* everything the entry keeps goes into a context of its own */
	if (entry->cxt != NULL)
		MemoryContextDelete(entry->cxt);
	cxt = AllocSetContextCreate(CacheMemoryContext, "idempotency state machine",
								ALLOCSET_SMALL_SIZES);
	MemoryContextCopyAndSetIdentifier(cxt, entry->name);
	entry->cxt = cxt;

	transitions = DatumGetJsonbP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	initial = DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));

	oldcxt = MemoryContextSwitchTo(cxt);

	/* first the state names: object keys and array members, in order */
	it = JsonbIteratorInit(&transitions->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if ((tok == WJB_KEY && depth == 1) || (tok == WJB_ELEM && v.type == jbvString))
		{
			char	   *name = pnstrdup(v.val.string.val, v.val.string.len);
			ListCell   *lc;
			bool		seen = false;

			foreach(lc, names)
				if (strcmp(lfirst(lc), name) == 0)
					seen = true;
			if (!seen)
				names = lappend(names, name);
		}
		else if (tok == WJB_BEGIN_OBJECT || tok == WJB_BEGIN_ARRAY)
			depth++;
		else if (tok == WJB_END_OBJECT || tok == WJB_END_ARRAY)
			depth--;
	}

	entry->nstates = list_length(names);
	entry->states = palloc(sizeof(char *) * entry->nstates);
	entry->state_lens = palloc(sizeof(int) * entry->nstates);
	entry->initial = palloc0(sizeof(bool) * entry->nstates);
	entry->allowed = palloc0(sizeof(bool) * entry->nstates * entry->nstates);
	for (int i = 0; i < entry->nstates; i++)
	{
		entry->states[i] = list_nth(names, i);
		entry->state_lens[i] = strlen(entry->states[i]);
	}

	/* then the matrix */
	it = JsonbIteratorInit(&transitions->root);
	depth = 0;
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if (tok == WJB_KEY && depth == 1)
			from = StateMachineFindState(entry, v.val.string.val, v.val.string.len);
		else if (tok == WJB_ELEM && v.type == jbvString)
		{
			int			to = StateMachineFindState(entry, v.val.string.val, v.val.string.len);

			/* define_state_machine validated the shape; stay safe anyway */
			if (from >= 0 && to >= 0 && depth == 2)
				entry->allowed[from * entry->nstates + to] = true;
		}
		else if (tok == WJB_BEGIN_OBJECT || tok == WJB_BEGIN_ARRAY)
			depth++;
		else if (tok == WJB_END_OBJECT || tok == WJB_END_ARRAY)
			depth--;
	}

	deconstruct_array(initial, TEXTOID, -1, false, TYPALIGN_INT, &init_elems, &init_nulls, &ninit);
	for (int i = 0; i < ninit; i++)
	{
		text	   *t = DatumGetTextPP(init_elems[i]);
		int			s = StateMachineFindState(entry, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));

		if (s >= 0)
			entry->initial[s] = true;
	}

	MemoryContextSwitchTo(oldcxt);
	SPI_finish();
	return true;
}

/*
 * StateMachineLookup
 *		The cached definition of a machine, loaded if need be; an error if
 *		there is no such machine.
 */
StateMachine *
StateMachineLookup(const char *name)
{
	StateMachine *entry;
	bool		found;
	char		key[NAMEDATALEN];

	if (machine_cache == NULL)
		machine_cache_init();

	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("state machine \"%s\" does not exist", name)));
	memset(key, 0, sizeof(key));
	strlcpy(key, name, NAMEDATALEN);

	entry = (StateMachine *) hash_search(machine_cache, key, HASH_ENTER, &found);
	if (!found)
	{
		entry->valid = false;
		entry->cxt = NULL;
	}
	if (!entry->valid)
	{
		if (!machine_load(entry))
		{
			if (entry->cxt != NULL)
				MemoryContextDelete(entry->cxt);
			hash_search(machine_cache, key, HASH_REMOVE, NULL);
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("state machine \"%s\" does not exist", name),
					 errhint("Define it with idempotency.define_state_machine().")));
		}
		entry->valid = true;
	}
	return entry;
}

/*
 * StateMachineFindState
 *		The index of a state, or -1.  Machines have a handful of states, so a
 *		linear scan beats hashing here.
 */
int
StateMachineFindState(StateMachine *machine, const char *state, int len)
{
	for (int i = 0; i < machine->nstates; i++)
		if (machine->state_lens[i] == len && memcmp(machine->states[i], state, len) == 0)
			return i;
	return -1;
}

/*
 * StateMachineAllowedList
 *		The states allowed from one state, as "a", "b" (for messages).
 */
char *
StateMachineAllowedList(StateMachine *machine, int from)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int to = 0; to < machine->nstates; to++)
	{
		if (!machine->allowed[from * machine->nstates + to])
			continue;
		if (buf.len > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfo(&buf, "\"%s\"", machine->states[to]);
	}
	return buf.data;
}

PG_FUNCTION_INFO_V1(idempotency_transition_allowed);

/*
 * idempotency_transition_allowed
 *		transition_allowed(machine, from_state, to_state): what the trigger
 *		would say.  Staying in a known state is allowed (the idempotent
 *		repeat); an unknown state is never part of an allowed transition.
 */
Datum
idempotency_transition_allowed(PG_FUNCTION_ARGS)
{
	StateMachine *machine = StateMachineLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	text	   *from_t = PG_GETARG_TEXT_PP(1);
	text	   *to_t = PG_GETARG_TEXT_PP(2);
	int			from = StateMachineFindState(machine, VARDATA_ANY(from_t), VARSIZE_ANY_EXHDR(from_t));
	int			to = StateMachineFindState(machine, VARDATA_ANY(to_t), VARSIZE_ANY_EXHDR(to_t));

	if (from < 0 || to < 0)
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(from == to || machine->allowed[from * machine->nstates + to]);
}
