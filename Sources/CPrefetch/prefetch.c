// The hint is a static inline function of the header; a C target needs one source file.
#include "CPrefetch.h"
