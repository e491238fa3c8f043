#ifndef CURING_H
#define CURING_H
// liburing.h defines _GNU_SOURCE/_XOPEN_SOURCE before it includes libc headers; including
// <features.h> first keeps Glibc's fd_set consistent with Foundation's (design.md section 6).
#include <features.h>
#include <liburing.h>
#endif
