#include "CHeraldZlib.h"
#include <string.h>

int herald_deflate_init_gzip(z_stream *stream, int level) {
    memset(stream, 0, sizeof(*stream));
    return deflateInit2(stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
}

int herald_inflate_init_gzip(z_stream *stream) {
    memset(stream, 0, sizeof(*stream));
    return inflateInit2(stream, 15 + 16);
}
