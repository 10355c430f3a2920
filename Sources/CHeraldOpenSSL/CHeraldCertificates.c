// Throwaway certificates for tests and `herald certs`: EC P-256 keys, X.509 v3.
#include "CHeraldOpenSSL.h"
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509v3.h>

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL) return 0;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

int cherald_make_certificate(const char *common_name, const char *subject_alt_names, int is_ca, int purpose,
                             long not_before_offset, long not_after_offset, long serial,
                             X509 *issuer_cert, EVP_PKEY *issuer_key, X509 **out_cert, EVP_PKEY **out_key) {
    *out_cert = NULL;
    *out_key = NULL;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (key == NULL) return 0;
    X509 *cert = X509_new();
    if (cert == NULL) { EVP_PKEY_free(key); return 0; }
    int ok = X509_set_version(cert, 2)
        && ASN1_INTEGER_set(X509_get_serialNumber(cert), serial)
        && X509_gmtime_adj(X509_getm_notBefore(cert), not_before_offset) != NULL
        && X509_gmtime_adj(X509_getm_notAfter(cert), not_after_offset) != NULL
        && X509_set_pubkey(cert, key);
    X509_NAME *name = X509_get_subject_name(cert);
    ok = ok && X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"Herald throwaway", -1, -1, 0)
            && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)common_name, -1, -1, 0);
    X509 *issuer = issuer_cert ? issuer_cert : cert;
    EVP_PKEY *signer = issuer_key ? issuer_key : key;
    ok = ok && X509_set_issuer_name(cert, X509_get_subject_name(issuer));
    if (is_ca) {
        ok = ok && add_ext(cert, issuer, NID_basic_constraints, "critical,CA:TRUE")
                && add_ext(cert, issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        ok = ok && add_ext(cert, issuer, NID_basic_constraints, "critical,CA:FALSE")
                && add_ext(cert, issuer, NID_key_usage, "critical,digitalSignature");
        if (purpose == 1) ok = ok && add_ext(cert, issuer, NID_ext_key_usage, "serverAuth");
        if (purpose == 2) ok = ok && add_ext(cert, issuer, NID_ext_key_usage, "clientAuth");
    }
    ok = ok && add_ext(cert, issuer, NID_subject_key_identifier, "hash");
    if (issuer_cert) ok = ok && add_ext(cert, issuer, NID_authority_key_identifier, "keyid:always");
    if (subject_alt_names && subject_alt_names[0]) ok = ok && add_ext(cert, issuer, NID_subject_alt_name, subject_alt_names);
    ok = ok && X509_sign(cert, signer, EVP_sha256()) > 0;
    if (!ok) { X509_free(cert); EVP_PKEY_free(key); return 0; }
    *out_cert = cert;
    *out_key = key;
    return 1;
}

int cherald_write_certificate_pem(BIO *bio, X509 *cert) {
    return PEM_write_bio_X509(bio, cert);
}

int cherald_write_private_key_pem(BIO *bio, EVP_PKEY *key, const char *passphrase) {
    if (passphrase == NULL) return PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL);
    return PEM_write_bio_PrivateKey(bio, key, EVP_aes_256_cbc(), NULL, 0, NULL, (void *)passphrase);
}

int cherald_write_pkcs12(BIO *bio, const char *password, const char *friendly_name, EVP_PKEY *key, X509 *cert, X509 *ca) {
    STACK_OF(X509) *chain = sk_X509_new_null();
    if (chain == NULL) return 0;
    if (ca) sk_X509_push(chain, ca);
    PKCS12 *p12 = PKCS12_create(password, friendly_name, key, cert, chain, 0, 0, 0, 0, 0);
    sk_X509_free(chain);
    if (p12 == NULL) return 0;
    int ok = i2d_PKCS12_bio(bio, p12);
    PKCS12_free(p12);
    return ok;
}
