import PushcastFCM
import XCTest

final class FCMProviderTests: XCTestCase {
    func testSendPathNamesTheProject() {
        XCTAssertEqual(FCMProvider.sendPath(project: "demo-project"), "/v1/projects/demo-project/messages:send")
    }
}
