/// Firebase Cloud Messaging HTTP v1 (docs/PROTOCOL.md §2): constants every part of the
/// provider shares.
public enum FCMProvider {
    /// The production host; `--fcm-endpoint` overrides it for mocks.
    public static let host = "fcm.googleapis.com"
    /// The OAuth2 scope a send needs.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// The request path of a send for one project.
    public static func sendPath(project: String) -> String { "/v1/projects/\(project)/messages:send" }
}
