import Glibc
import XCTest
@testable import PushcastReactor

/// What `pushcast version` reports about the I/O backend and liburing.
final class BackendProbeTests: XCTestCase {
    func testBlockedOrMissingIOURingMeansEpollWithTheReason() {
        let blocked = IOBackendReport.probe(simulatedInitError: -EPERM)
        XCTAssertEqual(blocked.kind, .epoll)
        XCTAssertTrue(blocked.detail.contains("io_uring unavailable"), blocked.detail)
        XCTAssertTrue(blocked.detail.contains(errnoDescription(EPERM)), blocked.detail)
        let absent = IOBackendReport.probe(simulatedInitError: -ENOSYS)
        XCTAssertEqual(absent.kind, .epoll)
        XCTAssertTrue(absent.detail.contains(errnoDescription(ENOSYS)), absent.detail)
        // Any other failure stops a default run rather than falling back: the report says so.
        let other = IOBackendReport.probe(simulatedInitError: -ENOMEM)
        XCTAssertEqual(other.kind, .epoll)
        XCTAssertTrue(other.detail.contains("--io epoll"), other.detail)
    }

    func testTheProbeAgreesWithAReactor() throws {
        let report = IOBackendReport.probe()
        let reactor = try Reactor(configuration: ReactorConfiguration())
        XCTAssertEqual(report.kind, reactor.backendKind, report.detail)
    }

    func testURingVersionFromTheLoadedFile() {
        XCTAssertEqual(LinkedURing.versionFromFileName("/usr/lib/x86_64-linux-gnu/liburing.so.2.3"), "2.3")
        XCTAssertEqual(LinkedURing.versionFromFileName("liburing.so.2"), "2")
        XCTAssertNil(LinkedURing.versionFromFileName("/usr/lib/liburing.so"))
        XCTAssertNil(LinkedURing.versionFromFileName("/usr/lib/liburing.so.2.x"))
        // The test binary links liburing dynamically, as pushcast does.
        let version = LinkedURing.version
        XCTAssertNotNil(version)
        XCTAssertTrue(version?.contains("liburing.so.") == true, version ?? "")
    }
}
