// Every COpenSSL wrapper is a `static inline` in include/COpenSSL.h; this file exists because a C
// target needs at least one source file.
#include "COpenSSL.h"
