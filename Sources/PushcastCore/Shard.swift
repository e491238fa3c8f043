/// One shard of a campaign split across N processes (`--shard I/N`): which rows it owns, and
/// the `{shard}` expansion of its file names. Sans-I/O: the environment is handed in as a
/// dictionary (`--shard auto`), so every decision is testable.
///
/// A row belongs to a shard by a stable hash of its duplicate key: XXH64 of the normalised token
/// in UTF-8, seeded with XXH64 (seed 0) of the provider's name (`apns`, `fcm`); the shard is that
/// hash modulo N. Every row of a token therefore lands in the same shard, so duplicate
/// detection stays exact. A row with no usable token (malformed, token missing or invalid,
/// unknown platform, provider not configured) belongs to shard `row mod N` (`row` 1-based, as
/// in the results). The function is part of the file format: it never changes between versions.
public struct ShardSpec: Sendable, Equatable, CustomStringConvertible {
    public let index: Int
    public let count: Int

    /// The most shards a campaign may be split into.
    public static let countMax = 65_536
    /// What paths hold where the shard index goes.
    public static let placeholder = "{shard}"

    public init(index: Int, count: Int) {
        precondition(count >= 1 && count <= Self.countMax && index >= 0 && index < count, "shard \(index)/\(count)")
        self.index = index
        self.count = count
    }

    /// The whole campaign as one shard.
    public static let whole = ShardSpec(index: 0, count: 1)

    public var description: String { "\(index)/\(count)" }

    /// Whether this is one of several shards.
    public var isSplit: Bool { count > 1 }

    /// Rows with no usable token: `row mod N`.
    @inline(__always)
    public func owns(row: Int) -> Bool { count == 1 || row % count == index }

    /// Rows with a token: the key's hash modulo N.
    @inline(__always)
    public func owns(keyHash: UInt64) -> Bool { count == 1 || keyHash % UInt64(count) == UInt64(index) }

    /// `path` with every `{shard}` replaced by the index.
    public func expand(_ path: String) -> String {
        path.replacingPlaceholder(Self.placeholder, with: String(index))
    }

    // MARK: - The hash

    /// The shard hash of a row's key: XXH64 of the normalised token in UTF-8, seeded with the
    /// XXH64 (seed 0) of the provider's name.
    public static func keyHash(provider: String, token: UnsafeRawBufferPointer) -> UInt64 {
        XXH64.hash(token, seed: keySeed(provider: provider))
    }

    /// The seed a provider's tokens are hashed with: XXH64 (seed 0) of its name in UTF-8.
    public static func keySeed(provider: String) -> UInt64 {
        var name = provider
        return name.withUTF8 { XXH64.hash(UnsafeRawBufferPointer($0), seed: 0) }
    }

    public static func keyHash(provider: String, token: String) -> UInt64 {
        var token = token
        return token.withUTF8 { keyHash(provider: provider, token: UnsafeRawBufferPointer($0)) }
    }
}

/// Why `--shard` cannot be used as given (exit status 2).
public struct ShardError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension ShardSpec {
    /// The environment variables `--shard auto` reads.
    public static let kubernetesIndex = "JOB_COMPLETION_INDEX"
    public static let slurmID = "SLURM_ARRAY_TASK_ID"
    public static let slurmMin = "SLURM_ARRAY_TASK_MIN"
    public static let slurmCount = "SLURM_ARRAY_TASK_COUNT"
    public static let slurmStep = "SLURM_ARRAY_TASK_STEP"

    /// Parses `--shard`: `I/N`, `auto` or `auto/N`. `auto` takes the index from
    /// `JOB_COMPLETION_INDEX` (Kubernetes Indexed Job) or `SLURM_ARRAY_TASK_ID` minus
    /// `SLURM_ARRAY_TASK_MIN` (Slurm), and the count from `auto/N` or `SLURM_ARRAY_TASK_COUNT`.
    /// Anything missing, non-numeric or contradictory throws a message naming the variables.
    public static func parse(_ text: String, environment: [String: String]) throws(ShardError) -> ShardSpec {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard (1...2).contains(parts.count), !parts[0].isEmpty else {
            throw ShardError("--shard \(text): expected I/N (e.g. 0/8), auto or auto/N")
        }
        var count: Int? = nil
        if parts.count == 2 {
            guard let n = Int(parts[1]), n >= 1, n <= countMax else {
                throw ShardError("--shard \(text): the shard count must be a whole number from 1 to \(countMax)")
            }
            count = n
        }
        let index: Int
        if parts[0] == "auto" {
            let found = try automatic(environment, count: count)
            (index, count) = (found.index, found.count)
        } else {
            guard let i = Int(parts[0]), i >= 0 else {
                throw ShardError("--shard \(text): the shard index must be a whole number from 0, or auto")
            }
            guard count != nil else { throw ShardError("--shard \(text): give the shard count too, as I/N (e.g. \(i)/8)") }
            index = i
        }
        guard let count else { preconditionFailure("a count by now") }
        guard index < count else {
            throw ShardError("--shard \(index)/\(count): the index must be below the count (shards are numbered 0 to \(count - 1))")
        }
        return ShardSpec(index: index, count: count)
    }

    /// `--shard auto[/N]`: the index and count from the batch engine's environment.
    static func automatic(_ env: [String: String], count given: Int?) throws(ShardError) -> (index: Int, count: Int) {
        let kubernetes = try number(kubernetesIndex, env)
        var slurm: Int? = nil
        if let id = try number(slurmID, env) {
            guard let low = try number(slurmMin, env) else {
                throw ShardError("--shard auto: \(slurmID) is set but \(slurmMin) is not (a Slurm job array sets both)")
            }
            if let step = try number(slurmStep, env), step != 1 {
                throw ShardError("--shard auto: \(slurmStep)=\(step): a job array with a step leaves gaps; submit --array=0-N-1 without a step")
            }
            guard id >= low else { throw ShardError("--shard auto: \(slurmID)=\(id) is below \(slurmMin)=\(low)") }
            slurm = id - low
        }
        if let kubernetes, let slurm, kubernetes != slurm {
            throw ShardError("--shard auto: \(kubernetesIndex)=\(kubernetes) and \(slurmID)-\(slurmMin)=\(slurm) disagree")
        }
        guard let index = kubernetes ?? slurm else {
            throw ShardError("--shard auto: no shard index in the environment: neither \(kubernetesIndex) (Kubernetes Indexed Job) "
                + "nor \(slurmID) with \(slurmMin) (Slurm job array) is set; give --shard I/N")
        }
        let slurmTasks = slurm == nil ? nil : try number(slurmCount, env)
        if let given, let slurmTasks, given != slurmTasks {
            throw ShardError("--shard auto/\(given): \(slurmCount)=\(slurmTasks) disagrees with the count \(given)")
        }
        guard let count = given ?? slurmTasks else {
            throw ShardError("--shard auto: no shard count: give it as --shard auto/N"
                + (slurm == nil ? " (Kubernetes does not put the Job's completions in the environment)" : " or set \(slurmCount)"))
        }
        guard count >= 1 && count <= countMax else { throw ShardError("--shard auto: \(count) shards: the count must be from 1 to \(countMax)") }
        guard index < count else {
            let source = kubernetes != nil ? "\(kubernetesIndex)=\(index)" : "\(slurmID)-\(slurmMin)=\(index)"
            throw ShardError("--shard auto: \(source) is not below the shard count \(count)")
        }
        return (index, count)
    }

    /// A variable's whole number, nil when unset; set but not a whole number ≥ 0 throws.
    static func number(_ name: String, _ env: [String: String]) throws(ShardError) -> Int? {
        guard let text = env[name] else { return nil }
        guard let value = Int(text), value >= 0 else {
            throw ShardError("--shard auto: \(name)=\(text) is not a whole number")
        }
        return value
    }
}

extension String {
    /// Every occurrence of `placeholder` replaced (no Foundation in PushcastCore).
    func replacingPlaceholder(_ placeholder: String, with value: String) -> String {
        guard !placeholder.isEmpty, contains(placeholder) else { return self }
        var out = ""
        var rest = Substring(self)
        while let range = rest.firstRange(of: placeholder) {
            out += rest[..<range.lowerBound]
            out += value
            rest = rest[range.upperBound...]
        }
        return out + rest
    }

}
