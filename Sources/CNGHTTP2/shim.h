// nghttp2 imports into Swift as it is; no wrappers are needed (docs/DESIGN.md §6).
#include <nghttp2/nghttp2.h>
