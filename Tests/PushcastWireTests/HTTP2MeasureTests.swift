// A micro-measure, not a timed assertion: CPU time per request for client plus server, in
// memory, over one connection. By default it runs 10,000 requests and checks each got its answer;
// for a real figure run it in release with more:
//   PUSHCAST_MEASURE_REQUESTS=100000 swift test -c release --filter HTTP2MeasureTests

#if canImport(Glibc)
import Glibc
#endif
import PushcastCore
import PushcastWire
import XCTest

final class HTTP2MeasureTests: XCTestCase {
    func testCPUTimePerRequest() throws {
        let total = getenv("PUSHCAST_MEASURE_REQUESTS").flatMap { Int(String(cString: $0)) } ?? 10_000
        var serverLimits = Limits()
        serverLimits.streamsPerConnectionMax = 1000
        let pair = try HTTP2Pair(serverLimits: serverLimits)
        pair.scansFrames = false
        try pair.pump()

        let payload = Array(#"{"aps":{"alert":"Hello","badge":1}}"#.utf8)
        let headers = [HTTP2Header("apns-topic", "com.example.app"), HTTP2Header("apns-push-type", "alert"),
                       HTTP2Header("authorization", "bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyMyJ9.e30.sig")]
        let paths = (0..<1000).map { "/3/device/\(String(repeating: "a", count: 56))\($0)" }
        var ok = 0
        pair.onServerEvent = { event, server in
            if case .request(let request) = event {
                server.respond(streamID: request.streamID, status: 200, headers: [HTTP2Header("apns-id", "77B4A0F1-5D5E-4C1B-9A3E-1C2D3E4F5A6B")], body: [])
            }
        }
        pair.onClientEvent = { event in
            if case .response(_, let response) = event, response.status == 200 { ok += 1 }
        }
        var start = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start)
        var next = 0
        while ok < total {
            while next < total {
                if pair.client.canOpenStream {
                    _ = pair.client.submit(HTTP2Request(authority: "api.push.apple.com", path: paths[next % 1000], headers: headers, body: payload),
                                           tag: UInt64(next))
                    next += 1
                } else if pair.client.streamsOpen < pair.client.streamsAllowed && pair.client.wantsWrite {
                    try pair.moveClientToServer()
                } else {
                    break
                }
            }
            try pair.pump()
        }
        var end = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &end)
        let nanoseconds = Double(end.tv_sec - start.tv_sec) * 1e9 + Double(end.tv_nsec - start.tv_nsec)
        XCTAssertEqual(ok, total)
        print("HTTP2 measure: \(total) requests, client+server CPU \(nanoseconds / Double(total) / 1000) µs per request")
    }
}
