-- bench/transition_setup.sql: four ways to guard a state column.
CREATE EXTENSION idempotency;
CREATE FUNCTION noop_trigger() RETURNS trigger AS '$libdir/noop_trigger' LANGUAGE C;

-- a machine whose every move in the benchmark is allowed: a -> b -> c -> a
SELECT idempotency.define_state_machine('bench', '{"a": ["b"], "b": ["c"], "c": ["a"]}', '{a}');

-- what a user writes without the extension: a transitions table and a
-- PL/pgSQL trigger that looks the pair up
CREATE TABLE transitions (machine text, from_state text, to_state text,
	PRIMARY KEY (machine, from_state, to_state));
INSERT INTO transitions VALUES ('bench', 'a', 'b'), ('bench', 'b', 'c'), ('bench', 'c', 'a');
CREATE FUNCTION plpgsql_check_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' AND NEW.status IS NOT DISTINCT FROM OLD.status THEN
		RETURN NEW;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM transitions
				   WHERE machine = TG_ARGV[0] AND from_state = OLD.status AND to_state = NEW.status) THEN
		RAISE EXCEPTION 'transition from "%" to "%" is not allowed', OLD.status, NEW.status;
	END IF;
	RETURN NEW;
END $$;

-- make_table(name, trigger kind, rows): a narrow orders table in state 'a'
CREATE FUNCTION make_table(tab text, kind text, n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('DROP TABLE IF EXISTS %I', tab);
	-- unlogged: the figures are about CPU per row, not about WAL and disks
	-- room on every page, so that each update is a HOT update and the figures
	-- show the trigger's cost rather than index maintenance
	EXECUTE format('CREATE UNLOGGED TABLE %I (id int PRIMARY KEY, status text NOT NULL)
		WITH (fillfactor = 45, autovacuum_enabled = false)', tab);
	EXECUTE format('INSERT INTO %I SELECT g, ''a'' FROM generate_series(1, %s) AS g', tab, n);
	IF kind = 'noop' THEN
		EXECUTE format('CREATE TRIGGER t BEFORE UPDATE ON %I FOR EACH ROW EXECUTE FUNCTION noop_trigger()', tab);
	ELSIF kind = 'ours' THEN
		EXECUTE format('CREATE TRIGGER t BEFORE UPDATE ON %I FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition(''bench'', ''status'')', tab);
	ELSIF kind = 'plpgsql' THEN
		EXECUTE format('CREATE TRIGGER t BEFORE UPDATE ON %I FOR EACH ROW EXECUTE FUNCTION plpgsql_check_transition(''bench'')', tab);
	END IF;
END $$;
