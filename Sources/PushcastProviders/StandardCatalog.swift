import PushcastAPNs
import PushcastEngine
import PushcastFCM
import PushcastProviderKit

extension ProviderCatalog {
    /// The providers the pushcast command sends to, one line each, in the order they are listed
    /// and reported. A new provider module adds its line here (docs/ARCHITECTURE.md, "Adding a
    /// provider").
    public static let standard = ProviderCatalog([
        APNsPushProvider(),
        FCMPushProvider(),
    ])
}

extension ResultColumns {
    /// The results' columns for the standard catalog:
    /// `row,id,token,provider,outcome,status,reason,apns_id,fcm_name,unregistered_at,attempts,latency_ms,duplicate_of,error`.
    public static let standard = ResultColumns(.standard)
}
