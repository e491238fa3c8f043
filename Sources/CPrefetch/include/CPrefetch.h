#ifndef CPREFETCH_H
#define CPREFETCH_H
// CPrefetch: the one cache hint Swift cannot express, for PushcastCore's Prefetch.

/// Why: Swift has no prefetch. Asks the CPU to start loading the cache line at `address` for
/// reading (GCC/Clang's __builtin_prefetch); it never faults, whatever the address.
static inline void cprefetch_read(const void *address) { __builtin_prefetch(address, 0, 3); }

#endif
