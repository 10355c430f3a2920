// jemalloc (Debian's libjemalloc-dev), linked into the herald executable only: it
// replaces malloc and free for the whole process. Only mallctl is declared here
// (jemalloc.h declares malloc and free again, beside the C library's).
#include <stddef.h>
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
