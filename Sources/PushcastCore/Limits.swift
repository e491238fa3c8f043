/// Every bound in one place, sized at start-up (docs/DESIGN.md §2.4). The relations between them are
/// checked by `validate()`, which the CLI calls before anything starts.
public struct Limits: Sendable, Equatable {
    /// Connections per provider (or per `bench` run).
    public var connectionsMax: Int = 4
    /// Local cap on concurrent streams per connection; the peer's SETTINGS may lower it further.
    public var streamsPerConnectionMax: Int = 1000
    /// Bytes of HTTP/2 output a connection may hold unsent before it stops producing more
    /// (h2load backs off at 16 KiB).
    public var pendingOutputBytesMax: Int = 16 * 1024
    /// Plaintext is batched into SSL_write calls of up to this size.
    public var tlsWriteBatchBytes: Int = 16 * 1024
    /// Per-socket staging buffer for ciphertext waiting to be sent.
    public var socketSendBufferBytes: Int = 256 * 1024
    /// Size of each provided receive buffer, and how many there are per worker.
    public var receiveBufferBytes: Int = 16 * 1024
    public var receiveBufferCount: Int = 256
    /// The most response-body bytes kept per stream (APNs error bodies are tiny).
    public var responseBodyBytesMax: Int = 4096
    /// A response body over this many bytes fails its stream (`.responseBodyTooLarge`, reset
    /// with CANCEL): APNs and FCM answers are a few hundred bytes, so a bigger one is a broken or
    /// hostile server, and reading it on would only burn bandwidth and CPU.
    public var responseBodyBytesAccepted: Int = 64 * 1024
    /// A response header block over this many bytes (names and values plus 32 bytes a field, as
    /// RFC 9113 §6.5.2 counts a header list) fails its stream the same way
    /// (`.responseHeadersTooLarge`).
    public var responseHeaderBytesAccepted: Int = 64 * 1024
    /// Response headers a client keeps (lower-case names); the rest are skipped without making
    /// Strings for them. APNs answers carry apns-id (and apns-unique-id in development); FCM's
    /// quota errors carry retry-after.
    public var responseHeadersKept: [String] = ["apns-id", "apns-unique-id", "retry-after", "content-type"]
    /// Whether those headers are kept on a 2xx answer too. A campaign turns this off: a success
    /// needs none of them (the apns-id is the one it sent), which saves an array and a String per
    /// notification.
    public var responseHeadersKeptOnSuccess = true
    /// The most request-body bytes a server stream accepts.
    public var requestBodyBytesMax: Int = 8192
    /// HTTP/2 local flow-control window (per stream and per connection).
    public var windowBytes: Int32 = 1 << 30
    /// Liveness: PING after this much silence, and give up if no ACK within the timeout.
    public var pingIntervalNanoseconds: UInt64 = 30_000_000_000
    public var pingTimeoutNanoseconds: UInt64 = 10_000_000_000
    /// Per-request deadline, from submission to the end of the response.
    public var requestTimeoutNanoseconds: UInt64 = 30_000_000_000

    public init() {}

    public var streamsInFlightMax: Int { connectionsMax * streamsPerConnectionMax }

    public func validate() throws(LimitsError) {
        guard connectionsMax >= 1 && connectionsMax <= 4096 else { throw LimitsError("connections must be 1...4096") }
        guard streamsPerConnectionMax >= 1 && streamsPerConnectionMax <= 100_000 else {
            throw LimitsError("streams must be 1...100000")
        }
        guard pendingOutputBytesMax >= 1024 else { throw LimitsError("pending output must be at least 1 KiB") }
        guard socketSendBufferBytes >= 2 * tlsWriteBatchBytes + 1024 else {
            throw LimitsError("socket send buffer must hold two TLS write batches")
        }
        guard responseBodyBytesAccepted >= responseBodyBytesMax && responseHeaderBytesAccepted >= 1024 else {
            throw LimitsError("a response must be accepted up to the bytes kept of it, and a header block up to 1 KiB at least")
        }
        guard receiveBufferCount > 0 && receiveBufferCount & (receiveBufferCount - 1) == 0 else {
            throw LimitsError("receive buffer count must be a power of two")
        }
    }
}

public struct LimitsError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
