// APNs's certificate-auth rules (`pushcast mock --client-ca`), request by request: the topic
// and environment come from the connection's client certificate, no provider token is checked,
// and a certificate that did not verify is answered 403 BadCertificate. The TLS side (what
// certificate a connection carries) is tested in PushcastWireTests; end to end in EndToEndTests.

@testable import PushcastAPNs
import PushcastCore
import PushcastProviderKit
import PushcastWire
import XCTest

final class APNsResponderCertificateTests: XCTestCase {
    private static let token = String(repeating: "a1", count: 32)
    private static let payload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)

    /// A certificate connection's answer to one POST, from a responder for `environment`.
    private func answer(
        _ certificate: TLSClientCertificate?, environment: APNsServerEnvironment = .production, headers: [HTTP2Header] = [],
        body: [UInt8] = payload
    ) throws -> (status: Int, reason: String) {
        let responder = APNsResponder(authentication: .certificate(environment))
        XCTAssertNil(responder.streamsBeforeCredentials)
        var context = APNsResponderTests.context()
        context.clientCertificate = certificate
        let request = HTTP2ServerRequest(streamID: 1, method: "POST", path: "/3/device/" + Self.token, authority: "localhost",
                                         headers: headers, body: body)
        let answer = responder.respond(to: request, context: context)
        return (answer.status, String(decoding: answer.body, as: UTF8.self))
    }

    private func push(_ uid: String?, _ commonName: String = "Apple Push Services: x", error: String? = nil) -> TLSClientCertificate {
        TLSClientCertificate(subjectUID: uid, commonName: commonName, verificationError: error)
    }

    func testTopicIsTheCertificatesUIDOrItsPushTypeVariant() throws {
        let app = push("com.example.app")
        XCTAssertEqual(try answer(app, headers: [HTTP2Header("apns-topic", "com.example.app")]).status, 200)
        XCTAssertEqual(try answer(app).status, 200, "no apns-topic: the UID is the topic")
        XCTAssertEqual(try answer(app, headers: [HTTP2Header("apns-topic", "com.example.app.voip"),
                                                 HTTP2Header("apns-push-type", "voip")]).status, 200)
        XCTAssertEqual(try answer(app, headers: [HTTP2Header("apns-topic", "com.example.app.complication")]).status, 200)
        for other in ["com.example.other", "com.example.app.extra", "com.example.appx", "com.example"] {
            let refused = try answer(app, headers: [HTTP2Header("apns-topic", other)])
            XCTAssertEqual(refused.status, 400, other)
            XCTAssertEqual(refused.reason, #"{"reason":"BadTopic"}"#, other)
        }
        // The push type's suffix is still required of the topic the certificate gives.
        XCTAssertEqual(try answer(app, headers: [HTTP2Header("apns-push-type", "voip")]).reason, #"{"reason":"BadTopic"}"#)
    }

    func testCertificateWithoutUIDNamesNoTopic() throws {
        let anonymous = push(nil)
        XCTAssertEqual(try answer(anonymous).reason, #"{"reason":"MissingTopic"}"#)
        XCTAssertEqual(try answer(anonymous, headers: [HTTP2Header("apns-topic", "com.example.app")]).reason, #"{"reason":"BadTopic"}"#)
    }

    func testEnvironmentComesFromTheCommonName() throws {
        let development = push("com.example.app", "Apple Development IOS Push Services: com.example.app")
        let production = push("com.example.app", "Apple Production IOS Push Services: com.example.app")
        let universal = push("com.example.app", "Apple Push Services: com.example.app")
        XCTAssertEqual(try answer(development, environment: .production).reason, #"{"reason":"BadCertificateEnvironment"}"#)
        XCTAssertEqual(try answer(development, environment: .production).status, 403)
        XCTAssertEqual(try answer(development, environment: .sandbox).status, 200)
        XCTAssertEqual(try answer(production, environment: .production).status, 200)
        XCTAssertEqual(try answer(production, environment: .sandbox).reason, #"{"reason":"BadCertificateEnvironment"}"#)
        for environment in APNsServerEnvironment.allCases {
            XCTAssertEqual(try answer(universal, environment: environment).status, 200, "\(environment)")
        }
    }

    func testUnverifiedOrMissingCertificateIsBadCertificate() throws {
        for certificate in [push("com.example.app", error: "certificate has expired"), nil] {
            let refused = try answer(certificate, headers: [HTTP2Header("apns-topic", "com.example.app")])
            XCTAssertEqual(refused.status, 403)
            XCTAssertEqual(refused.reason, #"{"reason":"BadCertificate"}"#)
        }
    }

    func testNoProviderTokenIsCheckedButHeadersAndPayloadAre() throws {
        let app = push("com.example.app")
        XCTAssertEqual(try answer(app, headers: [HTTP2Header("authorization", "bearer not-a-jwt")]).status, 200)
        XCTAssertEqual(try answer(app, headers: [HTTP2Header("apns-priority", "7")]).reason, #"{"reason":"BadPriority"}"#)
        XCTAssertEqual(try answer(app, body: []).reason, #"{"reason":"PayloadEmpty"}"#)
        XCTAssertEqual(try answer(app, body: Array("[1]".utf8)).reason, #"{"reason":"BadPayload"}"#)
    }
}
