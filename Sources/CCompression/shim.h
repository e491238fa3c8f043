#ifndef CCOMPRESSION_SHIM_H
#define CCOMPRESSION_SHIM_H
// zlib and zstd for PushcastInput's DecompressingByteSource (gzip and zstd token exports, read
// transparently). Both import into Swift as they are, except the two macros wrapped below.
#include <zlib.h>
#include <zstd.h>

// inflateInit2 is a function-like macro over inflateInit2_ (it passes ZLIB_VERSION and the struct size), so it does not import.
static inline int pushcast_inflateInit2(z_streamp stream, int windowBits) { return inflateInit2(stream, windowBits); }
// deflateInit2 is a function-like macro over deflateInit2_, so it does not import (tests make gzip members with it).
static inline int pushcast_deflateInit2(z_streamp stream, int level, int windowBits) {
    return deflateInit2(stream, level, Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY);
}

#endif
