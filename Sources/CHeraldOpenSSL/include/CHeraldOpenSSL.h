// Functions wrapping OpenSSL macros and variadic calls that do not import into Swift.
#ifndef CHERALD_OPENSSL_H
#define CHERALD_OPENSSL_H
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stddef.h>

/// SSL_CTX_set_min_proto_version.
int cherald_ctx_set_min_proto_version(SSL_CTX *ctx, int version);
/// SSL_CTX_set_max_proto_version.
int cherald_ctx_set_max_proto_version(SSL_CTX *ctx, int version);

/// SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS).
void cherald_ctx_set_default_modes(SSL_CTX *ctx);
/// SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION).
void cherald_ctx_set_default_options(SSL_CTX *ctx);
/// SSL_set_tlsext_host_name (SNI).
int cherald_set_tlsext_host_name(SSL *ssl, const char *name);
/// BIO_get_mem_data: the pending bytes of a memory BIO.
long cherald_bio_get_mem_data(BIO *bio, char **data);
/// BIO_set_mem_eof_return(bio, -1): reading an empty memory BIO means "retry", not EOF.
void cherald_bio_set_mem_eof_retry(BIO *bio);
/// The number of bytes waiting to be read from a BIO (BIO_ctrl_pending).
size_t cherald_bio_pending(BIO *bio);
/// SSL_CTX_add_extra_chain_cert (takes ownership of `x509` on success).
long cherald_ctx_add_extra_chain_cert(SSL_CTX *ctx, X509 *x509);
/// OPENSSL_free.
void cherald_openssl_free(void *p);
/// The ERR_GET_LIB part of a packed error code.
int cherald_err_get_lib(unsigned long e);
/// The ERR_GET_REASON part of a packed error code.
int cherald_err_get_reason(unsigned long e);
/// sk_X509_num / sk_X509_value / sk_X509_pop_free(…, X509_free).
int cherald_sk_x509_num(STACK_OF(X509) *sk);
X509 *cherald_sk_x509_value(STACK_OF(X509) *sk, int i);
void cherald_sk_x509_pop_free(STACK_OF(X509) *sk);
/// The TLS version constants (macros in OpenSSL).
int cherald_tls1_2_version(void);
#include <openssl/evp.h>
/// Reads a PEM private key from `bio`. `passphrase` may be NULL: an encrypted key then
/// fails (OpenSSL never prompts on the terminal). `*asked` is set to 1 when OpenSSL
/// asked for a passphrase (the key is encrypted).
EVP_PKEY *cherald_read_private_key(BIO *bio, const char *passphrase, int *asked);
/// Loads OpenSSL's "legacy" provider (RC2, as in older PKCS#12 exports) next to the
/// default one; returns 1 when it is available.
int cherald_load_legacy_provider(void);
/// SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF) and no session tickets.
void cherald_ctx_disable_session_cache(SSL_CTX *ctx);

/// Makes an EC P-256 key and an X.509 v3 certificate for it, signed by `issuer_cert`/`issuer_key`
/// (self-signed when they are NULL). `purpose`: 0 none, 1 serverAuth, 2 clientAuth. Offsets are
/// seconds from now. `subject_alt_names` as in openssl.cnf ("DNS:localhost,IP:127.0.0.1") or NULL.
/// Returns 1 and sets `*out_cert`, `*out_key` (the caller frees them), or 0.
int cherald_make_certificate(const char *common_name, const char *subject_alt_names, int is_ca, int purpose,
                             long not_before_offset, long not_after_offset, long serial,
                             X509 *issuer_cert, EVP_PKEY *issuer_key, X509 **out_cert, EVP_PKEY **out_key);
/// PEM_write_bio_X509.
int cherald_write_certificate_pem(BIO *bio, X509 *cert);
/// PEM_write_bio_PrivateKey, encrypted with AES-256-CBC under `passphrase` unless it is NULL.
int cherald_write_private_key_pem(BIO *bio, EVP_PKEY *key, const char *passphrase);
/// A PKCS#12 bundle (key, certificate, optional CA) with `password`, DER, into `bio`.
int cherald_write_pkcs12(BIO *bio, const char *password, const char *friendly_name, EVP_PKEY *key, X509 *cert, X509 *ca);
/// SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name): the SNI host name, or NULL.
const char *cherald_get_servername(const SSL *ssl);
/// Client side: keep the latest session the server hands out (TLS 1.3 tickets) in a
/// slot of the context, so later connections resume instead of a full handshake.
/// Thread-safe. Returns 1 on success.
int cherald_ctx_enable_client_resumption(SSL_CTX *ctx);
/// Client side: offer the context's latest session, if any and still resumable.
void cherald_ssl_offer_session(SSL *ssl);
/// Server side: issue one stateless session ticket per handshake so clients can
/// resume; `id_context` names the service (required with client certificates).
void cherald_ctx_enable_server_resumption(SSL_CTX *ctx, const char *id_context);
/// Server side ALPN: `protocols` is the server's list in wire format (each name
/// preceded by its length byte), in order of preference; the context keeps a copy.
/// A client's offer selects the first of the server's names it contains. When the
/// client offers ALPN but none of them: with `require` != 0 the handshake fails with
/// the fatal no_application_protocol alert (RFC 7301), otherwise it goes on without
/// ALPN. A client that offers no ALPN is not affected. Returns 1 on success.
int cherald_ctx_set_alpn_server(SSL_CTX *ctx, const unsigned char *protocols, unsigned int length, int require);
#endif
