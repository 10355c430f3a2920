#ifndef C_HERALD_ZLIB_H
#define C_HERALD_ZLIB_H
#include <zlib.h>

/// deflateInit2 is a macro: start a gzip-wrapped deflate stream (what zcat reads).
int herald_deflate_init_gzip(z_stream *stream, int level);
/// inflateInit2 is a macro: start inflating a gzip stream (windowBits 15 + 16).
int herald_inflate_init_gzip(z_stream *stream);

#endif
