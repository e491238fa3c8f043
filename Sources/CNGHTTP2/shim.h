// nghttp2 imports into Swift as it is; no wrappers are needed (design.md section 6).
#include <nghttp2/nghttp2.h>
