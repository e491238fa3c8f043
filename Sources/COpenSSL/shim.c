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

// Web Push key material and HKDF: see include/COpenSSL.h for why these are C.
#include <openssl/core_names.h>
#include <openssl/param_build.h>

static EVP_PKEY *pushcast_p256_from_params(const OSSL_PARAM *params, int selection) {
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_PKEY *key = NULL;
    if (context == NULL) return NULL;
    if (EVP_PKEY_fromdata_init(context) != 1 || EVP_PKEY_fromdata(context, &key, selection, (OSSL_PARAM *)params) != 1) key = NULL;
    EVP_PKEY_CTX_free(context);
    if (key == NULL) return NULL;
    EVP_PKEY_CTX *check = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
    // A public point gets the quick check (on the curve, not infinity): P-256's cofactor is 1, so
    // that is all of it, without the full check's extra scalar multiplication by the order.
    int good = check != NULL && (selection == EVP_PKEY_KEYPAIR ? EVP_PKEY_check(check) : EVP_PKEY_public_check_quick(check)) == 1;
    EVP_PKEY_CTX_free(check);
    if (!good) { EVP_PKEY_free(key); return NULL; }
    return key;
}

EVP_PKEY *pushcast_p256_public_key(const unsigned char *point, size_t count) {
    if (count != 65 || point[0] != 0x04) return NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0),
        OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)point, count),
        OSSL_PARAM_construct_end(),
    };
    return pushcast_p256_from_params(params, EVP_PKEY_PUBLIC_KEY);
}

EVP_PKEY *pushcast_p256_private_key(const unsigned char scalar[32]) {
    EVP_PKEY *key = NULL;
    unsigned char point[65];
    EC_GROUP *group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    EC_POINT *public = group ? EC_POINT_new(group) : NULL;
    BIGNUM *private = BN_secure_new();
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    if (public == NULL || private == NULL || builder == NULL || BN_bin2bn(scalar, 32, private) == NULL) goto done;
    if (BN_is_zero(private) || BN_cmp(private, EC_GROUP_get0_order(group)) >= 0) goto done;
    if (EC_POINT_mul(group, public, private, NULL, NULL, NULL) != 1) goto done;
    if (EC_POINT_point2oct(group, public, POINT_CONVERSION_UNCOMPRESSED, point, sizeof point, NULL) != sizeof point) goto done;
    if (OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) != 1
        || OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_PRIV_KEY, private) != 1
        || OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point) != 1) goto done;
    params = OSSL_PARAM_BLD_to_param(builder);
    if (params != NULL) key = pushcast_p256_from_params(params, EVP_PKEY_KEYPAIR);
done:
    if (params != NULL) {
        // OpenSSL 3.0 has no OSSL_PARAM_clear_free: wipe the private scalar's copy by hand.
        OSSL_PARAM *copy = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_PRIV_KEY);
        if (copy != NULL && copy->data != NULL) OPENSSL_cleanse(copy->data, copy->data_size);
        OSSL_PARAM_free(params);
    }
    OSSL_PARAM_BLD_free(builder);
    BN_clear_free(private);
    EC_POINT_free(public);
    EC_GROUP_free(group);
    return key;
}

EVP_KDF_CTX *pushcast_hkdf_sha256_new(void) {
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *context = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    EVP_KDF_free(kdf);
    OSSL_PARAM params[] = { OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, "SHA256", 0), OSSL_PARAM_construct_end() };
    if (context != NULL && EVP_KDF_CTX_set_params(context, params) != 1) { EVP_KDF_CTX_free(context); return NULL; }
    return context;
}

int pushcast_hkdf_sha256(EVP_KDF_CTX *context, const unsigned char *salt, size_t saltCount,
                         const unsigned char *ikm, size_t ikmCount, const unsigned char *info, size_t infoCount,
                         unsigned char *out, size_t outCount) {
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, saltCount),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikmCount),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, infoCount),
        OSSL_PARAM_construct_end(),
    };
    return EVP_KDF_derive(context, out, outCount, params) == 1;
}

struct pushcast_p256_agreement {
    EC_GROUP *group;
    EC_KEY *ephemeral;
    EC_POINT *peer;
    BN_CTX *bn;
};

pushcast_p256_agreement *pushcast_p256_agreement_new(void) {
    pushcast_p256_agreement *agreement = OPENSSL_zalloc(sizeof *agreement);
    if (agreement == NULL) return NULL;
    agreement->group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    agreement->ephemeral = EC_KEY_new();
    agreement->peer = agreement->group ? EC_POINT_new(agreement->group) : NULL;
    agreement->bn = BN_CTX_new();
    if (agreement->group == NULL || agreement->ephemeral == NULL || agreement->peer == NULL || agreement->bn == NULL
        || EC_KEY_set_group(agreement->ephemeral, agreement->group) != 1) {
        pushcast_p256_agreement_free(agreement);
        return NULL;
    }
    return agreement;
}

void pushcast_p256_agreement_free(pushcast_p256_agreement *agreement) {
    if (agreement == NULL) return;
    EC_KEY_free(agreement->ephemeral);
    EC_POINT_free(agreement->peer);
    BN_CTX_free(agreement->bn);
    EC_GROUP_free(agreement->group);
    OPENSSL_free(agreement);
}

int pushcast_p256_agree(pushcast_p256_agreement *agreement, const unsigned char theirs[65], unsigned char ours[65],
                        unsigned char secret[32]) {
    // oct2point refuses a point off the curve (EC_POINT_set_affine_coordinates checks it); an
    // uncompressed encoding cannot be the point at infinity.
    if (theirs[0] != 0x04 || EC_POINT_oct2point(agreement->group, agreement->peer, theirs, 65, agreement->bn) != 1) {
        ERR_clear_error();
        return 0;
    }
    int ok = EC_KEY_generate_key(agreement->ephemeral) == 1
        && EC_POINT_point2oct(agreement->group, EC_KEY_get0_public_key(agreement->ephemeral), POINT_CONVERSION_UNCOMPRESSED,
                              ours, 65, agreement->bn) == 65
        && ECDH_compute_key(secret, 32, agreement->peer, agreement->ephemeral, NULL) == 32;
    ERR_clear_error();
    return ok ? 1 : -1;
}

#include <pthread.h>

static EC_GROUP *p256_shared_group;
static pthread_once_t p256_shared_once = PTHREAD_ONCE_INIT;
static void p256_make_shared_group(void) { p256_shared_group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1); }

int pushcast_p256_agree_as_user_agent(const unsigned char scalar[32], const unsigned char sender[65], unsigned char ours[65],
                                      unsigned char secret[32]) {
    pthread_once(&p256_shared_once, p256_make_shared_group);
    const EC_GROUP *group = p256_shared_group;
    if (group == NULL) return -1;
    BN_CTX *bn = BN_CTX_new();
    BIGNUM *k = BN_secure_new(), *x = BN_new();
    EC_POINT *peer = EC_POINT_new(group), *mine = EC_POINT_new(group), *shared = EC_POINT_new(group);
    int result = -1;
    if (bn == NULL || k == NULL || x == NULL || peer == NULL || mine == NULL || shared == NULL || BN_bin2bn(scalar, 32, k) == NULL) goto done;
    if (BN_is_zero(k) || BN_cmp(k, EC_GROUP_get0_order(group)) >= 0) { result = -2; goto done; }
    if (sender[0] != 0x04 || EC_POINT_oct2point(group, peer, sender, 65, bn) != 1) { result = 0; goto done; }
    BN_set_flags(k, BN_FLG_CONSTTIME);
    if (EC_POINT_mul(group, mine, k, NULL, NULL, bn) != 1
        || EC_POINT_point2oct(group, mine, POINT_CONVERSION_UNCOMPRESSED, ours, 65, bn) != 65
        || EC_POINT_mul(group, shared, NULL, peer, k, bn) != 1
        || EC_POINT_get_affine_coordinates(group, shared, x, NULL, bn) != 1
        || BN_bn2binpad(x, secret, 32) != 32) goto done;
    result = 1;
done:
    EC_POINT_free(shared);
    EC_POINT_free(mine);
    EC_POINT_free(peer);
    BN_free(x);
    BN_clear_free(k);
    BN_CTX_free(bn);
    ERR_clear_error();
    return result;
}
