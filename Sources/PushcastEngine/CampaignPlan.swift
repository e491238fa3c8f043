import PushcastCore
import PushcastInput
import PushcastProviderKit

/// Everything a campaign decides before its first send that is not about one provider's
/// credentials: the input and its first read, the columns, each configured provider's
/// rendering, the campaign id, the shard, and the fingerprints a resume checks. A command builds
/// it from its options, the engine checks it (`validate`) before anything connects, and then
/// turns it into the run's feeds and budgets. Pure: no I/O of its own (reopening the input is a
/// closure the command hands in).
public struct CampaignPlan {
    public var inputPath: String
    public var fileName: String
    public var format: InputFormat
    public var reader: TokenFileReader
    /// This shard's rows (all rows when unsharded), when a first read counted them.
    public var totalRows: Int?
    /// Every shard's rows: the input's row count.
    public var inputRows: Int?
    public var layout: RowLayout
    public var renderings: [ProviderID: any ProviderRendering]
    public var catalog: ProviderCatalog
    public var campaign: String
    /// Opens the input again from its first row (nil for stdin, which is read once).
    public var reopen: (() throws -> TokenFileReader)?
    /// A file's repeated tokens, found by a first read (stdin keeps an exact table instead).
    public var duplicatePlan: DuplicatePlan?
    /// What a resume checks: the input's bytes (hashed in the first read; "stdin" for stdin)
    /// and the templates and fixed headers.
    public var inputFingerprint = "stdin"
    public var templatesFingerprint = ""
    /// Where a database snapshot's rows came from (`URL query`, no password), for the journal;
    /// empty for a file.
    public var inputSource = ""
    /// `--shard`: the rows this process takes.
    public var shard = ShardSpec.whole
    /// The shard's rows, as the first read of a file found them (nil: unsharded, or stdin).
    public var shardMap: ShardRowMap?
    /// Each routed provider's routes (its servers) and their rows, found by the first read of a
    /// file; stdin has none, so its rows for a routed provider fail (`OutcomeReason.noRoute`).
    public var routes: [ProviderID: RouteTable] = [:]
    /// The most feeds that read one routed provider's rows: its busiest routes get one each,
    /// the rest share the last (a paused server holds up only the routes of its own feed).
    public static let routeFeedsMax = 8
    /// The most servers of one routed provider a campaign sends to (each gets a lane, with its
    /// connections and a worker thread).
    public static let routesMax = 256

    public init(inputPath: String, fileName: String, format: InputFormat, reader: TokenFileReader, layout: RowLayout,
                renderings: [ProviderID: any ProviderRendering], catalog: ProviderCatalog, campaign: String) {
        self.inputPath = inputPath
        self.fileName = fileName
        self.format = format
        self.reader = reader
        self.layout = layout
        self.renderings = renderings
        self.catalog = catalog
        self.campaign = campaign
    }

    /// The providers that can get rows: every configured one when rows name their platform,
    /// else the default provider and those whose own token column the input has (an
    /// `endpoint` column: Web Push).
    public var activeProviders: [ProviderID] {
        let configured = catalog.ids.filter { renderings[$0] != nil }
        guard layout.providerColumn == nil else { return configured }
        let owners = Set(layout.tokenColumnOwners.compactMap { $0 })
        return configured.filter { $0 == layout.defaultProvider || owners.contains($0) }
    }

    public func preparer(sends: Set<ProviderID>, recordsUnroutable: Bool) -> RowPreparer {
        var preparer = RowPreparer(layout: layout, renderings: renderings, campaign: campaign, fileName: fileName, sends: sends,
                                   recordsUnroutable: recordsUnroutable,
                                   duplicates: duplicatePlan.map { .planned($0) } ?? .exact(expectedRows: 1 << 20), catalog: catalog)
        preparer.shard = shard
        preparer.shardRows = shardMap?.cursor()
        return preparer
    }

    /// Lets `reader` pass over the other shards' rows unread (not even split into fields), when
    /// the first read found that every line of the file is one row.
    public func skipOtherShards(_ reader: TokenFileReader) {
        guard let shardMap, shardMap.linesAreRows, reader.format == .csv else { return }
        reader.rowSkipping = shardMap.cursor()
    }

    /// Each campaign-wide rate (`--rate`, or a provider's default quota) as this shard's share:
    /// N shards together keep to the campaign's budget.
    public func shardRates(_ given: [ProviderID: Double]) -> [ProviderID: Double] {
        var rates: [ProviderID: Double] = [:]
        for provider in catalog.providers {
            if let rate = given[provider.id] ?? provider.defaultRatePerSecond { rates[provider.id] = rate / Double(shard.count) }
        }
        return rates
    }

    /// Checks the lanes a command built against the plan, before any of them connects: at least
    /// one, each for a configured provider of the catalog, none twice.
    public func validate(lanes: [ProviderLane]) throws(CampaignError) {
        guard !lanes.isEmpty else {
            throw .options("no configured provider can get rows from \(fileName) (rows without a platform column go to "
                + "--provider \(layout.defaultProvider.rawValue))")
        }
        var seen = Set<String>()
        for lane in lanes {
            guard renderings[lane.provider] != nil else { throw .options("a lane for \(lane.provider), which has no template in this campaign") }
            guard seen.insert(lane.key).inserted else { throw .options("two lanes for \(lane.key)") }
            guard (lane.route != nil) == catalog[lane.provider].isRouted else {
                throw .options("the lane for \(lane.key) \(lane.route == nil ? "has no route" : "has a route its provider does not use")")
            }
        }
    }

    /// A file feeds each provider through a reader of its own, so that a paused provider never
    /// holds up another; stdin is read once, for all. The first feed records the rows no
    /// provider takes.
    public func feeds(providers: [ProviderID]) throws(CampaignError) -> [CampaignFeed] {
        let readers = providers.flatMap { provider in
            catalog[provider].isRouted && routes[provider] != nil
                ? routes[provider]!.groups(max: Self.routeFeedsMax).enumerated().map { (provider, RouteTable(routes: $0.element), $0.offset == 0) }
                : [(provider, nil, true)]
        }
        guard readers.count > 1, let reopen else {
            skipOtherShards(reader)
            return [CampaignFeed(reader: reader, preparer: preparer(sends: Set(providers), recordsUnroutable: true))]
        }
        var feeds: [CampaignFeed] = []
        for (index, (provider, routeFilter, recordsRouteless)) in readers.enumerated() {
            let feedReader: TokenFileReader
            if index == 0 { feedReader = reader } else {
                do { feedReader = try reopen() } catch { throw .input("cannot read \(fileName): \(error)") }
            }
            skipOtherShards(feedReader)
            var preparer = preparer(sends: [provider], recordsUnroutable: index == 0)
            preparer.routeFilter = routeFilter
            preparer.recordsRoutelessRows = recordsRouteless
            feeds.append(CampaignFeed(reader: feedReader, preparer: preparer))
        }
        return feeds
    }
}
