-- What test/drive.js controls, for testing only (never in production): a
-- request that reaches the charges table waits for advisory lock 4242
-- while the driver holds it, and an amount of 57014 fails as a canceled
-- statement, so that "in flight" and "timed out" happen when the driver
-- says, not by timing.  Run as the owner of charges, after schema.sql:
--   psql -d shop -f test/hold.sql
CREATE FUNCTION charges_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(4242);
	IF NEW.amount = 57014 THEN
		RAISE EXCEPTION 'canceling statement due to statement timeout'
			USING ERRCODE = 'query_canceled';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER charges_hold BEFORE INSERT ON charges
	FOR EACH ROW EXECUTE FUNCTION charges_hold();
