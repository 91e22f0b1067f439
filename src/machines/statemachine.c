/*-------------------------------------------------------------------------
 *
 * statemachine.c
 *	  State machine definitions: define_state_machine's validation, a
 *	  per-backend cache of idempotency.state_machines, and the SQL functions
 *	  that read it.
 *
 * A definition is a JSON object mapping each state to the array of states it
 * may move to.  One parser (machine_parse) checks it and turns it into the
 * cached form, both when define_state_machine stores it and when a backend
 * loads it, so that no definition reaches the cache without the checks.
 *
 * The cached form is linear in the size of the definition: the state names
 * in one buffer, an open-addressing hash table from name to index, and the
 * transitions as one sorted target list per state (a compressed sparse row
 * layout).  Finding a state is one hash probe, checking a transition a binary
 * search in the source state's targets.  A machine has at most
 * IDEMPOTENCY_SM_MAX_STATES states and IDEMPOTENCY_SM_MAX_TRANSITIONS
 * transitions, so that every backend's copy stays small (about 60 bytes per
 * state and 4 per transition, plus the names) and no function that reads a
 * machine can run into an allocation limit.
 *
 * The transition checker runs for every row written, so it must not run SQL
 * per row.  Each backend keeps the machines it has used in a hash table under
 * CacheMemoryContext, each in a memory context of its own.
 *
 * Invalidation: a statement-level trigger on idempotency.state_machines
 * (state_machines_changed, below) sends a relcache invalidation of that
 * table whenever it changes.  Every backend handles it, when it next
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
 *	  src/machines/statemachine.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "parser/parse_func.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"

#include "base/compat.h"
#include "distributed/shards.h"
#include "frame/sqlcall.h"
#include "key/key.h"
#include "machines/statemachine.h"
#include "objects/extension.h"

/* The longest machine name, in bytes (it is the cache's hash key). */
#define MACHINE_NAME_MAXLEN		(NAMEDATALEN - 1)

/* How many states a message lists before it says how many more there are. */
#define STATE_LIST_MAX			50

/* How many bytes of an offending JSON value a message shows. */
#define JSON_DISPLAY_MAXLEN		200

uint64		StateMachineCacheGeneration = 1;

static HTAB *machine_cache = NULL;
static Oid	machines_relid = InvalidOid;

/*
 * A machine's definition, read on the latest snapshot (see the file header)
 * as the user whose write fired the trigger: the table is readable by all.
 */
static SqlStatement machine_select_stmt = {
	.sql = "SELECT m.transitions, m.initial FROM idempotency.state_machines AS m"
	" WHERE m.name OPERATOR(pg_catalog.=) $1",
	.nargs = 1,
	.argtypes = {TEXTOID},
	.expected_rc = SPI_OK_SELECT,
	.natts = 2,
	.snapshot = SQL_SNAPSHOT_LATEST,
};

/* define_state_machine's write: a new definition, or one replaced */
static SqlStatement machine_upsert_stmt = {
	.sql = "INSERT INTO idempotency.state_machines AS m (name, transitions, initial, updated_at)"
	" VALUES ($1, $2, $3, pg_catalog.now())"
	" ON CONFLICT ON CONSTRAINT state_machines_pkey DO UPDATE"
	" SET transitions = excluded.transitions, initial = excluded.initial,"
	" updated_at = excluded.updated_at",
	.nargs = 3,
	.argtypes = {TEXTOID, JSONBOID, TEXTARRAYOID},
	.expected_rc = SPI_OK_INSERT,
};

/* drop_state_machine's */
static SqlStatement machine_delete_stmt = {
	.sql = "DELETE FROM idempotency.state_machines AS m"
	" WHERE m.name OPERATOR(pg_catalog.=) $1",
	.nargs = 1,
	.argtypes = {TEXTOID},
	.expected_rc = SPI_OK_DELETE,
};

/*
 * A definition while it is parsed: states are added as they are first seen,
 * transitions as (from, to) pairs in the order of the definition.
 */
typedef struct MachineBuild
{
	const char *machine;		/* for messages */
	StringInfoData names;		/* every state name, each followed by '\0' */
	int			nstates;
	int			maxstates;		/* allocated length of offsets and lens */
	int		   *offsets;		/* [nstates]: where each name starts */
	int		   *lens;
	bool	   *incoming;		/* [nstates]: some transition leads here */
	int32	   *slots;			/* hash table: state index + 1, 0 if free */
	uint32		slot_mask;		/* number of slots - 1 (a power of 2 - 1) */
	int			npairs;
	int			maxpairs;
	int32	   *pair_from;
	int32	   *pair_to;
} MachineBuild;

/*
 * machine_slot
 *		The slot where a name is, or where it would go.  The table is never
 *		more than half full, so the probe always ends.
 */
static uint32
machine_slot(const int32 *slots, uint32 mask, const char *names,
			 const int *offsets, const int *lens, const char *name, int len)
{
	uint32		i = hash_bytes((const unsigned char *) name, len) & mask;

	for (;;)
	{
		int32		s = slots[i];

		if (s == 0 ||
			(lens[s - 1] == len && memcmp(names + offsets[s - 1], name, len) == 0))
			return i;
		i = (i + 1) & mask;
	}
}

/*
 * machine_build_grow_slots
 *		Double the hash table and put every state back in.
 */
static void
machine_build_grow_slots(MachineBuild *b)
{
	uint32		nslots = (b->slot_mask + 1) * 2;

	pfree(b->slots);
	b->slots = palloc0(sizeof(int32) * nslots);
	b->slot_mask = nslots - 1;
	for (int s = 0; s < b->nstates; s++)
		b->slots[machine_slot(b->slots, b->slot_mask, b->names.data, b->offsets,
							  b->lens, b->names.data + b->offsets[s], b->lens[s])] = s + 1;
}

/*
 * machine_build_state
 *		The index of a state, added if it is new; an error past the limits.
 */
static int
machine_build_state(MachineBuild *b, const char *name, int len)
{
	uint32		slot;

	if (len > IDEMPOTENCY_SM_MAX_STATE_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("state name \"%s\" of state machine \"%s\" is too long",
						IdempotencyDisplayValue(name, len), b->machine),
				 errdetail("State names are at most %d bytes long.",
						   IDEMPOTENCY_SM_MAX_STATE_LEN)));

	slot = machine_slot(b->slots, b->slot_mask, b->names.data, b->offsets,
						b->lens, name, len);
	if (b->slots[slot] != 0)
		return b->slots[slot] - 1;

	if (b->nstates >= IDEMPOTENCY_SM_MAX_STATES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("state machine \"%s\" has too many states", b->machine),
				 errdetail("A state machine can have at most %d states.",
						   IDEMPOTENCY_SM_MAX_STATES)));
	if (b->nstates == b->maxstates)
	{
		b->maxstates *= 2;
		b->offsets = repalloc(b->offsets, sizeof(int) * b->maxstates);
		b->lens = repalloc(b->lens, sizeof(int) * b->maxstates);
		b->incoming = repalloc(b->incoming, sizeof(bool) * b->maxstates);
	}
	b->offsets[b->nstates] = b->names.len;
	b->lens[b->nstates] = len;
	b->incoming[b->nstates] = false;
	appendBinaryStringInfo(&b->names, name, len);
	appendStringInfoChar(&b->names, '\0');
	b->slots[slot] = b->nstates + 1;
	b->nstates++;
	if ((uint32) b->nstates * 2 > b->slot_mask + 1)
		machine_build_grow_slots(b);
	return b->nstates - 1;
}

/*
 * machine_build_pair
 *		Remember one transition; an error past the limit.
 */
static void
machine_build_pair(MachineBuild *b, int from, int to)
{
	if (b->npairs >= IDEMPOTENCY_SM_MAX_TRANSITIONS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("state machine \"%s\" has too many transitions", b->machine),
				 errdetail("A state machine can have at most %d transitions.",
						   IDEMPOTENCY_SM_MAX_TRANSITIONS)));
	if (b->npairs == b->maxpairs)
	{
		b->maxpairs *= 2;
		b->pair_from = repalloc(b->pair_from, sizeof(int32) * b->maxpairs);
		b->pair_to = repalloc(b->pair_to, sizeof(int32) * b->maxpairs);
	}
	b->pair_from[b->npairs] = from;
	b->pair_to[b->npairs] = to;
	b->npairs++;
	b->incoming[to] = true;
}

/*
 * machine_json_display
 *		A JSON value as text for a message, cut after about
 *		JSON_DISPLAY_MAXLEN bytes.  A long string is cut before it is
 *		escaped, and a large array or object is not printed at all, so that
 *		the message never costs more memory than the value itself.
 */
static char *
machine_json_display(JsonbValue *v)
{
	Jsonb	   *jb;
	char	   *str;
	int			len;

	if (v->type == jbvString && v->val.string.len > JSON_DISPLAY_MAXLEN)
	{
		StringInfoData buf;

		initStringInfo(&buf);
		escape_json(&buf, pnstrdup(v->val.string.val,
								   pg_mbcliplen(v->val.string.val, v->val.string.len,
												JSON_DISPLAY_MAXLEN)));
		buf.data[buf.len - 1] = '\0';	/* no closing quote: there is more */
		return psprintf("%s...", buf.data);
	}
	if (v->type == jbvBinary && v->val.binary.len > 64 * JSON_DISPLAY_MAXLEN)
		return pstrdup(JsonContainerIsArray(v->val.binary.data) ? "[...]" : "{...}");

	jb = JsonbValueToJsonb(v);
	str = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	len = strlen(str);
	if (len > JSON_DISPLAY_MAXLEN)
	{
		len = pg_mbcliplen(str, len, JSON_DISPLAY_MAXLEN);
		str[len] = '\0';
		return psprintf("%s...", str);
	}
	return str;
}

/*
 * machine_parse
 *		Check a definition and collect its states and transitions, in the
 *		order of the definition (jsonb's order of keys).  Errors name the
 *		first problem found, in that order.
 */
static void
machine_parse(MachineBuild *b, const char *machine, Jsonb *transitions)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			from = -1;

	memset(b, 0, sizeof(MachineBuild));
	b->machine = machine;
	initStringInfo(&b->names);
	b->maxstates = 16;
	b->offsets = palloc(sizeof(int) * b->maxstates);
	b->lens = palloc(sizeof(int) * b->maxstates);
	b->incoming = palloc(sizeof(bool) * b->maxstates);
	b->slot_mask = 32 - 1;
	b->slots = palloc0(sizeof(int32) * (b->slot_mask + 1));
	b->maxpairs = 16;
	b->pair_from = palloc(sizeof(int32) * b->maxpairs);
	b->pair_to = palloc(sizeof(int32) * b->maxpairs);

	if (transitions == NULL || !JB_ROOT_IS_OBJECT(transitions) ||
		JB_ROOT_COUNT(transitions) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("transitions of state machine \"%s\" must be a non-empty JSON object",
						machine),
				 errhint("Map each state to the array of states it may move to, as in {\"created\": [\"paid\"], \"paid\": []}.")));

	/* the top level only: nested containers come back whole */
	it = JsonbIteratorInit(&transitions->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbIterator *elems;
		JsonbValue	e;
		JsonbIteratorToken etok;
		const char *from_name;

		if (tok == WJB_KEY)
		{
			if (v.val.string.len == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("state machine \"%s\" has an empty state name", machine)));
			from = machine_build_state(b, v.val.string.val, v.val.string.len);
			continue;
		}
		if (tok != WJB_VALUE)
			continue;			/* the object's own begin and end */

		from_name = b->names.data + b->offsets[from];
		if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("transitions from state \"%s\" of state machine \"%s\" must be a JSON array",
							from_name, machine),
					 errdetail("Found %s.", machine_json_display(&v))));

		elems = JsonbIteratorInit(v.val.binary.data);
		while ((etok = JsonbIteratorNext(&elems, &e, true)) != WJB_DONE)
		{
			int			to;

			if (etok != WJB_ELEM)
				continue;		/* the array's own begin and end */
			if (e.type != jbvString || e.val.string.len == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("transitions from state \"%s\" of state machine \"%s\" must name states as non-empty strings",
								b->names.data + b->offsets[from], machine),
						 errdetail("Found %s.", machine_json_display(&e))));
			to = machine_build_state(b, e.val.string.val, e.val.string.len);
			machine_build_pair(b, from, to);
		}
	}
}

/*
 * machine_build_find
 *		The index of a state of a parsed definition, or -1.
 */
static int
machine_build_find(MachineBuild *b, const char *name, int len)
{
	uint32		slot = machine_slot(b->slots, b->slot_mask, b->names.data,
									b->offsets, b->lens, name, len);

	return b->slots[slot] - 1;
}

/*
 * machine_states_list
 *		The states of a parsed definition as "a, b, c" (for a message), the
 *		first STATE_LIST_MAX of them.
 */
static char *
machine_states_list(MachineBuild *b)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int s = 0; s < b->nstates && s < STATE_LIST_MAX; s++)
		appendStringInfo(&buf, "%s%s", s > 0 ? ", " : "", b->names.data + b->offsets[s]);
	if (b->nstates > STATE_LIST_MAX)
		appendStringInfo(&buf, " and %d more", b->nstates - STATE_LIST_MAX);
	return buf.data;
}

/*
 * machine_initial_states
 *		The initial states of a parsed definition: those given (each must be
 *		a state), or else those with no transition into them.
 */
static ArrayType *
machine_initial_states(MachineBuild *b, ArrayType *initial)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (initial == NULL)
	{
		n = 0;
		elems = palloc(sizeof(Datum) * b->nstates);
		for (int s = 0; s < b->nstates; s++)
			if (!b->incoming[s])
				elems[n++] = PointerGetDatum(cstring_to_text_with_len(b->names.data + b->offsets[s],
																	  b->lens[s]));
		if (n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("state machine \"%s\" has no initial state", b->machine),
					 errdetail("Every state has a transition into it."),
					 errhint("Name the initial states in the third argument.")));
		return construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT);
	}

	deconstruct_array(initial, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (nulls[i])
			n = 0;
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("initial states of state machine \"%s\" must be a non-empty array without nulls",
						b->machine)));
	for (int i = 0; i < n; i++)
	{
		text	   *t = DatumGetTextPP(elems[i]);

		if (machine_build_find(b, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)) < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("initial state \"%s\" is not a state of state machine \"%s\"",
							IdempotencyDisplayValue(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)),
							b->machine),
					 errdetail("Its states are %s.", machine_states_list(b))));
	}
	return initial;
}

/*
 * machine_cmp_int32
 *		qsort comparator for state indexes.
 */
static int
machine_cmp_int32(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

/*
 * machine_install
 *		Copy a parsed definition into a cache entry's context, in its final,
 *		compact form: names in one buffer, each state's targets sorted and
 *		without duplicates.
 */
static void
machine_install(StateMachine *entry, MachineBuild *b)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(entry->cxt);
	int			n = b->nstates;
	char	   *names = palloc(b->names.len);
	int32	   *start = palloc0(sizeof(int32) * (n + 1));
	int32	   *targets = palloc(sizeof(int32) * Max(b->npairs, 1));
	int32	   *fill;
	int			ntargets = 0;

	memcpy(names, b->names.data, b->names.len);
	entry->nstates = n;
	entry->states = palloc(sizeof(char *) * n);
	entry->state_lens = palloc(sizeof(int) * n);
	entry->initial = palloc0(sizeof(bool) * n);
	for (int s = 0; s < n; s++)
	{
		entry->states[s] = names + b->offsets[s];
		entry->state_lens[s] = b->lens[s];
	}
	entry->slot_mask = b->slot_mask;
	entry->slots = palloc(sizeof(int32) * (b->slot_mask + 1));
	memcpy(entry->slots, b->slots, sizeof(int32) * (b->slot_mask + 1));

	/* counting sort of the pairs by source state */
	for (int i = 0; i < b->npairs; i++)
		start[b->pair_from[i] + 1]++;
	for (int s = 0; s < n; s++)
		start[s + 1] += start[s];
	fill = palloc(sizeof(int32) * Max(n, 1));
	memcpy(fill, start, sizeof(int32) * n);
	for (int i = 0; i < b->npairs; i++)
		targets[fill[b->pair_from[i]]++] = b->pair_to[i];
	pfree(fill);

	/* each state's targets in order, duplicates dropped, packed together */
	for (int s = 0; s < n; s++)
	{
		int			first = start[s];
		int			count = start[s + 1] - first;

		start[s] = ntargets;
		qsort(targets + first, count, sizeof(int32), machine_cmp_int32);
		for (int i = 0; i < count; i++)
			if (i == 0 || targets[first + i] != targets[first + i - 1])
				targets[ntargets++] = targets[first + i];
	}
	start[n] = ntargets;
	entry->targets_start = start;
	entry->targets = repalloc(targets, sizeof(int32) * Max(ntargets, 1));

	MemoryContextSwitchTo(oldcxt);
}

/*
 * StateMachineCacheInvalidate
 *		Mark every cached machine stale when the definitions table (or
 *		everything) is invalidated; called by the extension's relcache
 *		callback.
 */
void
StateMachineCacheInvalidate(Oid relid)
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

PG_FUNCTION_INFO_V1(idempotency_state_machines_changed);

/*
 * idempotency_state_machines_changed
 *		AFTER ... FOR EACH ROW (and AFTER TRUNCATE) on
 *		idempotency.state_machines, ENABLE ALWAYS so that a subscription's
 *		apply worker fires it too: a relcache invalidation of the table
 *		reaches every backend at commit (and this one at once), and each
 *		drops its cached machines.
 */
Datum
idempotency_state_machines_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Oid			table;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("state_machines_changed: must be called as trigger")));
	CacheInvalidateRelcache(trigdata->tg_relation);

	/* on a shard of the Citus reference table: the caches watch the table */
	table = IdempotencyCitusShardOf(trigdata->tg_relation);
	if (OidIsValid(table))
		CacheInvalidateRelcacheByRelid(table);
	return PointerGetDatum(NULL);
}

/*
 * machine_cache_init
 *		Create the hash table, once per backend.
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
}

/*
 * machine_load
 *		Read one machine's definition, check it as define_state_machine does
 *		(a row written around that function is checked here) and build its
 *		cached form.  Returns false if there is no such machine.
 */
static bool
machine_load(StateMachine *entry)
{
	SqlCall		call;
	Datum		values[1];
	Jsonb	   *transitions;
	ArrayType  *initial;
	Datum	   *init_elems;
	bool	   *init_nulls;
	int			ninit;
	bool		isnull;
	MachineBuild build;
	MemoryContext tmpcxt;
	MemoryContext oldcxt;

	/* the table as the extension's catalog entries have it (extension.c) */
	machines_relid = IdempotencyCatalogGet()->relids[IR_STATE_MACHINES];

	SqlCallBeginAsCaller(&call);
	values[0] = CStringGetTextDatum(entry->name);
	if (SqlExecute(&machine_select_stmt, values, NULL) != 1)
	{
		SqlCallEnd(&call);
		return false;
	}

	/* the parse's scratch space goes away as soon as the entry is built */
	tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "idempotency state machine load",
								   ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(tmpcxt);

	transitions = DatumGetJsonbP(SqlResult(0, 1, &isnull));
	initial = DatumGetArrayTypeP(SqlResult(0, 2, &isnull));
	machine_parse(&build, entry->name, transitions);

	/* everything the entry keeps goes into a context of its own */
	if (entry->cxt != NULL)
		MemoryContextDelete(entry->cxt);
	entry->cxt = NULL;
	entry->cxt = AllocSetContextCreate(CacheMemoryContext, "idempotency state machine",
									   ALLOCSET_SMALL_SIZES);
	MemoryContextCopyAndSetIdentifier(entry->cxt, entry->name);
	machine_install(entry, &build);

	/* initial states that are not states are ignored, as unreachable */
	deconstruct_array(initial, TEXTOID, -1, false, TYPALIGN_INT, &init_elems, &init_nulls, &ninit);
	for (int i = 0; i < ninit; i++)
	{
		text	   *t;
		int			s;

		if (init_nulls[i])
			continue;
		t = DatumGetTextPP(init_elems[i]);
		s = StateMachineFindState(entry, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
		if (s >= 0)
			entry->initial[s] = true;
	}

	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(tmpcxt);
	SqlCallEnd(&call);
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
		bool		loaded = false;

		PG_TRY();
		{
			loaded = machine_load(entry);
		}
		PG_CATCH();
		{
			/* a definition that fails its checks leaves no entry behind */
			if (entry->cxt != NULL)
				MemoryContextDelete(entry->cxt);
			hash_search(machine_cache, key, HASH_REMOVE, NULL);
			PG_RE_THROW();
		}
		PG_END_TRY();
		if (!loaded)
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
 *		The index of a state, or -1: one probe of the machine's hash table.
 */
int
StateMachineFindState(StateMachine *machine, const char *state, int len)
{
	uint32		i;

	if (len > IDEMPOTENCY_SM_MAX_STATE_LEN)
		return -1;
	i = hash_bytes((const unsigned char *) state, len) & machine->slot_mask;
	for (;;)
	{
		int32		s = machine->slots[i];

		if (s == 0)
			return -1;
		if (machine->state_lens[s - 1] == len &&
			memcmp(machine->states[s - 1], state, len) == 0)
			return s - 1;
		i = (i + 1) & machine->slot_mask;
	}
}

/*
 * StateMachineAllows
 *		Whether the machine has a transition from one state to another: a
 *		binary search in the source state's sorted targets.
 */
bool
StateMachineAllows(StateMachine *machine, int from, int to)
{
	int			lo = machine->targets_start[from];
	int			hi = machine->targets_start[from + 1];

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (machine->targets[mid] == to)
			return true;
		if (machine->targets[mid] < to)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/*
 * StateMachineAllowedList
 *		The states allowed from one state, as "a", "b" (for messages), in
 *		the order of the definition; the first STATE_LIST_MAX of them.
 */
char *
StateMachineAllowedList(StateMachine *machine, int from)
{
	StringInfoData buf;
	int			first = machine->targets_start[from];
	int			count = machine->targets_start[from + 1] - first;

	initStringInfo(&buf);
	for (int i = 0; i < count && i < STATE_LIST_MAX; i++)
		appendStringInfo(&buf, "%s\"%s\"", i > 0 ? ", " : "",
						 machine->states[machine->targets[first + i]]);
	if (count > STATE_LIST_MAX)
		appendStringInfo(&buf, " and %d more", count - STATE_LIST_MAX);
	return buf.data;
}

/*
 * StateMachineInitialList
 *		The initial states, as "a", "b" (for messages); the first
 *		STATE_LIST_MAX of them.
 */
char *
StateMachineInitialList(StateMachine *machine)
{
	StringInfoData buf;
	int			shown = 0;
	int			more = 0;

	initStringInfo(&buf);
	for (int s = 0; s < machine->nstates; s++)
	{
		if (!machine->initial[s])
			continue;
		if (shown == STATE_LIST_MAX)
		{
			more++;
			continue;
		}
		appendStringInfo(&buf, "%s\"%s\"", shown > 0 ? ", " : "", machine->states[s]);
		shown++;
	}
	if (more > 0)
		appendStringInfo(&buf, " and %d more", more);
	return buf.data;
}

PG_FUNCTION_INFO_V1(idempotency_define_state_machine);

/*
 * idempotency_define_state_machine
 *		define_state_machine(name, transitions, initial): check a definition
 *		and store it, replacing any earlier one in one statement.  SECURITY
 *		DEFINER in SQL, so that a role granted this function needs no
 *		privilege on the table and cannot store a definition that has not
 *		been checked here.  Time and memory are linear in the size of the
 *		definition.
 */
Datum
idempotency_define_state_machine(PG_FUNCTION_ARGS)
{
	text	   *name_t;
	Jsonb	   *transitions;
	ArrayType  *initial;
	char	   *name;
	MachineBuild build;
	SqlCall		call;
	Datum		values[3];

	IdempotencyCheckNargs(fcinfo, 3);
	name_t = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	transitions = PG_ARGISNULL(1) ? NULL : PG_GETARG_JSONB_P(1);
	initial = PG_ARGISNULL(2) ? NULL : PG_GETARG_ARRAYTYPE_P(2);

	/* the schema named idempotency must be the extension's (extension.c) */
	(void) IdempotencyCatalogGet();

	if (name_t == NULL || VARSIZE_ANY_EXHDR(name_t) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("state machine name must not be empty")));
	if (VARSIZE_ANY_EXHDR(name_t) > MACHINE_NAME_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("state machine name \"%s\" is too long",
						IdempotencyDisplayValue(VARDATA_ANY(name_t), VARSIZE_ANY_EXHDR(name_t))),
				 errdetail("Names are at most %d bytes long.", MACHINE_NAME_MAXLEN)));
	name = text_to_cstring(name_t);

	machine_parse(&build, name, transitions);
	values[0] = PointerGetDatum(name_t);
	values[1] = PointerGetDatum(transitions);
	values[2] = PointerGetDatum(machine_initial_states(&build, initial));

	/* as the function's owner (SECURITY DEFINER) */
	SqlCallBeginAsCaller(&call);
	SqlExecute(&machine_upsert_stmt, values, NULL);
	SqlCallEnd(&call);
	PG_RETURN_VOID();
}

/*
 * machine_user_trigger
 *		A check_transition trigger (not a partition's clone) that names the
 *		machine as its first argument, or NULL: *relid is its table.
 */
static char *
machine_user_trigger(const char *name, Oid *relid)
{
	Oid			check_fn;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *found = NULL;

	check_fn = LookupFuncName(list_make2(makeString(get_namespace_name(IdempotencyCatalogGet()->nspoid)),
										 makeString("check_transition")),
							  0, NULL, false);
	rel = table_open(TriggerRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (found == NULL && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_trigger trig = (Form_pg_trigger) GETSTRUCT(tuple);
		bool		isnull;
		Datum		args;
		bytea	   *bytes;

		if (trig->tgfoid != check_fn || OidIsValid(trig->tgparentid) || trig->tgnargs < 1)
			continue;
		args = heap_getattr(tuple, Anum_pg_trigger_tgargs, RelationGetDescr(rel), &isnull);
		if (isnull)
			continue;
		bytes = DatumGetByteaPP(args);
		/* the arguments are NUL-terminated strings, one after another */
		if (strnlen(VARDATA_ANY(bytes), VARSIZE_ANY_EXHDR(bytes)) == strlen(name) &&
			memcmp(VARDATA_ANY(bytes), name, strlen(name)) == 0)
		{
			found = pstrdup(NameStr(trig->tgname));
			*relid = trig->tgrelid;
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

PG_FUNCTION_INFO_V1(idempotency_drop_state_machine);

/*
 * idempotency_drop_state_machine
 *		drop_state_machine(name): remove a definition no check_transition
 *		trigger uses.  SECURITY DEFINER in SQL, like define_state_machine,
 *		so that a role granted it needs no privilege on the table.
 */
Datum
idempotency_drop_state_machine(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *trigger;
	Oid			relid = InvalidOid;
	SqlCall		call;
	Datum		values[1];
	uint64		deleted;

	IdempotencyCheckNargs(fcinfo, 1);

	/* the schema named idempotency must be the extension's (extension.c) */
	(void) IdempotencyCatalogGet();

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("state machine name must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	trigger = machine_user_trigger(name, &relid);
	if (trigger != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop state machine \"%s\" because trigger \"%s\" on table %s uses it",
						name, trigger,
						DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(relid)))),
				 errhint("Drop the trigger first.")));

	values[0] = PG_GETARG_DATUM(0);
	/* as the function's owner (SECURITY DEFINER) */
	SqlCallBeginAsCaller(&call);
	deleted = SqlExecute(&machine_delete_stmt, values, NULL);
	SqlCallEnd(&call);
	if (deleted == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("state machine \"%s\" does not exist", name)));
	PG_RETURN_VOID();
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
	StateMachine *machine;
	text	   *from_t;
	text	   *to_t;
	int			from;
	int			to;

	IdempotencyCheckNargs(fcinfo, 3);
	machine = StateMachineLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	from_t = PG_GETARG_TEXT_PP(1);
	to_t = PG_GETARG_TEXT_PP(2);
	from = StateMachineFindState(machine, VARDATA_ANY(from_t), VARSIZE_ANY_EXHDR(from_t));
	to = StateMachineFindState(machine, VARDATA_ANY(to_t), VARSIZE_ANY_EXHDR(to_t));
	if (from < 0 || to < 0)
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(from == to || StateMachineAllows(machine, from, to));
}
