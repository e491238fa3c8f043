// swift-tools-version:6.0
// pushcast: a push-campaign engine for APNs and FCM over HTTP/2.
// Modules are laid out along the I/O line (docs/ARCHITECTURE.md): only PushcastSystem (files,
// signals, processes, the environment, clocks) and PushcastReactor (the ring, epoll, sockets,
// timers) make syscalls; PushcastWire (TLS + HTTP/2) is sans-I/O and tested without sockets.
import PackageDescription

// Release builds skip Swift's dynamic exclusivity checks on the hot-path modules: they cost ~7 % of
// the client's CPU per request (perf, see docs/BENCHMARKS.md). Debug builds, which the tests use,
// keep them.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "pushcast",
    products: [
        .executable(name: "pushcast", targets: ["pushcast"]),
        // The fuzz bodies, for the libFuzzer binaries of Tests/Fuzz (a package of its own, built
        // only by `make fuzz`; docs/FUZZING.md).
        .library(name: "PushcastFuzzing", targets: ["PushcastFuzzing"]),
    ],
    targets: [
        // C shims. Each wrapper in them says why it exists.
        .target(
            name: "COpenSSL",
            linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]
        ),
        .systemLibrary(
            name: "CNGHTTP2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),
        .target(
            name: "CURing",
            linkerSettings: [.linkedLibrary("uring")]
        ),
        .target(name: "CPrefetch"),
        .target(name: "CSystem"),
        // Database clients: SQLite, libpq, libmariadb, imported as they are.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CMariaDB", pkgConfig: "libmariadb", providers: [.apt(["libmariadb-dev"])]),
        // zlib and zstd: gzip and zstd token exports, read transparently (DecompressingByteSource).
        .systemLibrary(name: "CCompression", path: "Sources/CCompression", providers: [.apt(["zlib1g-dev", "libzstd-dev"])]),

        .target(name: "PushcastCore", dependencies: ["CPrefetch"], swiftSettings: hotPath),
        .target(name: "PushcastCommandLine"),
        // Local-time delivery, sans-I/O: a row's delivery time from its zone's offsets.
        .target(name: "PushcastSchedule", dependencies: ["PushcastCore"]),
        .target(name: "PushcastInput", dependencies: ["PushcastCore", "CCompression"], swiftSettings: hotPath),
        // The one JSON reader (JSONScanner), the JSON writer, and the payload template both providers render.
        .target(name: "PushcastJSON", swiftSettings: hotPath),
        // What a provider implements (PushProvider, ProviderRendering, ProviderAdapter, its reason
        // table) and the catalog type; the engine sees providers only through these.
        .target(name: "PushcastProviderKit", dependencies: ["PushcastCore", "PushcastWire", "PushcastCommandLine"], swiftSettings: hotPath),
        // One module per provider: APNs (token and certificate auth), FCM HTTP v1 (service-account OAuth2).
        .target(name: "PushcastAPNs", dependencies: ["PushcastCore", "PushcastJSON", "PushcastWire", "PushcastProviderKit", "PushcastCommandLine", "COpenSSL"],
                swiftSettings: hotPath),
        .target(name: "PushcastFCM", dependencies: ["PushcastCore", "PushcastJSON", "PushcastWire", "PushcastProviderKit", "PushcastCommandLine", "COpenSSL"],
                swiftSettings: hotPath),
        // Web Push (RFC 8030, 8291, 8292): subscriptions, message encryption, VAPID; not yet in the catalog.
        .target(name: "PushcastWebPush", dependencies: ["PushcastCore", "PushcastJSON", "PushcastWire", "PushcastProviderKit", "PushcastCommandLine", "COpenSSL"],
                swiftSettings: hotPath),
        // The catalog the command sends to, one line per provider.
        .target(name: "PushcastProviders", dependencies: ["PushcastProviderKit", "PushcastAPNs", "PushcastFCM", "PushcastWebPush", "PushcastEngine"]),
        .target(name: "PushcastWire", dependencies: ["PushcastCore", "COpenSSL", "CNGHTTP2"], swiftSettings: hotPath),
        // Blocking calls that are not the network: files, the journal's storage, scratch files,
        // signals, the process, resource usage, the environment and the clocks.
        .target(name: "PushcastSystem", dependencies: ["PushcastCore", "CSystem"], swiftSettings: hotPath),
        // The event loop: io_uring or epoll, sockets, timers (its clock is PushcastSystem's).
        .target(name: "PushcastReactor", dependencies: ["PushcastCore", "PushcastSystem", "CURing"], swiftSettings: hotPath),
        .target(name: "PushcastTransport", dependencies: ["PushcastCore", "PushcastWire", "PushcastReactor", "PushcastSystem"], swiftSettings: hotPath),
        // Campaign logic. Files, clocks and wake-ups come in through PushcastCore's protocols.
        .target(
            name: "PushcastEngine",
            dependencies: ["PushcastCore", "PushcastJSON", "PushcastWire", "PushcastTransport", "PushcastProviderKit", "PushcastInput"],
            // MemberImportVisibility: a file sees only the members of the modules it imports, so
            // no Foundation API reaches an engine file through another file's import.
            swiftSettings: hotPath + [.enableUpcomingFeature("MemberImportVisibility")]),
        // Query snapshots and prune-apply against SQLite, PostgreSQL and MySQL/MariaDB.
        .target(name: "PushcastDatabase", dependencies: ["PushcastCore", "CSQLite", "CPostgres", "CMariaDB"]),
        .target(name: "PushcastMock", dependencies: ["PushcastCore", "PushcastJSON", "PushcastWire", "PushcastReactor", "PushcastSystem", "PushcastTransport", "PushcastProviderKit", "PushcastAPNs", "PushcastFCM", "PushcastWebPush"], swiftSettings: hotPath),
        // The whole-campaign simulator: the engine's lanes against simulated servers on a virtual clock.
        .target(name: "PushcastSimulation",
                dependencies: ["PushcastCore", "PushcastJSON", "PushcastEngine", "PushcastTransport", "PushcastWire", "PushcastProviderKit", "PushcastProviders",
                               "PushcastAPNs", "PushcastFCM", "PushcastInput", "PushcastReactor"]),
        // Fuzz bodies: pure functions of bytes, replayed over the committed corpus by
        // PushcastFuzzingTests and driven by libFuzzer from Tests/Fuzz.
        .target(name: "PushcastFuzzing", dependencies: ["PushcastCore", "PushcastJSON", "PushcastInput", "PushcastAPNs", "PushcastFCM", "PushcastProviderKit", "PushcastWebPush", "PushcastWire"]),
        .executableTarget(
            name: "pushcast",
            dependencies: ["PushcastCore", "PushcastCommandLine", "PushcastInput", "PushcastJSON", "PushcastAPNs", "PushcastFCM", "PushcastWebPush", "PushcastProviderKit", "PushcastProviders", "PushcastEngine", "PushcastWire", "PushcastReactor",
                           "PushcastSystem", "PushcastTransport", "PushcastMock", "PushcastSimulation", "PushcastDatabase"]
        ),

        .testTarget(name: "PushcastCoreTests", dependencies: ["PushcastCore"]),
        .testTarget(name: "PushcastScheduleTests", dependencies: ["PushcastSchedule", "PushcastCore", "PushcastSystem"]),
        .testTarget(name: "PushcastCommandLineTests", dependencies: ["PushcastCommandLine"]),
        .testTarget(name: "PushcastInputTests", dependencies: ["PushcastInput", "CCompression"]),
        .testTarget(name: "PushcastJSONTests", dependencies: ["PushcastJSON"]),
        .testTarget(name: "PushcastAPNsTests", dependencies: ["PushcastAPNs", "PushcastJSON", "PushcastReactor", "PushcastSystem", "PushcastProviderKit", "PushcastCommandLine", "PushcastTransport",
                                                             "PushcastWire", "COpenSSL"]),
        .testTarget(name: "PushcastFCMTests", dependencies: ["PushcastFCM", "PushcastJSON", "PushcastReactor", "PushcastSystem", "PushcastProviderKit", "PushcastMock", "PushcastCommandLine",
                                                            "PushcastTransport", "PushcastWire", "COpenSSL"]),
        .testTarget(name: "PushcastWebPushTests", dependencies: ["PushcastWebPush", "PushcastJSON", "PushcastWire", "PushcastCore", "PushcastProviderKit", "PushcastCommandLine",
                                                              "PushcastEngine", "PushcastInput", "PushcastAPNs", "PushcastProviders", "PushcastSimulation", "PushcastTransport", "PushcastSystem", "PushcastReactor", "COpenSSL"]),
        .testTarget(name: "PushcastEngineTests", dependencies: ["PushcastEngine", "PushcastMock", "PushcastAPNs", "PushcastFCM", "PushcastJSON",
                                                               "PushcastProviderKit", "PushcastProviders", "PushcastTransport", "PushcastSystem"]),
        .testTarget(name: "PushcastWireTests", dependencies: ["PushcastWire", "PushcastReactor", "PushcastSystem", "COpenSSL", "CNGHTTP2"]),
        .testTarget(name: "PushcastReactorTests", dependencies: ["PushcastReactor"]),
        .testTarget(name: "PushcastSystemTests", dependencies: ["PushcastSystem", "PushcastCore"]),
        .testTarget(name: "PushcastTransportTests", dependencies: ["PushcastTransport", "PushcastMock", "PushcastWire", "PushcastAPNs", "PushcastFCM", "PushcastWebPush", "PushcastProviderKit", "PushcastSystem"]),
        .testTarget(name: "PushcastSimulationTests",
                    dependencies: ["PushcastSimulation", "PushcastEngine", "PushcastWire", "PushcastCore", "PushcastInput", "PushcastJSON",
                                   "PushcastReactor", "PushcastSystem", "PushcastTransport", "PushcastAPNs", "PushcastFCM", "PushcastProviderKit", "PushcastProviders"]),
        .testTarget(name: "EndToEndTests", dependencies: ["PushcastWire", "PushcastCore", "PushcastWebPush"]),
        .testTarget(name: "PushcastDatabaseTests", dependencies: ["PushcastDatabase"]),
        .testTarget(name: "PushcastFuzzingTests", dependencies: ["PushcastFuzzing", "PushcastWire"]),
    ]
)
