#include "CHeraldFormat.h"

#include <stdio.h>

#pragma GCC diagnostic ignored "-Wformat-nonliteral"

int herald_format_int64(char *buffer, size_t size, const char *format, long long value) {
    return snprintf(buffer, size, format, value);
}

int herald_format_uint64(char *buffer, size_t size, const char *format, unsigned long long value) {
    return snprintf(buffer, size, format, value);
}

int herald_format_double(char *buffer, size_t size, const char *format, double value) {
    return snprintf(buffer, size, format, value);
}
