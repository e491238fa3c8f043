import PushcastCore
import PushcastSystem
import PushcastWire

/// One request, one response, on a connection of its own: the OAuth2 token exchange, which
/// happens once an hour and must not wait behind a campaign's streams.
public enum SingleRequest {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    private final class Workload: ClientWorkload {
        var request: HTTP2Request?
        var result: Result<HTTP2Response, Failure> = .failure(Failure(description: "no answer"))
        var done = false
        init(_ request: HTTP2Request) { self.request = request }
        func nextRequest() -> (request: HTTP2Request, tag: UInt64)? {
            guard let request else { return nil }
            self.request = nil
            return (request, 1)
        }
        func received(tag: UInt64, response: HTTP2Response) {
            result = .success(response)
            done = true
        }
        func failed(tag: UInt64, failure: HTTP2StreamFailure) {
            result = .failure(Failure(description: failure.explanation))
            done = true
        }
        var isExhausted: Bool { done }
        var nextReadyNanoseconds: UInt64? { nil }
    }

    /// Sends `request` over a fresh connection and waits for the answer.
    public static func perform(_ request: HTTP2Request, client: ClientConfiguration) -> Result<HTTP2Response, Failure> {
        let workload = Workload(request)
        do throws(TransportError) {
            let worker = try ClientWorker(configuration: client, connectionCount: 1, workload: workload,
                                          clock: TurnClock(source: SystemClock.Monotonic()))
            try worker.run()
        } catch {
            return .failure(Failure(description: error.description))
        }
        return workload.result
    }
}
