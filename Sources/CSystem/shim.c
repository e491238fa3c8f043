#define _GNU_SOURCE
#include "CSystem.h"
#include <fcntl.h>

int csystem_reserve_space(int fd, int64_t offset, int64_t length) {
    return fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length);
}
