// `apns-push-type` values with their topic suffixes, priority rules and payload limits (§1.4, §1.7).

/// The value of `apns-push-type`. Apple wants it on every push (§1.3).
public enum APNsPushType: String, Sendable, CaseIterable, Hashable {
    case alert
    case background
    case voip
    case complication
    case fileprovider
    case mdm
    case liveactivity
    case location
    case pushtotalk
    case widgets
    case controls

    /// What `apns-topic` must end with for this push type (§1.4). Empty for types whose topic is
    /// the bundle ID itself (alert, background) or not derived from one (mdm: the UID from the
    /// MDM push certificate's subject).
    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: return ""
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .liveactivity: return ".push-type.liveactivity"
        case .location: return ".location-query"
        case .pushtotalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        case .controls: return ".push-type.controls"
        }
    }

    /// The topic for a bundle ID: the suffix is appended unless the value already ends with it,
    /// so both `com.example.app` and `com.example.app.voip` give `com.example.app.voip` for voip.
    public func topic(forBundleID bundleID: String) -> String {
        let suffix = topicSuffix
        if suffix.isEmpty || bundleID.hasSuffix(suffix) { return bundleID }
        return bundleID + suffix
    }

    /// The most payload bytes APNs accepts: 5120 for voip, 4096 for everything else (§1.7).
    /// Over the limit APNs answers 413 PayloadTooLarge, so pushcast checks it before sending.
    public var payloadBytesMax: Int { self == .voip ? 5120 : 4096 }

    /// Whether a rendered payload of this many bytes (not characters) is over the limit.
    @inline(__always)
    public func isPayloadTooLarge(byteCount: Int) -> Bool { byteCount > payloadBytesMax }

    /// Background pushes must use priority 5; 10 is an error at APNs (§1.4).
    public var requiredPriority: APNsPriority? { self == .background ? .considerPower : nil }
}

/// `apns-priority` (§1.3).
public enum APNsPriority: Int, Sendable, CaseIterable, Hashable {
    /// 10: send immediately (the default).
    case immediate = 10
    /// 5: send with the device's power considerations.
    case considerPower = 5
    /// 1: prioritise power over everything; never wake the device.
    case powerSaving = 1
}
