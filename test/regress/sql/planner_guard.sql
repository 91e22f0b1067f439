--
-- The planner hook that refuses a call Citus would route by a NULL argument
-- (src/distributed/planner_guard.c) runs in every backend for every query.  A call of a
-- function that is not the extension's, with a NULL argument, must not read
-- pg_extension (or anything else): 40 distinct functions, each called twice,
-- read it no time at all.  A call of one of the extension's functions with
-- a NULL argument still gets the function's own error.
--
SET search_path = public;
DO $$
BEGIN
	FOR i IN 1..40 LOOP
		EXECUTE format('CREATE FUNCTION public.nullarg_f%s(a int) RETURNS int LANGUAGE sql AS %L',
					   i, 'SELECT $1');
	END LOOP;
END
$$;
\set calls 'SELECT nullarg_f1(NULL); SELECT nullarg_f2(NULL); SELECT nullarg_f3(NULL); SELECT nullarg_f4(NULL); SELECT nullarg_f5(NULL); SELECT nullarg_f6(NULL); SELECT nullarg_f7(NULL); SELECT nullarg_f8(NULL); SELECT nullarg_f9(NULL); SELECT nullarg_f10(NULL); SELECT nullarg_f11(NULL); SELECT nullarg_f12(NULL); SELECT nullarg_f13(NULL); SELECT nullarg_f14(NULL); SELECT nullarg_f15(NULL); SELECT nullarg_f16(NULL); SELECT nullarg_f17(NULL); SELECT nullarg_f18(NULL); SELECT nullarg_f19(NULL); SELECT nullarg_f20(NULL); SELECT nullarg_f21(NULL); SELECT nullarg_f22(NULL); SELECT nullarg_f23(NULL); SELECT nullarg_f24(NULL); SELECT nullarg_f25(NULL); SELECT nullarg_f26(NULL); SELECT nullarg_f27(NULL); SELECT nullarg_f28(NULL); SELECT nullarg_f29(NULL); SELECT nullarg_f30(NULL); SELECT nullarg_f31(NULL); SELECT nullarg_f32(NULL); SELECT nullarg_f33(NULL); SELECT nullarg_f34(NULL); SELECT nullarg_f35(NULL); SELECT nullarg_f36(NULL); SELECT nullarg_f37(NULL); SELECT nullarg_f38(NULL); SELECT nullarg_f39(NULL); SELECT nullarg_f40(NULL);'
\o /dev/null
BEGIN;
:calls
:calls
\o
SELECT s.seq_scan + s.idx_scan AS pg_extension_reads
  FROM pg_catalog.pg_stat_xact_sys_tables AS s WHERE s.relname = 'pg_extension';
COMMIT;
-- the extension's own functions are still looked at
SELECT idempotency.outbox_fetch(NULL, '1 minute');
DO $$
BEGIN
	FOR i IN 1..40 LOOP
		EXECUTE format('DROP FUNCTION public.nullarg_f%s(int)', i);
	END LOOP;
END
$$;
