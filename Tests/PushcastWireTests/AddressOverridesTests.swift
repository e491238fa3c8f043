import PushcastWire
import XCTest

/// `--resolve HOST:PORT:ADDRESS` and `--connect-to HOST:PORT:ADDRESS:PORT2`, read as curl reads them.
final class AddressOverridesTests: XCTestCase {
    func testEntriesPinAHostAndPortToAnAddress() throws {
        let overrides = try AddressOverrides(["Push-A.test:8443:127.0.0.1", "[::1]:443:[::1]", "push-a.test:443:10.0.0.7",
                                              "push-a.test:8443:127.0.0.2"])
        XCTAssertEqual(overrides.address(for: Endpoint(host: "push-a.test", port: 8443)), "127.0.0.2", "the later entry wins")
        XCTAssertEqual(overrides.address(for: Endpoint(host: "PUSH-A.TEST", port: 443)), "10.0.0.7")
        XCTAssertEqual(overrides.address(for: Endpoint(host: "::1", port: 443)), "::1")
        XCTAssertNil(overrides.address(for: Endpoint(host: "push-b.test", port: 443)))
        XCTAssertNil(AddressOverrides().address(for: Endpoint(host: "push-a.test", port: 443)))
    }

    func testMalformedEntriesAreRefusedNamingThem() {
        for (entry, message) in [("push-a.test:443", "expected HOST:PORT:ADDRESS"), ("push-a.test", "expected HOST:PORT:ADDRESS"),
                                 ("push-a.test:0:127.0.0.1", "the port must be a number from 1 to 65535"),
                                 ("push-a.test:x:127.0.0.1", "the port must be a number from 1 to 65535"),
                                 ("push-a.test:443:localhost", "ADDRESS must be an IPv4 or IPv6 address"),
                                 ("[::1:443:127.0.0.1", "unclosed bracket"), (":443:127.0.0.1", "ADDRESS must be an IPv4 or IPv6 address")] {
            XCTAssertThrowsError(try AddressOverrides([entry]), entry) { error in
                XCTAssertEqual("\(error)", "--resolve \(entry): \(message)")
            }
        }
        XCTAssertThrowsError(try AddressOverrides(Array(repeating: "a:1:1.1.1.1", count: 257)))
    }

    func testConnectToGivesAnAddressAndAPortAndResolveNoPort() throws {
        let overrides = try AddressOverrides(["push-a.test:443:10.0.0.7"],
                                             connectTo: ["Web.Push.Apple.com:443:127.0.0.1:40123", "[::1]:443:[::1]:8443", "push-a.test:8443:127.0.0.3:9000"])
        XCTAssertEqual(overrides.address(for: Endpoint(host: "web.push.apple.com", port: 443)), "127.0.0.1")
        XCTAssertEqual(overrides.port(for: Endpoint(host: "web.push.apple.com", port: 443)), 40123)
        XCTAssertEqual(overrides.address(for: Endpoint(host: "::1", port: 443)), "::1")
        XCTAssertEqual(overrides.port(for: Endpoint(host: "::1", port: 443)), 8443)
        XCTAssertEqual(overrides.address(for: Endpoint(host: "push-a.test", port: 443)), "10.0.0.7")
        XCTAssertNil(overrides.port(for: Endpoint(host: "push-a.test", port: 443)), "--resolve keeps the port")
        XCTAssertEqual(overrides.port(for: Endpoint(host: "push-a.test", port: 8443)), 9000)
        XCTAssertNil(overrides.port(for: Endpoint(host: "web.push.apple.com", port: 8443)))
        for (entry, message) in [("a.test:443:127.0.0.1", "PORT2 must be a number from 1 to 65535"),
                                 ("a.test:443:127.0.0.1:0", "PORT2 must be a number from 1 to 65535"),
                                 ("a.test:443:localhost:80", "ADDRESS must be an IPv4 or IPv6 address"),
                                 ("a.test:x:127.0.0.1:80", "expected HOST:PORT:ADDRESS:PORT2"),
                                 ("[::1:443:127.0.0.1:80", "unclosed bracket")] {
            XCTAssertThrowsError(try AddressOverrides([], connectTo: [entry]), entry) { error in
                XCTAssertEqual("\(error)", "--connect-to \(entry): \(message)")
            }
        }
    }
}
