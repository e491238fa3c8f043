// The mock's FCM listener (`mock --fcm`): its configuration and what it announces. Its answers
// are FCM's responder's (PushcastFCM); the listener adds the mock's faults around them.

import PushcastSystem

/// Where the mock's FCM service account comes from.
public enum MockFCMCredentials: Sendable {
    /// A fresh one, written (0600) as `fcm-service-account.json` into this directory once the port
    /// is known, since its `token_uri` names the mock's token endpoint.
    case generated(directory: String)
    /// An existing service-account file; the mock verifies assertions with its key's public half
    /// and accepts `aud` equal to either the advertised token URI or the file's `token_uri`.
    case serviceAccount(path: String)
}

public struct MockFCMConfiguration: Sendable {
    /// 0 picks a free port.
    public var port: UInt16 = 0
    /// SETTINGS_MAX_CONCURRENT_STREAMS on FCM connections (FCM advertises 100, §2.8).
    public var streamsPerConnectionMax = 100
    public var credentials: MockFCMCredentials
    /// The project sends must name; nil: the service account's, or `pushcast-demo` when generated.
    public var projectID: String? = nil
    /// `client_email` of a generated service account.
    public var clientEmail = "pushcast-mock@pushcast-demo.iam.gserviceaccount.com"
    /// `expires_in` of issued access tokens; an older bearer gets 401 UNAUTHENTICATED.
    public var tokenTTLSeconds = 3600
    /// `retry-after` of the `4290` prefix's 429.
    public var retryAfterSeconds = 1
    /// `--fcm-quota N/min`: the project quota, messages per rolling minute; nil: none.
    public var quotaPerMinute: Int? = nil
    /// Sends must carry a bearer the token endpoint issued (off with `mock --auth none`).
    public var requiresBearer = true
    /// Wall time in milliseconds since the epoch: token expiry and assertion times. Tests inject
    /// their own.
    public var wallMilliseconds: @Sendable () -> Int64 = { Int64(SystemClock.wallClockSeconds() * 1000) }

    public init(credentials: MockFCMCredentials) { self.credentials = credentials }

    /// The largest send body the FCM listener reads (bigger ones reset the stream); well above the
    /// 4096-byte payload limit so that an oversized message gets FCM's 400, not a reset.
    static let requestBodyBytesMax = 64 * 1024
}

/// What the mock tells clients about its FCM side.
public struct MockFCMEndpoint: Sendable, Equatable {
    public let port: UInt16
    /// `https://HOST:PORT`
    public let endpoint: String
    /// `https://HOST:PORT/token`
    public let tokenURI: String
    /// The service-account file a client signs with.
    public let credentialsPath: String
    public let projectID: String

    /// The stdout line: `FCM_ENDPOINT=https://127.0.0.1:PORT FCM_CREDENTIALS=/path/fcm-service-account.json FCM_TOKEN_URI=https://127.0.0.1:PORT/token`.
    public var announcement: String {
        "FCM_ENDPOINT=\(endpoint) FCM_CREDENTIALS=\(credentialsPath) FCM_TOKEN_URI=\(tokenURI)"
    }
}
