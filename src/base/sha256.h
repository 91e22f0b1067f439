/*-------------------------------------------------------------------------
 *
 * sha256.h
 *	  SHA-256, for request fingerprints and key checksums.
 *
 * Copyright (c) 2026, idempotency developers
 *
 * IDENTIFICATION
 *	  src/base/sha256.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_SHA256_H
#define IDEMPOTENCY_SHA256_H

/* Length of a SHA-256 digest in bytes. */
#define IDEMPOTENCY_SHA256_LEN	32

extern void IdempotencySha256(const char *data, size_t len,
							  uint8 digest[IDEMPOTENCY_SHA256_LEN]);

#endif							/* IDEMPOTENCY_SHA256_H */
