// Most COpenSSL wrappers are a `static inline` in include/COpenSSL.h. The SHA-256 helpers live
// here because they call OpenSSL's low-level SHA-256, which OpenSSL 3 marks deprecated: the
// deprecation is silenced for this file only.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "COpenSSL.h"
#include <openssl/sha.h>
#include <string.h>

_Static_assert(sizeof(SHA256_CTX) <= sizeof(pushcast_sha256_state), "SHA256_CTX fits the opaque state");

void pushcast_sha256_prime(pushcast_sha256_state *state, const void *data, size_t count) {
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, data, count);
    memcpy(state, &ctx, sizeof ctx);
}

void pushcast_sha256_finish(const pushcast_sha256_state *primed, const void *data, size_t count, unsigned char digest[32]) {
    SHA256_CTX ctx;
    memcpy(&ctx, primed, sizeof ctx);
    SHA256_Update(&ctx, data, count);
    SHA256_Final(digest, &ctx);
}
