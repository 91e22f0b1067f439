/*-------------------------------------------------------------------------
 *
 * key.h
 *	  The key type: its rules, shared by every function that takes a key.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/key/key.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_KEY_H
#define IDEMPOTENCY_KEY_H

/* key.c */
extern text *IdempotencyKeyFromBytes(const char *str, int len);
extern char *IdempotencyDisplayValue(const char *str, int len);
extern char *IdempotencyKeyDisplay(Datum key);

#endif							/* IDEMPOTENCY_KEY_H */
