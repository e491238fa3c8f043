// The seam between the public `Reactor` and the two kernel interfaces. Both backends share the
// `SlotTable` (slots, generations, staging buffers); each one owns its kernel objects.

import Glibc

protocol ReactorBackend: AnyObject {
    var kind: IOBackendKind { get }
    var receiveMode: ReceiveMode { get }
    /// Completions (or readiness events) dropped because their slot generation was stale.
    var staleCompletionsDropped: Int { get }
    /// True when the next turn has work that must not wait (events already known).
    var hasImmediateWork: Bool { get }

    /// A fresh non-blocking TCP socket (TCP_NODELAY) for `connect`; the simulated backend has none (-1).
    func makeStreamSocket(family: sa_family_t) throws(ReactorError) -> Int32
    /// The slot at `index` holds a fresh socket and its peer address; start connecting.
    func startConnect(_ index: UInt32)
    /// The slot at `index` holds a listening socket; start accepting continuously.
    func startAccepting(_ index: UInt32) throws(ReactorError)
    /// Invalidates the slot's generation at once; the fd is closed and the slot freed once no
    /// kernel operation references it any more.
    func close(_ index: UInt32)
    /// Starts watching an eventfd whose counter another thread bumps to end a wait.
    func registerWaker(fd: Int32) throws(ReactorError)
    /// One loop turn: submit staged work, wait at most `waitNanoseconds` (nil: until something
    /// happens) for a completion, reap a batch, then dispatch it.
    func turn(waitNanoseconds: UInt64?, _ handle: (ReactorEvent) -> Void) throws(ReactorError)
    /// Test hook: dispatch a synthetic completion for `index` carrying `generation`, as if the
    /// kernel had reported an error on the slot's receive side.
    func injectReceiveError(index: UInt32, generation: UInt32, errno code: Int32,
                            _ handle: (ReactorEvent) -> Void)
    /// Cancels and closes everything; the backend is unusable afterwards.
    func shutdown()
}

extension ReactorBackend {
    func makeStreamSocket(family: sa_family_t) throws(ReactorError) -> Int32 {
        let fd = try Sockets.makeStreamSocket(family: family)
        do throws(ReactorError) {
            try Sockets.setNoDelay(fd)
        } catch {
            Glibc.close(fd)
            throw error
        }
        return fd
    }
}

/// What to do when creating an io_uring ring failed (docs/DESIGN.md §6).
enum URingInitFallback: Equatable {
    case useEpoll(notice: String)
    case fail(description: String)
}

extension Reactor {
    /// `result` is io_uring_queue_init's return value (a negative errno). io_uring that is blocked
    /// (-EPERM: seccomp, kernel.io_uring_disabled) or absent (-ENOSYS) means epoll when the caller
    /// did not insist on io_uring; anything else is an error.
    static func fallbackAfterURingInitFailure(result: Int32, requested: IOBackendKind?) -> URingInitFallback {
        let code = -result
        let reason = errnoDescription(code)
        if requested == nil && (code == EPERM || code == ENOSYS) {
            return .useEpoll(notice: "pushcast: io_uring unavailable (\(reason)); using epoll")
        }
        return .fail(description: "io_uring_queue_init: \(reason) (errno \(code))")
    }
}
