#ifndef CHERALD_FORMAT_H
#define CHERALD_FORMAT_H

#include <stddef.h>

/// snprintf with one typed argument: Swift reaches C's printf without building
/// a va_list of existentials (withVaList casts each argument dynamically).
/// `format` is one conversion a FormatSpecifier compiled (`%05lld`, `%.2f`).
int herald_format_int64(char *buffer, size_t size, const char *format, long long value);
int herald_format_uint64(char *buffer, size_t size, const char *format, unsigned long long value);
int herald_format_double(char *buffer, size_t size, const char *format, double value);

#endif
