#include "digest.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// --- libcrypto, opened once ----------------------------------------------------------------------------------
// The EVP calls below exist, with these signatures, in OpenSSL 1.1 and 3 (and in LibreSSL).
static struct {
    void *(*md_ctx_new)(void);
    void (*md_ctx_free)(void *);
    const void *(*sha256)(void);
    int (*digest_init_ex)(void *, const void *, void *);
    int (*digest_update)(void *, const void *, size_t);
    int (*digest_final_ex)(void *, unsigned char *, unsigned int *);
    int loaded;
} evp;

static pthread_once_t evp_once = PTHREAD_ONCE_INIT;

static void evp_load(void) {
    const char *names[] = {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        void *library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!library) continue;
        *(void **)(&evp.md_ctx_new) = dlsym(library, "EVP_MD_CTX_new");
        *(void **)(&evp.md_ctx_free) = dlsym(library, "EVP_MD_CTX_free");
        *(void **)(&evp.sha256) = dlsym(library, "EVP_sha256");
        *(void **)(&evp.digest_init_ex) = dlsym(library, "EVP_DigestInit_ex");
        *(void **)(&evp.digest_update) = dlsym(library, "EVP_DigestUpdate");
        *(void **)(&evp.digest_final_ex) = dlsym(library, "EVP_DigestFinal_ex");
        if (evp.md_ctx_new && evp.md_ctx_free && evp.sha256 && evp.digest_init_ex && evp.digest_update && evp.digest_final_ex) {
            evp.loaded = 1;
            return;
        }
        dlclose(library);
    }
}

// --- the portable implementation (FIPS 180-4) ----------------------------------------------------------------
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

struct ferry_sha256 {
    void *evp_ctx;  // libcrypto's context, or NULL for the portable one below
    uint32_t h[8];
    uint8_t block[64];
    size_t buffered;
    uint64_t length;
};

static void compress(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

ferry_sha256 *ferry_sha256_new(int portable) {
    ferry_sha256 *hash = calloc(1, sizeof *hash);
    if (!hash) return NULL;
    pthread_once(&evp_once, evp_load);
    if (!portable && evp.loaded) {
        hash->evp_ctx = evp.md_ctx_new();
        if (hash->evp_ctx && evp.digest_init_ex(hash->evp_ctx, evp.sha256(), NULL) == 1) return hash;
        if (hash->evp_ctx) evp.md_ctx_free(hash->evp_ctx);
        hash->evp_ctx = NULL;
    }
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(hash->h, initial, sizeof initial);
    return hash;
}

void ferry_sha256_update(ferry_sha256 *hash, const void *bytes, size_t count) {
    if (hash->evp_ctx) {
        evp.digest_update(hash->evp_ctx, bytes, count);
        return;
    }
    const uint8_t *p = bytes;
    hash->length += count;
    if (hash->buffered) {
        size_t take = 64 - hash->buffered < count ? 64 - hash->buffered : count;
        memcpy(hash->block + hash->buffered, p, take);
        hash->buffered += take;
        p += take;
        count -= take;
        if (hash->buffered < 64) return;
        compress(hash->h, hash->block);
        hash->buffered = 0;
    }
    for (; count >= 64; p += 64, count -= 64) compress(hash->h, p);
    memcpy(hash->block, p, count);
    hash->buffered = count;
}

void ferry_sha256_final(ferry_sha256 *hash, uint8_t out[32]) {
    if (hash->evp_ctx) {
        unsigned int length = 32;
        evp.digest_final_ex(hash->evp_ctx, out, &length);
        return;
    }
    uint64_t bits = hash->length * 8;
    uint8_t pad[72] = {0x80};
    size_t padding = (hash->buffered < 56 ? 56 : 120) - hash->buffered;
    for (int i = 0; i < 8; i++) pad[padding + i] = (uint8_t)(bits >> (56 - 8 * i));
    uint64_t length = hash->length;
    ferry_sha256_update(hash, pad, padding + 8);
    hash->length = length;
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(hash->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(hash->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(hash->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)hash->h[i];
    }
}

void ferry_sha256_free(ferry_sha256 *hash) {
    if (!hash) return;
    if (hash->evp_ctx) evp.md_ctx_free(hash->evp_ctx);
    free(hash);
}

int ferry_sha256_uses_libcrypto(void) {
    pthread_once(&evp_once, evp_load);
    return evp.loaded;
}
