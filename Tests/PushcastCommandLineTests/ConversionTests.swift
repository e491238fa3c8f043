import XCTest
@testable import PushcastCommandLine

final class ConversionTests: XCTestCase {
    // MARK: integers

    func testIntParsesAndDefaults() throws {
        XCTAssertEqual(try parsed(["-c", "8"]).int("connections"), 8)
        XCTAssertEqual(try parsed(["-c", "-2"]).int("connections"), -2)
        XCTAssertNil(try parsed([]).int("connections"))
        XCTAssertEqual(try parsed([]).int("connections", default: 4), 4)
        XCTAssertEqual(try parsed(["-c", "16"]).int("connections", default: 4, range: 1...64), 16)
    }

    func testIntRejectsNonIntegers() throws {
        let arguments = try parsed(["--connections", "x"])
        XCTAssertEqual(accessError { () throws(CommandLineError) in try arguments.int("connections") },
                       "--connections: expected an integer, got 'x'")
        for bad in ["1.5", "", " 4", "4 ", "0x10", "99999999999999999999"] {
            let arguments = try parsed(["--connections=\(bad)"])
            XCTAssertEqual(accessError { () throws(CommandLineError) in try arguments.int("connections", default: 1) },
                           "--connections: expected an integer, got '\(bad)'")
        }
    }

    func testIntErrorUsesTheSpellingTyped() throws {
        let arguments = try parsed(["-c", "many"])
        XCTAssertEqual(accessError { () throws(CommandLineError) in try arguments.int("connections") },
                       "-c: expected an integer, got 'many'")
    }

    func testIntRangeChecks() throws {
        let zero = try parsed(["-c", "0"])
        XCTAssertEqual(accessError { () throws(CommandLineError) in try zero.int("connections", range: 1...1024) },
                       "-c: expected an integer in 1...1024, got 0")
        XCTAssertEqual(accessError { () throws(CommandLineError) in try zero.int("connections", range: 1...Int.max) },
                       "-c: expected an integer of at least 1, got 0")
        let big = try parsed(["--connections", "5000"])
        XCTAssertEqual(accessError { () throws(CommandLineError) in try big.int("connections", default: 4, range: Int.min...1024) },
                       "--connections: expected an integer of at most 1024, got 5000")
        XCTAssertEqual(try parsed(["-c", "1"]).int("connections", range: 1...1), 1)
    }

    // MARK: doubles

    func testDoubleParses() throws {
        XCTAssertEqual(try parsed(["--ratio", "0.25"]).double("ratio"), 0.25)
        XCTAssertEqual(try parsed(["--ratio=1e3"]).double("ratio"), 1000)
        XCTAssertEqual(try parsed(["--ratio=-2"]).double("ratio"), -2)
        XCTAssertEqual(try parsed([]).double("ratio", default: 0.5), 0.5)
        XCTAssertNil(try parsed([]).double("ratio"))
    }

    func testDoubleRejectsNonFiniteAndJunk() throws {
        for bad in ["nan", "inf", "-infinity", "0x1p3", "1.2.3", "abc", "", "1e999"] {
            let arguments = try parsed(["--ratio=\(bad)"])
            XCTAssertEqual(accessError { () throws(CommandLineError) in try arguments.double("ratio") },
                           "--ratio: expected a number, got '\(bad)'", bad)
        }
    }

    func testDoubleRangeChecks() throws {
        let arguments = try parsed(["--ratio", "1.5"])
        XCTAssertEqual(accessError { () throws(CommandLineError) in try arguments.double("ratio", range: 0...1) },
                       "--ratio: expected a number in 0.0...1.0, got 1.5")
        XCTAssertEqual(accessError { () throws(CommandLineError) in try arguments.double("ratio", default: 3, range: 2...Double.infinity) },
                       "--ratio: expected a number of at least 2.0, got 1.5")
    }

    // MARK: durations

    func testDurationUnits() {
        XCTAssertEqual(ArgumentConversion.duration("10m"), .seconds(600))
        XCTAssertEqual(ArgumentConversion.duration("30s"), .seconds(30))
        XCTAssertEqual(ArgumentConversion.duration("500ms"), .milliseconds(500))
        XCTAssertEqual(ArgumentConversion.duration("2h"), .seconds(7200))
        XCTAssertEqual(ArgumentConversion.duration("250us"), .microseconds(250))
        XCTAssertEqual(ArgumentConversion.duration("250µs"), .microseconds(250))
        XCTAssertEqual(ArgumentConversion.duration("100ns"), .nanoseconds(100))
        XCTAssertEqual(ArgumentConversion.duration("0"), .zero)
        XCTAssertEqual(ArgumentConversion.duration("0s"), .zero)
    }

    func testDurationFractionsAndCompounds() {
        XCTAssertEqual(ArgumentConversion.duration("1.5s"), .milliseconds(1500))
        XCTAssertEqual(ArgumentConversion.duration(".5s"), .milliseconds(500))
        XCTAssertEqual(ArgumentConversion.duration("0.25h"), .seconds(900))
        XCTAssertEqual(ArgumentConversion.duration("1m30s"), .seconds(90))
        XCTAssertEqual(ArgumentConversion.duration("1h2m3s4ms"), .milliseconds(3_723_004))
    }

    func testDurationRejectsMalformed() {
        for bad in ["", "10", "1.5", "s", "10x", "10 s", " 10s", "10s ", "-5s", "1.s", "10ms5", "10sec", "1m30",
                    "10S", "3000000h", "1..5s", "10mss"] {
            XCTAssertNil(ArgumentConversion.duration(bad), bad)
        }
    }

    func testDurationAccessor() throws {
        XCTAssertEqual(try parsed(["--timeout", "500ms"]).duration("timeout"), .milliseconds(500))
        XCTAssertNil(try parsed([]).duration("timeout"))
        XCTAssertEqual(try parsed([]).duration("timeout", default: .seconds(600)), .seconds(600))
        let bad = try parsed(["--timeout=10"])
        XCTAssertEqual(accessError { () throws(CommandLineError) in try bad.duration("timeout") },
                       "--timeout: expected a duration such as 500ms, 30s, 10m or 2h, got '10'")
    }

    func testDurationRange() throws {
        let arguments = try parsed(["--timeout", "3h"])
        XCTAssertEqual(accessError { () throws(CommandLineError) in
            try arguments.duration("timeout", range: .milliseconds(100) ... .seconds(3600))
        }, "--timeout: expected a duration in 100ms...1h, got 3h")
        XCTAssertEqual(try arguments.duration("timeout", range: .zero ... .seconds(3 * 3600)), .seconds(3 * 3600))
    }

    func testDescribeDuration() {
        XCTAssertEqual(ArgumentConversion.describe(.seconds(7200)), "2h")
        XCTAssertEqual(ArgumentConversion.describe(.seconds(90)), "90s")
        XCTAssertEqual(ArgumentConversion.describe(.milliseconds(1500)), "1500ms")
        XCTAssertEqual(ArgumentConversion.describe(.nanoseconds(7)), "7ns")
        XCTAssertEqual(ArgumentConversion.describe(.zero), "0")
        for text in ["10m", "30s", "500ms", "2h", "250us", "3ns"] {
            XCTAssertEqual(ArgumentConversion.describe(ArgumentConversion.duration(text)!), text)
        }
    }

    // MARK: byte sizes

    func testByteCounts() {
        XCTAssertEqual(ArgumentConversion.byteCount("4096"), 4096)
        XCTAssertEqual(ArgumentConversion.byteCount("512B"), 512)
        XCTAssertEqual(ArgumentConversion.byteCount("64K"), 65536)
        XCTAssertEqual(ArgumentConversion.byteCount("64kib"), 65536)
        XCTAssertEqual(ArgumentConversion.byteCount("16M"), 16 << 20)
        XCTAssertEqual(ArgumentConversion.byteCount("16MiB"), 16 << 20)
        XCTAssertEqual(ArgumentConversion.byteCount("1G"), 1 << 30)
        XCTAssertEqual(ArgumentConversion.byteCount("0"), 0)
        for bad in ["", "K", "-1K", "1.5M", "16MB", "1T", "16 M", "99999999999999999999G"] {
            XCTAssertNil(ArgumentConversion.byteCount(bad), bad)
        }
    }

    func testByteCountAccessor() throws {
        XCTAssertEqual(try parsed(["--window", "64K"]).byteCount("window"), 65536)
        XCTAssertEqual(try parsed([]).byteCount("window", default: 1 << 16), 1 << 16)
        let bad = try parsed(["--window", "lots"])
        XCTAssertEqual(accessError { () throws(CommandLineError) in try bad.byteCount("window") },
                       "--window: expected a size such as 4096, 64K or 16MiB, got 'lots'")
        let big = try parsed(["--window", "1G"])
        XCTAssertEqual(accessError { () throws(CommandLineError) in try big.byteCount("window", range: 1...(16 << 20)) },
                       "--window: expected a size in 1...16777216 bytes, got 1G")
    }

    // MARK: choices and required values

    func testChoice() throws {
        XCTAssertEqual(try parsed(["--io", "epoll"]).choice("io", from: ["uring", "epoll"]), "epoll")
        XCTAssertEqual(try parsed(["--io", "epoll"]).choice("io", as: Fixtures.IOBackend.self), .epoll)
        XCTAssertEqual(try parsed([]).choice("io", default: Fixtures.IOBackend.uring), .uring)
        XCTAssertNil(try parsed([]).choice("io", as: Fixtures.IOBackend.self))
        let bad = try parsed(["--io=kqueue"])
        XCTAssertEqual(accessError { () throws(CommandLineError) in try bad.choice("io", default: Fixtures.IOBackend.uring) },
                       "--io: expected one of uring, epoll, got 'kqueue'")
    }

    func testRequiredValue() throws {
        XCTAssertEqual(try parsed(["--endpoint", "https://x"]).requiredValue("endpoint"), "https://x")
        let missing = try parsed([])
        XCTAssertEqual(accessError { () throws(CommandLineError) in try missing.requiredValue("endpoint") },
                       "missing required option --endpoint <URL>")
    }

    func testCallerErrorCarriesUsage() throws {
        let error = try parsed(["--json", "-q"]).error("--json and --quiet exclude each other")
        XCTAssertEqual(error.description,
                       "pushcast bench: --json and --quiet exclude each other\nusage: pushcast bench [options] [<tokens>]")
    }
}
