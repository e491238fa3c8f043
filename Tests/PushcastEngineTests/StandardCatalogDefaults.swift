import PushcastAPNs
import PushcastCore
import PushcastEngine
import PushcastFCM
import PushcastJSON
import PushcastProviderKit
import PushcastProviders
import PushcastSystem
import PushcastTransport

// The engine takes its catalog of providers from its caller. These tests send to APNs and FCM,
// as the pushcast command does: these overloads pass the command's catalog.

extension ResultEncoding {
    static var csvHeader: String { ResultColumns.standard.csvHeader }
    static func appendLine<Sink: ByteSink>(_ record: OutcomeRecord, format: ResultsFormat, to out: inout Sink) {
        appendLine(record, format: format, columns: .standard, to: &out)
    }
}

extension RecoveredResults {
    static func read(_ bytes: [UInt8], format: ResultsFormat, path: String,
                     visit: (OutcomeRecord) -> Void) throws(CampaignError) -> RecoveredResults {
        try read(bytes, format: format, path: path, columns: .standard, visit: visit)
    }
    static func read(path: String, format: ResultsFormat, files: any FileStorage, chunkBytes: Int = 1 << 20,
                     visit: (OutcomeRecord) -> Void) throws(CampaignError) -> RecoveredResults {
        try read(path: path, format: format, columns: .standard, files: files, chunkBytes: chunkBytes, visit: visit)
    }
}

extension ResultsStream {
    init(path: String, format: ResultsFormat, files: any FileStorage) { self.init(path: path, format: format, columns: .standard, files: files) }
}

extension ResultFilesSink {
    convenience init(resultsPath: String, format: ResultsFormat, prunePath: String, resuming: Bool = false,
                     restoredPrune: ByteBuffer? = nil, files: any FileStorage = SystemFiles()) throws(CampaignError) {
        try self.init(resultsPath: resultsPath, format: format, prunePath: prunePath, resuming: resuming, restoredPrune: restoredPrune,
                      columns: .standard, files: files)
    }
}

extension CampaignDurability {
    static func open(resultsPath: String, format: ResultsFormat, fingerprint: CampaignFingerprint, request: ResumeRequest,
                     note: (String) -> Void) throws(CampaignError) -> CampaignDurability {
        try open(resultsPath: resultsPath, format: format, columns: .standard, fingerprint: fingerprint, request: request, note: note)
    }
}

extension CampaignReport {
    init() { self.init(catalog: .standard) }
}

extension CampaignTimeline {
    mutating func add(path: String, files: any FileStorage) { add(path: path, files: files, catalog: .standard) }
}

extension CampaignMetrics {
    init(campaign: String, shard: ShardSpec?, lastSuccessEpochSeconds: Double? = nil) {
        self.init(campaign: campaign, shard: shard, catalog: .standard, lastSuccessEpochSeconds: lastSuccessEpochSeconds)
    }
}

extension CampaignSummary {
    static func parse(_ bytes: [UInt8]) -> CampaignSummary? { parse(bytes, catalog: .standard) }
}

extension ReasonCatalog {
    static let standard = ReasonCatalog(.standard)
}

extension RowPreparer {
    init(layout: RowLayout, renderings: [ProviderID: any ProviderRendering], campaign: String, fileName: String,
         sends: Set<ProviderID>, recordsUnroutable: Bool, duplicates detection: DuplicateDetection, configured: Set<ProviderID>? = nil) {
        self.init(layout: layout, renderings: renderings, campaign: campaign, fileName: fileName, sends: sends,
                  recordsUnroutable: recordsUnroutable, duplicates: detection, configured: configured, catalog: .standard)
    }

    /// An APNs-only preparer.
    init(layout: RowLayout, template: PayloadTemplate, payloadBytesMax: Int, campaign: String, fileName: String,
         configuredProviders: Set<ProviderID>, duplicates detection: DuplicateDetection) {
        self.init(layout: layout,
                  renderings: configuredProviders.contains(.apns) ? [.apns: APNsRendering(template: template, payloadBytesMax: payloadBytesMax)] : [:],
                  campaign: campaign, fileName: fileName, sends: [.apns], recordsUnroutable: true, duplicates: detection, catalog: .standard)
    }
}

/// The APNs send loop: `SendWorkload` with the APNs adapter.
typealias APNsWorkload = SendWorkload<APNsAdapter>

/// The token request over a fresh connection, as the pushcast command makes it.
extension FCMTokenFetcher {
    static func fetch(account: FCMServiceAccount, signer: RS256Signer, client: ClientConfiguration, path: String,
                      nowEpochSeconds: @Sendable () -> Int64) -> Result<OAuthAccessToken, FCMTokenFetchError> {
        fetch(account: account, signer: signer, endpoint: client.endpoint.description, authority: client.endpoint.authority, path: path,
              nowEpochSeconds: nowEpochSeconds) { SingleRequest.perform($0, client: client).mapError { $0 } }
    }
}
