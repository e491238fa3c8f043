// swift-tools-version:6.0
// pushcast's libFuzzer binaries (docs/FUZZING.md): one executable per fuzz target, each a
// thin `LLVMFuzzerTestOneInput` over a body in the main package's PushcastFuzzing library. Not part
// of the normal build; `make fuzz` builds it (scripts/fuzz.sh) with
//   swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
//
// Entry point: SwiftPM links every ELF executable with `--defsym main=<Module>_main` (for testable
// executables), and `-parse-as-library` (which libFuzzer needs, so that the binary has no Swift
// `main`) leaves that symbol undefined. FuzzDriver therefore gives each binary a `<Module>_main`
// that hands control to libFuzzer's own driver, `LLVMFuzzerRunDriver`.
import PackageDescription

let targets = ["FuzzCSV", "FuzzNDJSON", "FuzzJSONScanner", "FuzzTemplate", "FuzzAPNsResponse", "FuzzFCMResponse",
               "FuzzOAuthResponse", "FuzzHTTP2Client", "FuzzHTTP1Client", "FuzzDecompress", "FuzzWebPushSubscription"]

let package = Package(
    name: "pushcast-fuzz",
    dependencies: [.package(name: "pushcast", path: "../..")],
    targets: [
        .target(name: "FuzzDriver", dependencies: [.product(name: "PushcastFuzzing", package: "pushcast")]),
    ] + targets.map { name in
        .executableTarget(name: name, dependencies: ["FuzzDriver"])
    }
)
