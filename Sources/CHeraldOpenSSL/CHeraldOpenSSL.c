#include "CHeraldOpenSSL.h"
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/provider.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int cherald_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

int cherald_ctx_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}


void cherald_ctx_set_default_modes(SSL_CTX *ctx) {
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
}

void cherald_ctx_set_default_options(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
}

int cherald_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

long cherald_bio_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

void cherald_bio_set_mem_eof_retry(BIO *bio) {
    BIO_set_mem_eof_return(bio, -1);
}

size_t cherald_bio_pending(BIO *bio) {
    return BIO_ctrl_pending(bio);
}

long cherald_ctx_add_extra_chain_cert(SSL_CTX *ctx, X509 *x509) {
    return SSL_CTX_add_extra_chain_cert(ctx, x509);
}

void cherald_openssl_free(void *p) {
    OPENSSL_free(p);
}

int cherald_err_get_lib(unsigned long e) { return ERR_GET_LIB(e); }
int cherald_err_get_reason(unsigned long e) { return ERR_GET_REASON(e); }

int cherald_sk_x509_num(STACK_OF(X509) *sk) { return sk ? sk_X509_num(sk) : 0; }
X509 *cherald_sk_x509_value(STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
void cherald_sk_x509_pop_free(STACK_OF(X509) *sk) { if (sk) sk_X509_pop_free(sk, X509_free); }

int cherald_tls1_2_version(void) { return TLS1_2_VERSION; }

struct cherald_pass { const char *passphrase; int asked; };

static int cherald_pass_cb(char *buf, int size, int rwflag, void *u) {
    (void)rwflag;
    struct cherald_pass *p = (struct cherald_pass *)u;
    p->asked = 1;
    if (p->passphrase == NULL) return -1;
    size_t n = strlen(p->passphrase);
    if (n > (size_t)size) n = (size_t)size;
    memcpy(buf, p->passphrase, n);
    return (int)n;
}

EVP_PKEY *cherald_read_private_key(BIO *bio, const char *passphrase, int *asked) {
    struct cherald_pass p = { passphrase, 0 };
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, cherald_pass_cb, &p);
    if (asked) *asked = p.asked;
    return key;
}

int cherald_load_legacy_provider(void) {
    static OSSL_PROVIDER *legacy = NULL;
    static OSSL_PROVIDER *deflt = NULL;
    if (legacy != NULL) return 1;
    legacy = OSSL_PROVIDER_load(NULL, "legacy");
    if (legacy == NULL) { ERR_clear_error(); return 0; }
    if (deflt == NULL) deflt = OSSL_PROVIDER_load(NULL, "default");
    return 1;
}

void cherald_ctx_disable_session_cache(SSL_CTX *ctx) {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 0);
}

const char *cherald_get_servername(const SSL *ssl) {
    return SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
}

/* The client's TLS session tickets: a small stack, newest on top. A TLS 1.3
 * ticket is offered once (RFC 8446 asks clients not to reuse them, and a
 * server may accept each only once); every handshake brings new ones. */
#define CHERALD_TICKETS 8

struct cherald_session_slot {
    CRYPTO_RWLOCK *lock;
    SSL_SESSION *sessions[CHERALD_TICKETS];
    int count;
};

static int cherald_slot_index = -1;
static pthread_once_t cherald_slot_once = PTHREAD_ONCE_INIT;

static void cherald_slot_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp) {
    (void)parent; (void)ad; (void)idx; (void)argl; (void)argp;
    struct cherald_session_slot *slot = ptr;
    if (slot == NULL) return;
    for (int i = 0; i < slot->count; i++) SSL_SESSION_free(slot->sessions[i]);
    CRYPTO_THREAD_lock_free(slot->lock);
    free(slot);
}

static void cherald_slot_init(void) {
    cherald_slot_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, cherald_slot_free);
}

static int cherald_new_session(SSL *ssl, SSL_SESSION *session) {
    struct cherald_session_slot *slot = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), cherald_slot_index);
    if (slot == NULL) return 0;
    SSL_SESSION *dropped = NULL;
    CRYPTO_THREAD_write_lock(slot->lock);
    if (slot->count == CHERALD_TICKETS) {
        dropped = slot->sessions[0];
        memmove(slot->sessions, slot->sessions + 1, sizeof slot->sessions[0] * (CHERALD_TICKETS - 1));
        slot->count--;
    }
    slot->sessions[slot->count++] = session; /* returning 1 hands us the reference */
    CRYPTO_THREAD_unlock(slot->lock);
    if (dropped) SSL_SESSION_free(dropped);
    return 1;
}

int cherald_ctx_enable_client_resumption(SSL_CTX *ctx) {
    pthread_once(&cherald_slot_once, cherald_slot_init);
    if (cherald_slot_index < 0) return 0;
    struct cherald_session_slot *slot = calloc(1, sizeof *slot);
    if (slot == NULL) return 0;
    slot->lock = CRYPTO_THREAD_lock_new();
    if (slot->lock == NULL || !SSL_CTX_set_ex_data(ctx, cherald_slot_index, slot)) {
        if (slot->lock) CRYPTO_THREAD_lock_free(slot->lock);
        free(slot);
        return 0;
    }
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, cherald_new_session);
    return 1;
}

void cherald_ssl_offer_session(SSL *ssl) {
    if (cherald_slot_index < 0) return;
    struct cherald_session_slot *slot = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), cherald_slot_index);
    if (slot == NULL) return;
    SSL_SESSION *offer = NULL;
    CRYPTO_THREAD_write_lock(slot->lock);
    while (slot->count > 0 && offer == NULL) {
        SSL_SESSION *top = slot->sessions[--slot->count];
        if (SSL_SESSION_is_resumable(top)) {
            offer = top;
            /* A TLS 1.2 session may be resumed again: keep it for the next connection. */
            if (SSL_SESSION_get_protocol_version(top) < TLS1_3_VERSION && SSL_SESSION_up_ref(top)) slot->sessions[slot->count++] = top;
        } else {
            SSL_SESSION_free(top);
        }
    }
    CRYPTO_THREAD_unlock(slot->lock);
    if (offer) {
        SSL_set_session(ssl, offer);
        SSL_SESSION_free(offer);
    }
}

void cherald_ctx_enable_server_resumption(SSL_CTX *ctx, const char *id_context) {
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)id_context, (unsigned int)strlen(id_context));
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    /* Stateful tickets: the ticket names a session in this context's cache.
     * A stateless ticket carries the whole session, the client's certificate
     * included, and decoding that certificate's key on every resumption is
     * the largest cost of a reconnection with OpenSSL 3 (its decoder look-ups). */
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx, 1);
}

/* Server side ALPN: the server's list (wire format), kept in the context's ex_data
 * so that it lives exactly as long as the context. */
struct cherald_alpn {
    int require;
    unsigned int length;
    unsigned char protocols[];
};

static int cherald_alpn_index = -1;
static pthread_once_t cherald_alpn_once = PTHREAD_ONCE_INIT;

static void cherald_alpn_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp) {
    (void)parent; (void)ad; (void)idx; (void)argl; (void)argp;
    free(ptr);
}

static void cherald_alpn_init(void) {
    cherald_alpn_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, cherald_alpn_free);
}

/* Whether the wire-format list `list` contains the name `name` (`name_length` bytes). */
static int cherald_alpn_contains(const unsigned char *list, unsigned int length, const unsigned char *name, unsigned int name_length) {
    unsigned int i = 0;
    while (i < length) {
        unsigned int n = list[i];
        if (n == 0 || i + 1 + n > length) return 0; /* malformed: treat as no match */
        if (n == name_length && memcmp(list + i + 1, name, n) == 0) return 1;
        i += 1 + n;
    }
    return 0;
}

static int cherald_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                               const unsigned char *in, unsigned int inlen, void *arg) {
    (void)arg;
    const struct cherald_alpn *alpn = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), cherald_alpn_index);
    if (alpn == NULL) return SSL_TLSEXT_ERR_NOACK;
    /* The server's preference decides: the first of its names the client offers. */
    unsigned int i = 0;
    while (i < alpn->length) {
        unsigned int n = alpn->protocols[i];
        if (cherald_alpn_contains(in, inlen, alpn->protocols + i + 1, n)) {
            *out = alpn->protocols + i + 1; /* OpenSSL copies it */
            *outlen = (unsigned char)n;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + n;
    }
    return alpn->require ? SSL_TLSEXT_ERR_ALERT_FATAL : SSL_TLSEXT_ERR_NOACK;
}

int cherald_ctx_set_alpn_server(SSL_CTX *ctx, const unsigned char *protocols, unsigned int length, int require) {
    pthread_once(&cherald_alpn_once, cherald_alpn_init);
    if (cherald_alpn_index < 0) return 0;
    struct cherald_alpn *alpn = malloc(sizeof *alpn + length);
    if (alpn == NULL) return 0;
    alpn->require = require;
    alpn->length = length;
    memcpy(alpn->protocols, protocols, length);
    if (!SSL_CTX_set_ex_data(ctx, cherald_alpn_index, alpn)) {
        free(alpn);
        return 0;
    }
    /* With SSL_TLSEXT_ERR_ALERT_FATAL, OpenSSL sends no_application_protocol. */
    SSL_CTX_set_alpn_select_cb(ctx, cherald_alpn_select, NULL);
    return 1;
}
