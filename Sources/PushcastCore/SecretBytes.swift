// Credential bytes (private keys, service-account files, certificates) as they come out of a file:
// in memory of their own, never in an Array (which copies itself where nobody can wipe it), and
// wiped with explicit_bzero, which the optimizer may not drop, when the last reference goes.
// PushcastReactor's `SecretFile.read` fills them; the sans-I/O modules that parse credentials
// (PushcastAPNs, PushcastFCM, PushcastWire) are handed a `SecretFileReader` and never call the kernel.
import Glibc

/// Reads a whole credential file, at most `bytesMax` bytes, into wiped memory. PushcastReactor's
/// `SecretFile.read` is the one implementation; tests may pass their own.
public typealias SecretFileReader = (_ path: String, _ bytesMax: Int) throws(SecretFileError) -> SecretBytes

/// Why a credential file could not be read. Never holds any of its bytes; the caller names the file.
public enum SecretFileError: Error, Sendable, Equatable {
    /// Opening the file failed (the system's words: "No such file or directory").
    case cannotOpen(reason: String)
    /// Reading it failed.
    case cannotRead(reason: String)
    /// The file holds more than `bytesMax` bytes.
    case tooLarge(bytesMax: Int)

    /// What failed, for "cannot open …" / "cannot read …" messages.
    public var verb: String {
        if case .cannotOpen = self { return "open" }
        return "read"
    }

    /// Why: the system's words, or "larger than 64 KiB".
    public var reason: String {
        switch self {
        case .cannotOpen(let reason), .cannotRead(let reason): return reason
        case .tooLarge(let bytesMax): return "larger than " + Self.size(bytesMax)
        }
    }

    /// `bytes` in KiB or MiB, as limits are written.
    public static func size(_ bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes >> 10) KiB"
    }
}

/// Bytes that may be key material, wiped when released. Fill it with `reserve` / `didAppend`; read
/// it with `withUnsafeBytes` (do not copy the bytes out into arrays or strings that outlive the call).
public final class SecretBytes {
    private var storage: UnsafeMutableRawBufferPointer
    public private(set) var count = 0

    public init(capacity: Int) {
        storage = .allocate(byteCount: max(capacity, 1), alignment: 1)
    }

    /// A copy of `bytes` (tests, and keys generated in memory).
    public convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(capacity: bytes.count)
        storage.copyMemory(from: bytes)
        count = bytes.count
    }

    deinit {
        Self.wipe(storage)
        storage.deallocate()
    }

    /// The room after the bytes held, at least `minimum` bytes: the storage doubles when full, and
    /// the storage it leaves is wiped first.
    public func spareCapacity(minimum: Int) -> UnsafeMutableRawBufferPointer {
        if storage.count - count < minimum {
            let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: max(storage.count * 2, count + minimum), alignment: 1)
            larger.copyMemory(from: UnsafeRawBufferPointer(rebasing: storage[0..<count]))
            Self.wipe(storage)
            storage.deallocate()
            storage = larger
        }
        return UnsafeMutableRawBufferPointer(rebasing: storage[count...])
    }

    /// `appended` bytes were written at the start of the last `spareCapacity`.
    public func didAppend(_ appended: Int) {
        precondition(appended >= 0 && count + appended <= storage.count, "appended beyond the spare capacity")
        count += appended
    }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }

    /// Zeroes `buffer` in a way the optimizer may not remove as a dead store.
    public static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        explicit_bzero(base, buffer.count)
    }
}
