import PushcastWebPush

/// A Web Push subscription as exports hold it: the browser's JSON, or endpoint, p256dh and auth as
/// three strings (here: the input split at its first two NUL bytes). Whatever the bytes, parsing
/// ends with a subscription or an error; a subscription has a 65-byte uncompressed point, a
/// 16-byte auth secret and the origin its endpoint parses to; an error never repeats a key.
enum FuzzWebPush {
    static func subscription(_ input: [UInt8]) {
        let parsed = input.withUnsafeBytes { bytes in
            Result { () throws(WebPushSubscriptionError) in try WebPushSubscription(json: bytes) }
        }
        if case .success(let subscription) = parsed { check(subscription) }
        let parts = input.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        guard parts.count == 3 else { return }
        do {
            check(try WebPushSubscription(endpoint: parts[0], p256dh: parts[1], auth: parts[2]))
        } catch {
            for key in parts.dropFirst() where key.utf8.count >= 8 {
                precondition(!error.description.contains(key), "an error repeats a key: \(error)")
            }
        }
    }

    static func check(_ subscription: WebPushSubscription) {
        precondition(subscription.p256dh.count == 65 && subscription.p256dh.first == 0x04, "p256dh is not an uncompressed point")
        precondition(subscription.authSecret.count == WebPushSubscription.authSecretBytes, "auth is not 16 bytes")
        guard case .success(let origin) = WebPushOrigin.parse(endpoint: subscription.endpoint) else {
            preconditionFailure("a subscription whose endpoint has no origin: \(subscription.endpoint)")
        }
        precondition(origin == subscription.origin, "origin \(subscription.origin) where the endpoint gives \(origin)")
        precondition(origin.hasPrefix("https://") && !origin.dropFirst(8).contains("/"), "origin \(origin) is not scheme://host[:port]")
        precondition(origin == origin.lowercased() && !origin.hasSuffix(":443"), "origin \(origin) is not canonical")
    }
}
