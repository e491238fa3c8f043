// In-memory harness for the HTTP/2 session tests: a client and a server session joined by a pump
// that moves bytes both ways until neither has anything to say (docs/DESIGN.md §2.8, second layer).
// A frame scanner watches each direction so that tests can assert what went on the wire.

import CNGHTTP2
import PushcastCore
import PushcastWire
import XCTest

/// One frame header seen on the wire.
struct WireFrame: Equatable {
    var type: UInt8
    var flags: UInt8
    var streamID: Int32
    var length: Int
    /// The first 8 payload bytes (enough for a GOAWAY's last-stream-id and error code).
    var payloadPrefix: [UInt8]

    static let data: UInt8 = 0x0, headers: UInt8 = 0x1, rstStream: UInt8 = 0x3, settings: UInt8 = 0x4
    static let ping: UInt8 = 0x6, goAway: UInt8 = 0x7, windowUpdate: UInt8 = 0x8
    static let ack: UInt8 = 0x1
}

/// Splits a byte stream into HTTP/2 frames (RFC 9113 §4.1), across arbitrary chunk boundaries.
struct FrameScanner {
    private var prefaceLeft: Int
    private var header: [UInt8] = []
    private var payloadLeft = 0
    private var current: WireFrame?
    private(set) var frames: [WireFrame] = []

    init(skipsClientPreface: Bool) { prefaceLeft = skipsClientPreface ? 24 : 0 }

    mutating func scan(_ bytes: UnsafeRawBufferPointer) {
        var i = 0
        while i < bytes.count {
            if prefaceLeft > 0 {
                let n = min(prefaceLeft, bytes.count - i)
                prefaceLeft -= n
                i += n
            } else if payloadLeft > 0 {
                let n = min(payloadLeft, bytes.count - i)
                if var frame = current, frame.payloadPrefix.count < 8 {
                    let take = min(n, 8 - frame.payloadPrefix.count)
                    frame.payloadPrefix.append(contentsOf: bytes[i..<(i + take)])
                    current = frame
                }
                payloadLeft -= n
                i += n
                if payloadLeft == 0, let frame = current { frames.append(frame); current = nil }
            } else {
                header.append(bytes[i])
                i += 1
                if header.count == 9 {
                    let length = Int(header[0]) << 16 | Int(header[1]) << 8 | Int(header[2])
                    let streamID = Int32(header[5] & 0x7F) << 24 | Int32(header[6]) << 16 | Int32(header[7]) << 8 | Int32(header[8])
                    let frame = WireFrame(type: header[3], flags: header[4], streamID: streamID, length: length, payloadPrefix: [])
                    header.removeAll(keepingCapacity: true)
                    if length == 0 { frames.append(frame) } else { current = frame; payloadLeft = length }
                }
            }
        }
    }

    func count(of type: UInt8, flags: UInt8? = nil) -> Int {
        frames.filter { $0.type == type && (flags == nil || $0.flags & flags! == flags!) }.count
    }
}

/// A client and a server session joined in memory.
final class HTTP2Pair {
    let clock: ManualClock
    let client: HTTP2ClientSession
    let server: HTTP2ServerSession
    var clientEvents: [HTTP2ClientEvent] = []
    var serverEvents: [HTTP2ServerEvent] = []
    var clientFrames = FrameScanner(skipsClientPreface: true)
    var serverFrames = FrameScanner(skipsClientPreface: false)
    /// Whether the pump records frames (costly for the big runs).
    var scansFrames = true
    /// Called for each server event as it is drained; the default answers 200 with the path.
    var onServerEvent: (HTTP2ServerEvent, HTTP2ServerSession) -> Void = { event, server in
        if case .request(let request) = event {
            server.respond(streamID: request.streamID, status: 200, headers: [], body: Array(request.path.utf8))
        }
    }
    /// Called for each client event as it is drained.
    var onClientEvent: (HTTP2ClientEvent) -> Void = { _ in }
    private var buffer: UnsafeMutableRawBufferPointer

    init(clientLimits: Limits = Limits(), serverLimits: Limits = Limits(), clock: ManualClock = ManualClock(),
         bufferBytes: Int = 16 * 1024) throws {
        self.clock = clock
        client = try HTTP2ClientSession(limits: clientLimits, clock: clock)
        server = try HTTP2ServerSession(limits: serverLimits)
        buffer = .allocate(byteCount: bufferBytes, alignment: 16)
    }

    deinit { buffer.deallocate() }

    /// Client output to the server; returns the bytes moved.
    @discardableResult
    func moveClientToServer() throws -> Int {
        var moved = 0
        while true {
            let n = client.produce(into: buffer)
            if n == 0 { break }
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            if scansFrames { clientFrames.scan(bytes) }
            try server.receive(bytes)
            moved += n
        }
        drainServerEvents()
        return moved
    }

    /// Server output to the client; returns the bytes moved.
    @discardableResult
    func moveServerToClient() throws -> Int {
        var moved = 0
        while true {
            let n = server.produce(into: buffer)
            if n == 0 { break }
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            if scansFrames { serverFrames.scan(bytes) }
            try client.receive(bytes)
            moved += n
        }
        drainClientEvents()
        return moved
    }

    /// Client output produced and thrown away (a dead link); returns the bytes dropped.
    @discardableResult
    func dropClientOutput() -> Int {
        var dropped = 0
        while true {
            let n = client.produce(into: buffer)
            if n == 0 { break }
            if scansFrames { clientFrames.scan(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) }
            dropped += n
        }
        drainClientEvents()
        return dropped
    }

    /// Moves bytes both ways until neither side has anything to send.
    func pump(roundsMax: Int = 1_000_000) throws {
        for _ in 0..<roundsMax {
            let moved = try moveClientToServer() + moveServerToClient()
            if moved == 0 && !client.wantsWrite && !server.wantsWrite { return }
        }
        XCTFail("pump did not go quiet")
    }

    func drainClientEvents() {
        client.takeEvents { event in
            clientEvents.append(event)
            onClientEvent(event)
        }
    }

    func drainServerEvents() {
        server.takeEvents { event in
            serverEvents.append(event)
            onServerEvent(event, server)
        }
    }

    static func request(_ path: String, body: [UInt8] = []) -> HTTP2Request {
        HTTP2Request(authority: "api.push.example", path: path,
                     headers: [HTTP2Header("apns-topic", "com.example.app"), HTTP2Header("apns-push-type", "alert")],
                     body: body)
    }
}

extension HTTP2ClientEvent {
    var tag: UInt64? {
        switch self {
        case .response(let tag, _), .failed(let tag, _): return tag
        case .goAway, .settingsChanged, .pingTimedOut, .closed: return nil
        }
    }

    var failure: HTTP2StreamFailure? {
        if case .failed(_, let failure) = self { return failure }
        return nil
    }

    var response: HTTP2Response? {
        if case .response(_, let response) = self { return response }
        return nil
    }

    var isClosed: Bool {
        if case .closed = self { return true }
        return false
    }
}
