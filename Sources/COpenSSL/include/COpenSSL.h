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

#endif
