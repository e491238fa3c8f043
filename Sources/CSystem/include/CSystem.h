#ifndef CSYSTEM_H
#define CSYSTEM_H
// CSystem: the file calls PushcastSystem cannot import from Glibc's Swift module.
#include <stdint.h>

/// Why: fallocate(2) is a GNU extension that Glibc's Swift module leaves out. Allocates blocks
/// for [offset, offset + length) without changing the file's size (FALLOC_FL_KEEP_SIZE), so later
/// writes there cannot fail for want of space. Returns 0, or -1 with errno set.
int csystem_reserve_space(int fd, int64_t offset, int64_t length);

#endif
