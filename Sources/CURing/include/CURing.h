#ifndef CURING_H
#define CURING_H
// CURing: liburing 2.3 for Swift, plus the few wrappers Swift cannot import directly.
//
// liburing.h defines _GNU_SOURCE/_XOPEN_SOURCE before it includes libc headers; including
// <features.h> first keeps Glibc's fd_set consistent with Foundation's (docs/DESIGN.md §6).
#include <features.h>
#include <liburing.h>
#include <stdint.h>
// Glibc's Swift module leaves these out; the reactor's epoll backend and waker need them.
#include <sys/epoll.h>
#include <sys/eventfd.h>

/// One completion copied out of the CQ ring, so the ring slot is released before any handler runs.
struct curing_completion {
    uint64_t user_data;
    int32_t res;
    uint32_t flags;
};

/// Why: io_uring_for_each_cqe is a macro, which Swift cannot import. Copies up to `max` CQEs into
/// `out`, marks them seen with one io_uring_cq_advance, and returns how many it copied.
unsigned curing_reap(struct io_uring *ring, struct curing_completion *out, unsigned max);

/// Why: IOSQE_BUFFER_SELECT is a macro built from an enum bit, and `buf_group` sits in an
/// anonymous union. Marks the SQE to pick a buffer from provided-buffer group `group`.
void curing_sqe_select_buffer(struct io_uring_sqe *sqe, uint16_t group);

/// Why: the IORING_SETUP_* flags are plain macros but are easier to keep together with the
/// fallback. Returns IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN.
uint32_t curing_setup_flags_single_issuer_defer_taskrun(void);

/// Why: the buffer-ring struct is a union with a flexible array member, which Swift imports
/// poorly. Size in bytes of a buffer ring of `entries` entries.
size_t curing_buf_ring_bytes(unsigned entries);

/// Why: liburing 2.3 declares io_uring_enable_rings but its shared library does not export it
/// (nor io_uring_register), so this calls io_uring_register(2) directly. Enables a ring created
/// with IORING_SETUP_R_DISABLED; returns 0 or -errno.
int curing_enable_rings(struct io_uring *ring);

/// Why: accept4 is declared only under _GNU_SOURCE, which Swift's Glibc module does not set.
/// accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); -1 with errno set on failure.
int curing_accept_nonblocking(int fd);

/// Why: liburing 2.3 has no call that returns its version (io_uring_major_version came in 2.4),
/// so `pushcast version` reads it from the file the dynamic linker loaded io_uring_queue_init
/// from, resolved through its symlinks (liburing.so.2 -> liburing.so.2.3). Writes that path into
/// `out` (NUL-terminated); returns 0, or -1 when there is none (a static link) or it is too long.
int curing_library_path(char *out, size_t size);

#endif
