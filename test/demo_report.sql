\echo 'charges: one, after four requests with the same key'
SELECT order_id, amount_cents, key FROM shop.charges ORDER BY order_id;
\echo 'orders:'
SELECT id, status FROM shop.orders ORDER BY id;
\echo 'idempotency records:'
SELECT key, scope, status, attempt, response FROM idempotency.my_records ORDER BY key;
