/*
 * transition.c's check_transition, in PL/pgSQL: the trigger checked as
 * trigger.c checks it, then the row's state: a repeat passes, a move the
 * machine allows passes, a new row (or one that had no state) must start
 * in an initial state.  The definition is read on every row (the C edition
 * caches it).  A row that an UPDATE moves to another partition arrives as
 * an INSERT there: the source partition's trigger, once it let the move
 * through, notes it (when the new row no longer fits the partition), and
 * the destination's takes the note instead of asking for an initial state;
 * the note lasts only for that statement of that transaction.  SECURITY
 * INVOKER: it reads only state_machines, which everyone may read.
 */
CREATE FUNCTION idempotency.check_transition()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_machine pg_catalog.text := TG_ARGV[0];
	v_column pg_catalog.text := TG_ARGV[1];
	v_typid pg_catalog.oid;
	v_new pg_catalog.text;
	v_old pg_catalog.text;
	v_def pg_catalog.jsonb;
	v_initial pg_catalog.text[];
	v_states pg_catalog.text[];
	v_targets pg_catalog.text[];
	v_root pg_catalog.oid;
	v_note pg_catalog.jsonb;
	v_moves pg_catalog.jsonb;
	v_fits pg_catalog.bool;
BEGIN
	v_typid := idempotency.portable_trigger_check('check_transition', TG_RELID, TG_NAME, true, false, 2,
												  'two arguments, the state machine and the state column',
												  v_column, 'state');
	EXECUTE pg_catalog.format('SELECT CASE WHEN ($1).%1$I IS NOT NULL THEN pg_catalog.format(''%%s'', ($1).%1$I) END', v_column) INTO v_new USING NEW;
	IF v_new IS NULL THEN
		RAISE EXCEPTION 'null value in state column "%" of relation "%"', v_column, TG_TABLE_NAME
			USING ERRCODE = 'not_null_violation', DETAIL = pg_catalog.format('State machine "%s" has no null state.', v_machine),
				  TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA, COLUMN = v_column;
	END IF;
	IF (SELECT c.relispartition FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) TG_RELID) THEN
		v_root := pg_catalog.pg_partition_root(TG_RELID);
		v_note := pg_catalog.jsonb_build_object('xact', pg_catalog.pg_current_xact_id()::pg_catalog.text,
												'statement', pg_catalog.statement_timestamp()::pg_catalog.text,
												'root', v_root, 'machine', v_machine, 'column', v_column, 'state', v_new);
	END IF;
	IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
		EXECUTE pg_catalog.format('SELECT CASE WHEN ($1).%1$I IS NOT NULL THEN pg_catalog.format(''%%s'', ($1).%1$I) END', v_column) INTO v_old USING OLD;
	END IF;
	IF v_old IS NOT NULL THEN
		IF v_old OPERATOR(pg_catalog.<>) v_new THEN
			SELECT m.transitions INTO v_def FROM idempotency.state_machines AS m WHERE m.name OPERATOR(pg_catalog.=) v_machine;
			IF NOT FOUND THEN
				RAISE EXCEPTION 'state machine "%" does not exist', v_machine
					USING ERRCODE = 'undefined_object', HINT = 'Define it with idempotency.define_state_machine().';
			END IF;
			v_states := idempotency.portable_machine_states(v_def);
			IF v_old OPERATOR(pg_catalog.<>) ALL (v_states) THEN
				RAISE EXCEPTION '"%" is not a state of state machine "%"', v_old, v_machine
					USING ERRCODE = 'IS002', TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA, COLUMN = v_column;
			END IF;
			IF v_new OPERATOR(pg_catalog.<>) ALL (v_states) THEN
				RAISE EXCEPTION '"%" is not a state of state machine "%"', v_new, v_machine
					USING ERRCODE = 'IS002', TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA, COLUMN = v_column;
			END IF;
			v_targets := idempotency.portable_machine_targets(v_def, v_old);
			IF v_new OPERATOR(pg_catalog.<>) ALL (v_targets) THEN
				IF pg_catalog.cardinality(v_targets) OPERATOR(pg_catalog.>) 0 THEN
					RAISE EXCEPTION 'transition from "%" to "%" is not allowed by state machine "%"', v_old, v_new, v_machine
						USING ERRCODE = 'IS001', DETAIL = pg_catalog.format('Allowed from "%s": %s.', v_old, idempotency.portable_state_list(v_targets, true)),
							  TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA, COLUMN = v_column;
				END IF;
				RAISE EXCEPTION 'transition from "%" to "%" is not allowed by state machine "%"', v_old, v_new, v_machine
					USING ERRCODE = 'IS001', DETAIL = pg_catalog.format('No transition leaves "%s".', v_old),
						  TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA, COLUMN = v_column;
			END IF;
		END IF;
		-- a move the partition will not hold: the row leaves for a sibling
		IF v_root IS NOT NULL THEN
			EXECUTE pg_catalog.format('SELECT %s FROM (SELECT ($1).*) AS t', pg_catalog.pg_get_partition_constraintdef(TG_RELID))
			   INTO v_fits USING NEW;
			IF v_fits IS NOT TRUE THEN
				PERFORM pg_catalog.set_config('idempotency_portable.moves', v_note::pg_catalog.text, false);
			END IF;
		END IF;
		RETURN NEW;
	END IF;

	-- a new row, or one that had no state: unless it is a row an UPDATE
	-- moved here from a sibling partition, it starts in an initial state
	IF v_root IS NOT NULL AND TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
		v_moves := NULLIF(pg_catalog.current_setting('idempotency_portable.moves', true), '')::pg_catalog.jsonb;
		IF v_moves OPERATOR(pg_catalog.=) v_note THEN
			PERFORM pg_catalog.set_config('idempotency_portable.moves', '', false);
			RETURN NEW;
		END IF;
	END IF;
	SELECT m.transitions, m.initial INTO v_def, v_initial FROM idempotency.state_machines AS m WHERE m.name OPERATOR(pg_catalog.=) v_machine;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'state machine "%" does not exist', v_machine
			USING ERRCODE = 'undefined_object', HINT = 'Define it with idempotency.define_state_machine().';
	END IF;
	v_states := idempotency.portable_machine_states(v_def);
	IF v_new OPERATOR(pg_catalog.<>) ALL (v_states) THEN
		RAISE EXCEPTION '"%" is not a state of state machine "%"', v_new, v_machine
			USING ERRCODE = 'IS002', TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA, COLUMN = v_column;
	END IF;
	IF v_new OPERATOR(pg_catalog.<>) ALL (v_initial) THEN
		RAISE EXCEPTION '"%" is not an initial state of state machine "%"', v_new, v_machine
			USING ERRCODE = 'IS001',
				  DETAIL = pg_catalog.format('Initial states: %s.', idempotency.portable_state_list(
						ARRAY(SELECT s.state FROM pg_catalog.unnest(v_states) WITH ORDINALITY AS s(state, ord)
							   WHERE s.state OPERATOR(pg_catalog.=) ANY (v_initial) ORDER BY s.ord), true)),
				  TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA, COLUMN = v_column;
	END IF;
	RETURN NEW;
END
$$;

COMMENT ON FUNCTION idempotency.check_transition() IS
'BEFORE INSERT OR UPDATE ... FOR EACH ROW trigger: check_transition(machine, state_column)';
