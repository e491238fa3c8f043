import PushcastCore
import PushcastProviderKit
import PushcastWire

/// How often the simulated server misbehaves: each rate is a chance per request. A seed picks
/// its own mix (`FaultModel.random`), so a sweep over seeds covers calm runs and storms alike.
public struct FaultModel: Sendable, CustomStringConvertible {
    public var latencyMinNanoseconds: UInt64 = 1_000_000
    public var latencyJitterNanoseconds: UInt64 = 20_000_000
    /// RST_STREAM(REFUSED_STREAM): the server did not process the stream (safe to resend).
    public var refuse = 0.0
    /// RST_STREAM(INTERNAL_ERROR): processed or not, the client cannot tell.
    public var reset = 0.0
    public var status429 = 0.0
    public var status503 = 0.0
    public var status500 = 0.0
    /// No answer at all: the client's request deadline ends the stream (processed or not).
    public var silent = 0.0
    /// After answering this stream, GOAWAY with it as the last stream: later streams on the
    /// connection were not processed.
    public var goAway = 0.0
    /// After answering this stream, the connection dies: its other streams may or may not have
    /// been processed.
    public var drop = 0.0
    /// A proxy that contradicts itself: the stream is processed and its `:status` sent, then
    /// RST_STREAM(REFUSED_STREAM) (`cutRefuse`) or GOAWAY with last-stream-id 0 (`cutGoAway`)
    /// claims it was not. The client must never send it again.
    public var cutRefuse = 0.0
    public var cutGoAway = 0.0
    /// `mock --misbehave`'s hostile answers, after the stream is processed: a body that never
    /// ends (`hugeBody`), a 128 KiB header block (`hugeHeaders`), or the answer after a burst of
    /// PINGs (`pingFlood`). The client must give up on the first two within its limits, not know
    /// whether the device got the push, and never send it again.
    public var hugeBody = 0.0
    public var hugeHeaders = 0.0
    public var pingFlood = 0.0
    /// The whole server goes down for `outageNanoseconds` (every connection dies, connects fail).
    public var outage = 0.0
    public var outageNanoseconds: UInt64 = 2_000_000_000
    /// The share of device tokens the provider knows to be dead (410 / 404 UNREGISTERED).
    public var deadTokens = 0.03

    public init() {}

    /// A mix of faults drawn from `random`: about a third of seeds are calm, the rest storms of
    /// different kinds.
    public static func random(_ random: SplitMix64) -> FaultModel {
        var model = FaultModel()
        func rate(_ max: Double) -> Double { Double(random.next(below: 1000)) / 1000 * max }
        guard random.next(below: 3) != 0 else { return model }
        model.latencyJitterNanoseconds = 1_000_000 + random.next(below: 200_000_000)
        model.refuse = rate(0.2)
        model.reset = rate(0.02)
        model.status429 = rate(0.1)
        model.status503 = rate(0.1)
        model.status500 = rate(0.05)
        model.silent = rate(0.005)
        model.goAway = rate(0.01)
        model.drop = rate(0.005)
        model.outage = rate(0.0005)
        model.deadTokens = rate(0.1)
        // Scaled from draws already made, so that adding them left every seed's other faults,
        // crashes and timings as they were.
        model.cutRefuse = model.refuse / 40
        model.cutGoAway = model.goAway / 5
        model.hugeBody = model.reset / 8
        model.hugeHeaders = model.reset / 8
        model.pingFlood = model.drop / 2
        return model
    }

    public var description: String {
        func p(_ x: Double) -> String { String(Int((x * 1000).rounded())) + "‰" }
        return "refuse \(p(refuse)) reset \(p(reset)) 429 \(p(status429)) 503 \(p(status503)) 500 \(p(status500)) "
            + "silent \(p(silent)) goaway \(p(goAway)) drop \(p(drop)) outage \(p(outage)) dead \(p(deadTokens)) "
            + "cut-refuse \(p(cutRefuse)) cut-goaway \(p(cutGoAway)) "
            + "huge-body \(p(hugeBody)) huge-headers \(p(hugeHeaders)) ping-flood \(p(pingFlood)) "
            + "jitter \(latencyJitterNanoseconds / 1_000_000) ms"
    }
}

/// How one stream ends on the simulated server, decided when it arrives and carried out when
/// its answer is due.
enum StreamFate {
    case answer
    case status(Int)
    case refused
    case reset
    case silent
    case answerThenGoAway
    case answerThenDrop
    case answerThenOutage
    case statusThenRefused
    case statusThenGoAwayZero
    case answerHugeBody
    case answerHugeHeaders
    case pingsThenAnswer
}

/// The simulated server side of one provider: the fate of each stream, and the ledger of what
/// really reached devices (the truth the simulator's invariants are checked against). Every
/// connection of every worker of the lane talks to it; it survives a simulated crash of the
/// pushcast process, as a real provider would. What it answers is the provider's responder's,
/// the same `pushcast mock` answers with; the seed decides which device is gone and every fault.
public final class SimulatedServer {
    public let model: FaultModel
    let responder: any ProviderResponder
    let random: SplitMix64
    private let once = FirstTimeSet()
    /// Pushes that reached the device, per token.
    public private(set) var deliveries: [String: Int] = [:]
    /// Requests that arrived, per token.
    public private(set) var requests: [String: Int] = [:]
    /// Down until this time (an outage): connections are refused.
    private(set) var downUntil: UInt64 = 0
    /// Until this time the server closes every connection right after its TLS handshake (a
    /// broken server behind a working load balancer): only the breaker stops a client.
    var closesAfterHandshakeUntil: UInt64 = 0
    /// The network its connections arrive on, and the TLS context it answers them with (set by
    /// the simulated crew).
    var network: SimulatedNetwork?
    var tls: TLSContext?
    public private(set) var outages = 0

    public init(responder: any ProviderResponder, model: FaultModel, seed: UInt64) {
        self.responder = responder
        self.model = model
        random = SplitMix64(seed: seed)
    }

    /// Whether the provider considers this token dead (a fixed hash, so both runs of a crash and
    /// resume agree).
    public func isDead(_ token: String) -> Bool {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in token.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Double(hash % 10_000) < model.deadTokens * 10_000
    }

    func isUp(at now: UInt64) -> Bool { now >= downUntil }

    /// A stream arrived: how it will end, and after how long.
    func arrive(token: String) -> (fate: StreamFate, latency: UInt64) {
        requests[token, default: 0] += 1
        let latency = model.latencyMinNanoseconds + random.next(below: max(1, model.latencyJitterNanoseconds))
        let roll = Double(random.next(below: 1_000_000)) / 1_000_000
        var edge = 0.0
        let table: [(Double, StreamFate)] = [
            (model.refuse, .refused), (model.reset, .reset), (model.status429, .status(429)), (model.status503, .status(503)),
            (model.status500, .status(500)), (model.silent, .silent), (model.goAway, .answerThenGoAway),
            (model.drop, .answerThenDrop), (model.outage, .answerThenOutage),
            (model.cutRefuse, .statusThenRefused), (model.cutGoAway, .statusThenGoAwayZero),
            (model.hugeBody, .answerHugeBody), (model.hugeHeaders, .answerHugeHeaders), (model.pingFlood, .pingsThenAnswer),
        ]
        for (rate, fate) in table {
            edge += rate
            if roll < edge { return (fate, latency) }
        }
        return (.answer, latency)
    }

    /// The wall time the provider's answers carry: a fixed epoch plus the virtual clock.
    static let epochMilliseconds: Int64 = 1_767_225_600_000

    /// What the provider's responder needs for one request: the virtual wall time, the seed's
    /// draws, and the device's fate, which the seed decided (`isDead`).
    private func context(token: String) -> ProviderRequestContext {
        let network = network
        return ProviderRequestContext(wallMilliseconds: { Self.epochMilliseconds + Int64((network?.now ?? 0) / 1_000_000) },
                                      random: random, once: once, device: isDead(token) ? .unregistered : .registered)
    }

    /// The server processes the notification through the provider's rules: a live token the rules
    /// accept gets the push (counted), a dead one the provider's "unregistered" answer.
    func process(_ request: HTTP2ServerRequest, token: String) -> HTTP2Response {
        let answer = responder.respond(to: request, context: context(token: token))
        if answer.kind == .accepted { deliveries[token, default: 0] += 1 }
        return HTTP2Response(status: answer.status, headers: answer.allHeaders, body: answer.body)
    }

    /// The provider's answer to a 429, 500 or 503 the seed chose instead of processing.
    func transient(status: Int, to request: HTTP2ServerRequest, token: String) -> HTTP2Response {
        let fault: ProviderServerFault = status == 429 ? .throttled(retryAfterSeconds: 1, scope: .device) : .serverError(status: status)
        let answer = responder.answer(fault, to: request, context: context(token: token))
        return HTTP2Response(status: answer.status, headers: answer.allHeaders, body: answer.body)
    }

    /// A stream whose end the client will not see (reset, lost, timed out): whether the server
    /// had processed it is a coin toss.
    func maybeProcess(_ request: HTTP2ServerRequest, token: String) {
        if random.next(below: 2) == 0 { _ = process(request, token: token) }
    }

    func startOutage(at now: UInt64, lasting: UInt64? = nil) {
        downUntil = now + (lasting ?? model.outageNanoseconds)
        outages += 1
    }

    /// A connection arrives: the real server side of TLS and HTTP/2 takes it.
    func accept(_ link: SimulatedLink) -> SimulatedServerConnection? {
        guard let network, let tls, let channel = try? ServerConnection(context: tls, limits: Limits()) else { return nil }
        return SimulatedServerConnection(link: link, server: self, network: network, channel: channel,
                                         closesAfterHandshake: network.now < closesAfterHandshakeUntil)
    }
}
