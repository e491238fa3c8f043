import Foundation
import PushcastFCM
import PushcastSystem
import XCTest

final class FCMServiceAccountTests: XCTestCase {
    /// No text a user can see may carry the private key.
    func assertNoKeyMaterial(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let keyLines = try Fixture.privateKeyLines()
        XCTAssertGreaterThan(keyLines.count, 20, "a 2048-bit PKCS#8 PEM has about 26 base64 lines", file: file, line: line)
        for keyLine in keyLines {
            XCTAssertFalse(text.contains(keyLine.prefix(24)), "key material in: \(text)", file: file, line: line)
        }
    }

    func assertRejected(_ fields: [String: Any], source: String = "sa.json", mentions: [String],
                        file: StaticString = #filePath, line: UInt = #line) throws {
        do {
            _ = try FCMServiceAccount(json: try Fixture.json(fields), source: source)
            XCTFail("accepted", file: file, line: line)
        } catch {
            let text = "\(error)"
            for word in mentions + [source] { XCTAssertTrue(text.contains(word), "'\(word)' not in: \(text)", file: file, line: line) }
            try assertNoKeyMaterial(text, file: file, line: line)
        }
    }

    func testGeneratedFileIsGoogleFormat() throws {
        let fields = try Fixture.fields()
        XCTAssertEqual(fields["type"] as? String, "service_account")
        XCTAssertEqual(fields["project_id"] as? String, "pushcast-demo")
        XCTAssertEqual(fields["client_email"] as? String, Fixture.clientEmail)
        XCTAssertEqual(fields["token_uri"] as? String, Fixture.tokenURI)
        XCTAssertEqual((fields["private_key_id"] as? String)?.count, 40)
        XCTAssertTrue((fields["private_key"] as? String)?.hasPrefix("-----BEGIN PRIVATE KEY-----\n") ?? false)
        XCTAssertTrue(String(decoding: Fixture.generated.publicKeyPEM, as: UTF8.self).hasPrefix("-----BEGIN PUBLIC KEY-----\n"))

        let account = Fixture.account
        XCTAssertEqual(account.projectID, "pushcast-demo")
        XCTAssertEqual(account.clientEmail, Fixture.clientEmail)
        XCTAssertEqual(account.privateKeyID, fields["private_key_id"] as? String)
        XCTAssertEqual(account.tokenURI, Fixture.tokenURI)
        XCTAssertEqual(account.source, "service-account.json")
    }

    func testTwoGeneratedAccountsHaveDifferentKeys() {
        XCTAssertNotEqual(Fixture.generated.publicKeyPEM, Fixture.other.publicKeyPEM)
        XCTAssertNotEqual(Fixture.generated.serviceAccountJSON, Fixture.other.serviceAccountJSON)
    }

    func testPrintingAnAccountNeverShowsTheKey() throws {
        let account = Fixture.account
        var dumped = ""
        dump(account, to: &dumped)
        for text in ["\(account)", String(describing: account), String(reflecting: account), dumped] {
            try assertNoKeyMaterial(text)
            XCTAssertTrue(text.contains("pushcast-demo"), text)
        }
        XCTAssertTrue(dumped.contains("(redacted)"), dumped)
    }

    func testEveryMissingFieldIsNamed() throws {
        for name in ["type", "project_id", "private_key_id", "private_key", "client_email", "token_uri"] {
            var fields = try Fixture.fields()
            fields.removeValue(forKey: name)
            try assertRejected(fields, mentions: ["\"\(name)\""])
            fields[name] = 42
            try assertRejected(fields, mentions: ["\"\(name)\"", "non-string"])
            fields[name] = ""
            try assertRejected(fields, mentions: ["\"\(name)\"", "empty"])
        }
    }

    func testBadFieldsAreNamed() throws {
        var fields = try Fixture.fields()
        fields["type"] = "authorized_user"
        try assertRejected(fields, mentions: ["authorized_user", "service_account"])

        fields = try Fixture.fields()
        fields["token_uri"] = "http://oauth2.example.test/token"
        try assertRejected(fields, mentions: ["\"token_uri\"", "https://"])

        fields = try Fixture.fields()
        fields["client_email"] = "nobody"
        try assertRejected(fields, mentions: ["\"client_email\""])

        fields = try Fixture.fields()
        fields["project_id"] = "demo/../../other"
        try assertRejected(fields, mentions: ["\"project_id\""])

        fields = try Fixture.fields()
        fields["private_key"] = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
        try assertRejected(fields, mentions: ["\"private_key\"", "PEM"])
    }

    func testNotJSONSaysWhere() throws {
        for text in ["", "[]", "{\"type\": \"service_account\",", "not json at all"] {
            XCTAssertThrowsError(try FCMServiceAccount(json: Array(text.utf8), source: "broken.json")) { error in
                XCTAssertTrue("\(error)".contains("'broken.json'"), "\(error)")
                XCTAssertTrue("\(error)".contains("JSON"), "\(error)")
            }
        }
    }

    func testCorruptKeyFailsAtTheSignerWithoutQuotingIt() throws {
        var fields = try Fixture.fields()
        var pem = try XCTUnwrap(fields["private_key"] as? String)
        let lines = try Fixture.privateKeyLines()
        // A truncated key: the DER lengths no longer match.
        for line in lines[3..<10] { pem = pem.replacingOccurrences(of: line + "\n", with: "") }
        fields["private_key"] = pem
        let account = try FCMServiceAccount(json: try Fixture.json(fields), source: "corrupt.json")
        var text = ""
        XCTAssertThrowsError(try RS256Signer(account: account)) { text = "\($0)" }
        XCTAssertTrue(text.contains("'corrupt.json'"), text)
        XCTAssertTrue(text.contains("cannot read the private key"), text)
        try assertNoKeyMaterial(text)
    }

    func testLoadReadsTheFileAndNamesItInErrors() throws {
        let directory = try Independent.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("service-account.json").path
        try Data(Fixture.generated.serviceAccountJSON).write(to: URL(fileURLWithPath: path))
        let account = try FCMServiceAccount.load(path: path, files: SecretFile.read)
        XCTAssertEqual(account.source, path)
        XCTAssertEqual(account.privateKeyID, Fixture.account.privateKeyID)
        let input = Array("loaded".utf8)
        XCTAssertTrue(Fixture.publicKey.verify(input, signature: try RS256Signer(account: account).sign(input)))

        let missing = directory.appendingPathComponent("missing.json").path
        XCTAssertThrowsError(try FCMServiceAccount.load(path: missing, files: SecretFile.read)) { error in
            XCTAssertTrue("\(error)".contains(missing) && "\(error)".contains("No such file"), "\(error)")
        }
        var fields = try Fixture.fields()
        fields.removeValue(forKey: "client_email")
        try Data(try Fixture.json(fields)).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try FCMServiceAccount.load(path: path, files: SecretFile.read)) { error in
            XCTAssertTrue("\(error)".contains(path) && "\(error)".contains("\"client_email\""), "\(error)")
        }
    }
}
