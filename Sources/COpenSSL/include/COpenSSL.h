#ifndef COPENSSL_H
#define COPENSSL_H
// COpenSSL: the OpenSSL 3 headers for Swift, plus one-line `pushcast_` wrappers for what the
// importer cannot see: function-like macros and the `SSL_OP_*` values (docs/DESIGN.md §6).
// Real functions and plain integer constants import directly and are used as they are.
#include <stdint.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ec.h>
#include <openssl/rand.h>
#include <openssl/kdf.h>
// OSSL_PROVIDER_try_load: the legacy provider, for .p12 bundles encrypted with RC2-40 (Keychain exports).
#include <openssl/provider.h>

// SSL_OP_NO_COMPRESSION is built with the SSL_OP_BIT macro, so it does not import.
static const uint64_t PUSHCAST_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
// SSL_OP_NO_RENEGOTIATION is built with the SSL_OP_BIT macro, so it does not import.
static const uint64_t PUSHCAST_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;

// SSL_CTX_set_min_proto_version is a function-like macro over SSL_CTX_ctrl.
static inline int pushcast_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) { return (int)SSL_CTX_set_min_proto_version(ctx, version); }
// SSL_CTX_add0_chain_cert is a function-like macro over SSL_CTX_ctrl.
static inline int pushcast_SSL_CTX_add0_chain_cert(SSL_CTX *ctx, X509 *cert) { return (int)SSL_CTX_add0_chain_cert(ctx, cert); }
// SSL_set_tlsext_host_name is a function-like macro over SSL_ctrl.
static inline int pushcast_SSL_set_tlsext_host_name(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }
// BIO_set_mem_eof_return is a function-like macro over BIO_ctrl.
static inline int pushcast_BIO_set_mem_eof_return(BIO *bio, int value) { return (int)BIO_set_mem_eof_return(bio, value); }
// BIO_get_mem_data is a function-like macro over BIO_ctrl.
static inline long pushcast_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

// OPENSSL_free is a function-like macro over CRYPTO_free (it passes the file and line); it frees
// the UTF-8 copy ASN1_STRING_to_UTF8 makes of a client certificate's subject entries.
static inline void pushcast_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }

// The apns-id of each row is SHA-256(campaign, 0, token). A state primed with the campaign once
// is copied and finished per row through OpenSSL's low-level SHA-256 (deprecated in OpenSSL 3
// but kept): no EVP provider dispatch, context re-initialisation or cleanse per row. The state is
// opaque here (the shim checks that SHA256_CTX fits) so that Swift sees no deprecated type.
typedef struct { uint64_t words[16]; } pushcast_sha256_state;
void pushcast_sha256_prime(pushcast_sha256_state *state, const void *data, size_t count);
void pushcast_sha256_finish(const pushcast_sha256_state *primed, const void *data, size_t count, unsigned char digest[32]);

// P-256 keys from raw bytes and HKDF-SHA-256 (Web Push, RFC 8291 and RFC 8292). They are C
// because each builds an OSSL_PARAM array: the array holds pointers to its parameter names and
// values, which C string literals keep valid, while a Swift string passed as a C pointer lives only
// for one call. The EC arithmetic (EC_POINT_mul) is OpenSSL's; nothing here is hand-written crypto.

// A P-256 public key from a 65-byte uncompressed point (0x04 || X || Y); NULL unless the point is
// on the curve and not the point at infinity (EVP_PKEY_public_check_quick; P-256's cofactor is 1).
EVP_PKEY *pushcast_p256_public_key(const unsigned char *point, size_t count);
// A P-256 key pair from a 32-byte big-endian private scalar: OpenSSL computes the public point,
// and EVP_PKEY_check rejects a scalar that is 0 or not below the group order. NULL on failure.
// The scalar's copies inside the builder are wiped.
EVP_PKEY *pushcast_p256_private_key(const unsigned char scalar[32]);
// One worker's Web Push key agreement (RFC 8291 §3.1), through OpenSSL's EC_KEY functions
// (deprecated in OpenSSL 3 but kept, as for SHA-256 above): one P-256 group, ephemeral key, peer
// point and BN_CTX made once and reused, so a message costs a key generation and an ECDH, with no
// provider fetch, group set-up or key import per message. The arithmetic is OpenSSL's.
typedef struct pushcast_p256_agreement pushcast_p256_agreement;
pushcast_p256_agreement *pushcast_p256_agreement_new(void);
// Frees it; the ephemeral private key is wiped.
void pushcast_p256_agreement_free(pushcast_p256_agreement *agreement);
// Generates a fresh ephemeral key pair, writes its uncompressed public point to `ours` (65 bytes)
// and the ECDH secret with `theirs` (a 65-byte uncompressed point, checked on the curve) to
// `secret` (32 bytes). Returns 1; 0 when `theirs` is not a point on P-256; -1 when OpenSSL fails.
int pushcast_p256_agree(pushcast_p256_agreement *agreement, const unsigned char theirs[65], unsigned char ours[65],
                        unsigned char secret[32]);
// The user agent's side (a push service that holds the subscription's private scalar: the mock),
// stateless and safe from any thread (one P-256 group made once and shared read-only): writes
// the public point of `scalar` (32 bytes big-endian) to `ours` (65 bytes) and the ECDH secret
// with `sender` (the message's 65-byte keyid, checked on the curve) to `secret` (32 bytes).
// Returns 1; 0 when `sender` is not a point on P-256; -2 when the scalar is 0 or not below the
// group order; -1 when OpenSSL fails.
int pushcast_p256_agree_as_user_agent(const unsigned char scalar[32], const unsigned char sender[65], unsigned char ours[65],
                                      unsigned char secret[32]);
// An "HKDF" EVP_KDF_CTX with its digest set to SHA-256 once (EVP_KDF_CTX_free it); NULL on failure.
EVP_KDF_CTX *pushcast_hkdf_sha256_new(void);
// HKDF-SHA-256 (RFC 5869, extract then expand) through a context from pushcast_hkdf_sha256_new,
// reused across calls. Returns 1 on success.
int pushcast_hkdf_sha256(EVP_KDF_CTX *context, const unsigned char *salt, size_t saltCount,
                         const unsigned char *ikm, size_t ikmCount, const unsigned char *info, size_t infoCount,
                         unsigned char *out, size_t outCount);

#endif
