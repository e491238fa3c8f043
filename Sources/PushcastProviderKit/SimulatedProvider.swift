import PushcastCore
import PushcastWire

/// What a provider's server says, in its own words, for the simulator's server to send back.
/// Each provider module has one (`APNsSimulatedAnswers`, `FCMSimulatedAnswers`): the simulator's
/// servers, the real HTTP/2 and TLS server sessions, send what it says under the seed's faults.
public protocol SimulatedProvider: AnyObject {
    var provider: ProviderID { get }
    /// The device token a request is addressed to, from its `:path` and body as the server got them.
    func token(path: String, body: [UInt8]) -> String
    func accepted(_ random: SplitMix64) -> HTTP2Response
    /// The token is dead: the answer that makes pushcast prune it.
    func unregistered() -> HTTP2Response
    /// An error the client should retry: 429, 500 or 503.
    func transient(status: Int) -> HTTP2Response
}

