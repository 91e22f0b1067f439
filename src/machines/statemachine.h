/*-------------------------------------------------------------------------
 *
 * statemachine.h
 *	  The per-backend cache of state machine definitions.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/machines/statemachine.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_STATEMACHINE_H
#define IDEMPOTENCY_STATEMACHINE_H

/*
 * Limits of a state machine definition, so that every backend's cached copy
 * stays small: states, transitions (entries of its arrays) and the length of
 * a state name in bytes.
 */
#define IDEMPOTENCY_SM_MAX_STATES		10000
#define IDEMPOTENCY_SM_MAX_TRANSITIONS	100000
#define IDEMPOTENCY_SM_MAX_STATE_LEN	255

typedef struct StateMachine
{
	char		name[NAMEDATALEN];	/* hash key */
	bool		valid;
	int			nstates;
	char	  **states;			/* state names, in definition order */
	int		   *state_lens;
	bool	   *initial;		/* [nstates] */
	int32	   *targets_start;	/* [nstates + 1]: state i's targets are */
	int32	   *targets;		/* targets[targets_start[i] .. [i + 1]),
								 * sorted */
	int32	   *slots;			/* hash of names: state index + 1, 0 if free */
	uint32		slot_mask;		/* number of slots - 1 */
	MemoryContext cxt;			/* holds all of the above */
} StateMachine;

/* bumped by every invalidation: a machine looked up before it is stale */
extern uint64 StateMachineCacheGeneration;

extern void StateMachineCacheInvalidate(Oid relid);
extern StateMachine *StateMachineLookup(const char *name);
extern int	StateMachineFindState(StateMachine *machine, const char *state, int len);
extern bool StateMachineAllows(StateMachine *machine, int from, int to);
extern char *StateMachineAllowedList(StateMachine *machine, int from);
extern char *StateMachineInitialList(StateMachine *machine);

#endif							/* IDEMPOTENCY_STATEMACHINE_H */
