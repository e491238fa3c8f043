import PushcastCore
import PushcastSchedule
import XCTest

final class VariantAssignmentTests: XCTestCase {
    // MARK: Parsing one --variant value

    func testGoodForms() throws {
        XCTAssertEqual(try VariantSpec.parse("promo=a.json"), VariantSpec(name: "promo", payloadFile: "a.json"))
        XCTAssertEqual(try VariantSpec.parse("promo=a.json:3"), VariantSpec(name: "promo", payloadFile: "a.json", weight: 3))
        XCTAssertEqual(try VariantSpec.parse("B_2-x=apns.json,fcm.json:7"),
                       VariantSpec(name: "B_2-x", payloadFile: "apns.json", fcmPayloadFile: "fcm.json", weight: 7))
        XCTAssertEqual(try VariantSpec.parse("promo=a.json,fcm.json"),
                       VariantSpec(name: "promo", payloadFile: "a.json", fcmPayloadFile: "fcm.json"))
        XCTAssertEqual(try VariantSpec.parse("promo=a.json:1000000").weight, 1_000_000)
        XCTAssertEqual(try VariantSpec.parse(String(repeating: "n", count: 32) + "=a").name.count, 32)
    }

    func testAColonBelongsToThePathUnlessWhatFollowsTheLastIsAllDigits() throws {
        XCTAssertEqual(try VariantSpec.parse("promo=dir:v2/a.json"), VariantSpec(name: "promo", payloadFile: "dir:v2/a.json"))
        XCTAssertEqual(try VariantSpec.parse("promo=C:/x.json:2"), VariantSpec(name: "promo", payloadFile: "C:/x.json", weight: 2))
        XCTAssertEqual(try VariantSpec.parse("promo=a:1/b.json,f:x.json:4"),
                       VariantSpec(name: "promo", payloadFile: "a:1/b.json", fcmPayloadFile: "f:x.json", weight: 4))
    }

    func testEachBadFormIsRefusedWithItsMessage() {
        let name = "the name must be 1 to 32 letters, digits, '_' or '-'"
        let weight = "the weight must be 1 to 1000000"
        let cases: [(String, String)] = [
            ("promo", "expected NAME=FILE[,FCM_FILE][:WEIGHT]"),
            ("=a.json", name), ("pro mo=a.json", name), ("pro.mo=a.json", name), ("prömo=a.json", name),
            (String(repeating: "n", count: 33) + "=a.json", name),
            ("promo=a.json:0", weight), ("promo=a.json:1000001", weight), ("promo=a.json:99999999999999999999", weight),
            ("promo=", "the payload file is missing"), ("promo=:5", "the payload file is missing"),
            ("promo=,fcm.json", "the payload file is missing"),
            ("promo=a.json,", "the FCM payload file after ',' is missing"),
            ("promo=a.json,b.json,c.json", "at most two files, separated by one ','"),
        ]
        for (value, what) in cases {
            XCTAssertThrowsError(try VariantSpec.parse(value), value) { error in
                XCTAssertEqual((error as? VariantRefusal)?.message, "--variant \(value): \(what)")
            }
        }
    }

    // MARK: Plans

    func testPlanRefusals() throws {
        for bad in [-0.01, 50.01, 100, .nan, .infinity] {
            XCTAssertThrowsError(try VariantPlan(variants: [], holdoutPercent: bad)) { error in
                XCTAssertEqual((error as? VariantRefusal)?.message, "--holdout \(bad): the holdout must be 0 to 50 percent")
            }
        }
        let twice = [VariantSpec(name: "a", payloadFile: "x"), VariantSpec(name: "b", payloadFile: "y"), VariantSpec(name: "a", payloadFile: "z")]
        XCTAssertThrowsError(try VariantPlan(variants: twice, holdoutPercent: 0)) { error in
            XCTAssertEqual((error as? VariantRefusal)?.message, "--variant a: the name is given twice")
        }
        let many = (0...VariantPlan.variantsMax).map { VariantSpec(name: "v\($0)", payloadFile: "f") }
        XCTAssertThrowsError(try VariantPlan(variants: many, holdoutPercent: 0))
        XCTAssertNoThrow(try VariantPlan(variants: Array(many.dropLast()), holdoutPercent: 0))
        XCTAssertThrowsError(try VariantPlan(variants: [VariantSpec(name: "a", payloadFile: "x", weight: 0)], holdoutPercent: 0))
        XCTAssertNoThrow(try VariantPlan(variants: [], holdoutPercent: 50))
    }

    func testAHoldoutAloneHasTheImplicitDefaultVariant() throws {
        let plan = try VariantPlan(variants: [], holdoutPercent: 10)
        XCTAssertEqual(plan.variants.map(\.name), ["default"])
        let counts = Self.counts(plan, campaign: "c", groups: 2)
        XCTAssertEqual(counts[0] + counts[1], Self.tokens.count)
        XCTAssertGreaterThan(counts[0], 9_000)
        XCTAssertGreaterThan(counts[1], 89_000)
    }

    // MARK: Determinism

    /// Values from an independent XXH64 written from the specification (checked against its
    /// published answers for "" and "abc"); a change of algorithm, seed or key order fails here.
    func testTheHashIsAKnownFunctionOfCampaignAndToken() {
        XCTAssertEqual(VariantPlan.hash(campaignID: "spring-sale", normalizedToken: Array(repeating: 0x61, count: 64)), 0x744B_489D_2679_5724)
        XCTAssertEqual(VariantPlan.hash(campaignID: "", normalizedToken: []), 0xD6DC_ECF9_2AB2_2A6A)
        XCTAssertEqual(VariantPlan.hash(campaignID: "welcome-2026", normalizedToken: [0x00, 0xFF, 0x10] + Array("fcm:token".utf8)),
                       0x1BE9_B83F_D9E8_B9FC)
    }

    func testKnownAssignments() throws {
        // Units of the three hashes above: 0.4543, 0.8393, 0.1090.
        let plan = try VariantPlan(variants: Self.specs([2, 1, 1]), holdoutPercent: 10)
        XCTAssertEqual(plan.assign(campaignID: "spring-sale", normalizedToken: Array(repeating: 0x61, count: 64)), .variant(0))
        XCTAssertEqual(plan.assign(campaignID: "", normalizedToken: []), .variant(2))
        let welcome = [0x00, 0xFF, 0x10] + Array("fcm:token".utf8)
        XCTAssertEqual(plan.assign(campaignID: "welcome-2026", normalizedToken: welcome), .variant(0))
        XCTAssertEqual(try VariantPlan(variants: Self.specs([2, 1, 1]), holdoutPercent: 11).assign(campaignID: "welcome-2026", normalizedToken: welcome), .heldOut)
    }

    func testTwoPlanInstancesAssignAlike() throws {
        let first = try VariantPlan(variants: Self.specs([3, 1]), holdoutPercent: 10)
        let second = try VariantPlan(variants: Self.specs([3, 1]), holdoutPercent: 10)
        for token in Self.tokens.prefix(2_000) {
            XCTAssertEqual(first.assign(campaignID: "c-1", normalizedToken: token), second.assign(campaignID: "c-1", normalizedToken: token))
        }
    }

    // MARK: Distribution

    func testWeightsFitByChiSquare() throws {
        let runs: [(weights: [Int], holdout: Double, critical: Double)] = [
            ([1, 1], 0, 10.83),  // df 1
            ([1, 1], 10, 13.82),  // df 2
            ([3, 1], 10, 13.82),  // df 2
            ([2, 1, 1], 10, 16.27),  // df 3
        ]
        for run in runs {
            let plan = try VariantPlan(variants: Self.specs(run.weights), holdoutPercent: run.holdout)
            let observed = Self.counts(plan, campaign: "spring-sale", groups: run.weights.count + 1)
            let shares = Self.shares(run.weights, holdout: run.holdout)
            let cells = run.holdout > 0 ? Array(0..<shares.count) : Array(1..<shares.count)
            let statistic = Self.chiSquare(cells.map { observed[$0] }, cells.map { shares[$0] })
            XCTAssertLessThan(statistic, run.critical, "\(run.weights) holdout \(run.holdout): \(observed)")
        }
    }

    func testTheChiSquareTestRejectsAWrongSplit() throws {
        let plan = try VariantPlan(variants: Self.specs([1, 1]), holdoutPercent: 10)
        let observed = Self.counts(plan, campaign: "spring-sale", groups: 3)
        let statistic = Self.chiSquare(observed, Self.shares([2, 1], holdout: 10))
        XCTAssertGreaterThan(statistic, 13.82)
    }

    func testTheHoldoutShareIsWithinHalfAPointOfTenPercent() throws {
        for campaign in ["spring-sale", "welcome-2026", "x"] {
            let plan = try VariantPlan(variants: Self.specs([2, 1, 1]), holdoutPercent: 10)
            let share = Double(Self.counts(plan, campaign: campaign, groups: 4)[0]) / Double(Self.tokens.count)
            XCTAssertEqual(share, 0.10, accuracy: 0.005, campaign)
        }
    }

    func testAnotherCampaignIdReshuffles() throws {
        let plan = try VariantPlan(variants: Self.specs([2, 1, 1]), holdoutPercent: 10)
        let shares = Self.shares([2, 1, 1], holdout: 10)
        let expected = 1 - shares.reduce(0) { $0 + $1 * $1 }  // 0.686: independent draws that differ
        let moved = Self.tokens.filter {
            plan.assign(campaignID: "spring-sale", normalizedToken: $0) != plan.assign(campaignID: "spring-sale-2", normalizedToken: $0)
        }.count
        XCTAssertEqual(Double(moved) / Double(Self.tokens.count), expected, accuracy: 0.02)
    }

    // MARK: Support

    /// 100,000 synthetic APNs-shaped tokens: 64 lowercase hex digits from a seeded SplitMix64.
    static let tokens: [[UInt8]] = {
        let random = SplitMix64(seed: 20_260_305)
        let hex = Array("0123456789abcdef".utf8)
        return (0..<100_000).map { _ in
            (0..<4).flatMap { _ -> [UInt8] in
                let word = random.next()
                return (0..<16).map { hex[Int((word >> (UInt64($0) * 4)) & 0xF)] }
            }
        }
    }()

    static func specs(_ weights: [Int]) -> [VariantSpec] {
        weights.enumerated().map { VariantSpec(name: "v\($0.offset)", payloadFile: "v\($0.offset).json", weight: $0.element) }
    }

    /// Expected shares, the holdout first.
    static func shares(_ weights: [Int], holdout: Double) -> [Double] {
        let total = Double(weights.reduce(0, +))
        return [holdout / 100] + weights.map { (1 - holdout / 100) * Double($0) / total }
    }

    /// Counts per group: index 0 the holdout, index i + 1 variant i.
    static func counts(_ plan: VariantPlan, campaign: String, groups: Int) -> [Int] {
        var counts = Array(repeating: 0, count: groups)
        for token in tokens {
            switch plan.assign(campaignID: campaign, normalizedToken: token) {
            case .heldOut: counts[0] += 1
            case .variant(let index): counts[index + 1] += 1
            }
        }
        return counts
    }

    static func chiSquare(_ observed: [Int], _ shares: [Double]) -> Double {
        let total = Double(observed.reduce(0, +))
        let scale = shares.reduce(0, +)
        return zip(observed, shares).reduce(0) { sum, cell in
            let expected = total * cell.1 / scale
            return sum + (Double(cell.0) - expected) * (Double(cell.0) - expected) / expected
        }
    }
}
