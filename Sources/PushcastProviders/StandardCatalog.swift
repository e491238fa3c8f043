import PushcastAPNs
import PushcastEngine
import PushcastFCM
import PushcastProviderKit
import PushcastWebPush

/// The providers the pushcast command sends to, one line each: what the engine knows of the
/// provider, and its part of the command line. The order is the order they are listed and
/// reported in. A new provider module adds its line here (docs/ARCHITECTURE.md, "Adding a
/// provider").
public enum StandardProviders {
    public static let all: [(provider: any PushProvider, commandLine: any ProviderCommandLine)] = [
        (APNsPushProvider(), APNsCommandLine()),
        (FCMPushProvider(), FCMCommandLine()),
        (WebPushPushProvider(), WebPushCommandLine()),
    ]

    /// The option groups, in catalog order.
    public static var commandLines: [any ProviderCommandLine] { all.map(\.commandLine) }
}

extension ProviderCatalog {
    public static let standard = ProviderCatalog(StandardProviders.all.map(\.provider))
}

extension ResultColumns {
    /// The results' columns for the standard catalog:
    /// `row,id,token,provider,outcome,status,reason,apns_id,fcm_name,location,unregistered_at,attempts,latency_ms,duplicate_of,error`.
    public static let standard = ResultColumns(.standard)
}
