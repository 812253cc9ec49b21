// SHA-256 for ferry: the system's libcrypto (OpenSSL 3 or 1.1, opened at run time as libcurl is, so building
// needs no development headers), with SHA-NI where the CPU has it; a portable implementation when no libcrypto
// can be opened. ferry needs no crypto library of its own to build (swift-crypto compiled a second BoringSSL
// into every build).
#ifndef FERRY_DIGEST_H
#define FERRY_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/// A SHA-256 in progress. Opaque; made by ferry_sha256_new, freed by ferry_sha256_free.
typedef struct ferry_sha256 ferry_sha256;

/// A new hash. `portable`: 1 uses the built-in implementation even when libcrypto is there (the tests compare
/// the two). NULL only when memory runs out.
ferry_sha256 *ferry_sha256_new(int portable);
void ferry_sha256_update(ferry_sha256 *hash, const void *bytes, size_t count);
/// Writes the 32-byte digest to `out`; the hash cannot be updated after.
void ferry_sha256_final(ferry_sha256 *hash, uint8_t out[32]);
void ferry_sha256_free(ferry_sha256 *hash);
/// Whether the system's libcrypto does the hashing (else the built-in implementation).
int ferry_sha256_uses_libcrypto(void);

#endif
