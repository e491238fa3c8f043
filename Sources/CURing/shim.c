// CURing shim: wrappers for liburing macros Swift cannot import. Each one says why in CURing.h.
// _GNU_SOURCE for accept4; defined before any libc header, so every header agrees on it.
#define _GNU_SOURCE
#include "CURing.h"
#include <sys/socket.h>
#include <sys/syscall.h>
#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

unsigned curing_reap(struct io_uring *ring, struct curing_completion *out, unsigned max) {
    struct io_uring_cqe *cqe;
    unsigned head;
    unsigned count = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
        if (count == max) {
            break;
        }
        out[count].user_data = cqe->user_data;
        out[count].res = cqe->res;
        out[count].flags = cqe->flags;
        count += 1;
    }
    io_uring_cq_advance(ring, count);
    return count;
}

void curing_sqe_select_buffer(struct io_uring_sqe *sqe, uint16_t group) {
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = group;
}

uint32_t curing_setup_flags_single_issuer_defer_taskrun(void) {
    return IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
}

size_t curing_buf_ring_bytes(unsigned entries) {
    return (size_t)entries * sizeof(struct io_uring_buf);
}

int curing_accept_nonblocking(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int curing_enable_rings(struct io_uring *ring) {
    long result = syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
    return result < 0 ? -errno : 0;
}

int curing_library_path(char *out, size_t size) {
    Dl_info info;
    if (dladdr((void *)&io_uring_queue_init, &info) == 0 || info.dli_fname == NULL) {
        return -1;
    }
    char resolved[PATH_MAX];
    const char *path = realpath(info.dli_fname, resolved) != NULL ? resolved : info.dli_fname;
    if (strlen(path) + 1 > size) {
        return -1;
    }
    memcpy(out, path, strlen(path) + 1);
    return 0;
}
