/*
 * The columns 1.2 added come after stats_reset: a view may only grow at its
 * end, and replacing it keeps the grants an administrator made on it.
 */
CREATE OR REPLACE VIEW idempotency.stats AS SELECT * FROM idempotency.stats();
