import Foundation
import Testing

@testable import CountdownStoreCore

/// Every input rule of SPEC section 7 that refuses: a typed error naming the value, and nothing
/// written, on the default fixture's SQLite store; and the forms of duration text, parsed or refused
/// by name. The input every engine accepts is in `EngineSuite/ValidationTests.swift`.
@Suite("Validation rules")
struct ValidationRulesTests {
    @Test("Keys: empty, over 256 bytes, NUL and control characters are refused")
    func invalidKeys() async throws {
        try await expectRefused(.invalidKey, naming: "''") { try await $0.start("", duration: .seconds(1)) }
        let long = String(repeating: "k", count: 257)
        try await expectRefused(.invalidKey, naming: "257 bytes") { try await $0.start(long, duration: .seconds(1)) }
        let emoji = String(repeating: "⏱", count: 86)  // 258 bytes
        try await expectRefused(.invalidKey, naming: "258 bytes") { try await $0.start(emoji, duration: .seconds(1)) }
        try await expectRefused(.invalidKey, naming: "U+0000") { try await $0.start("a\u{0}b", duration: .seconds(1)) }
        try await expectRefused(.invalidKey, naming: "U+000A") { try await $0.start("line\nbreak", duration: .seconds(1)) }
        try await expectRefused(.invalidKey, naming: "U+007F") { try await $0.start("del\u{7F}", duration: .seconds(1)) }
        try await expectRefused(.invalidKey, naming: "U+009B") { try await $0.pause("csi\u{9B}") }
        let megabyte = String(repeating: "x", count: 1 << 20)
        try await expectRefused(.invalidKey) { _ = try await $0.countdown(megabyte) }
    }

    @Test("Groups: empty, over 128 bytes and control characters are refused")
    func invalidGroups() async throws {
        try await expectRefused(.invalidGroup) { try await $0.start("g", duration: .seconds(1), group: "") }
        let long = String(repeating: "g", count: 129)
        try await expectRefused(.invalidGroup, naming: "129 bytes") { try await $0.start("g", duration: .seconds(1), group: long) }
        try await expectRefused(.invalidGroup, naming: "U+0009") { try await $0.start("g", duration: .seconds(1), group: "a\tb") }
        try await expectRefused(.invalidGroup) { _ = try await $0.active(group: "") }
    }

    @Test("Durations: zero, negative, under 1 ms and over 100 years are refused")
    func invalidDurations() async throws {
        try await expectRefused(.invalidDuration) { try await $0.start("d", duration: .zero) }
        try await expectRefused(.invalidDuration) { try await $0.start("d", duration: .seconds(-5)) }
        try await expectRefused(.invalidDuration) { try await $0.start("d", duration: .microseconds(400)) }
        try await expectRefused(.invalidDuration) { try await $0.start("d", duration: .seconds(3_155_760_001)) }
        try await expectRefused(.invalidDuration) { try await $0.start("d", duration: .seconds(Int64.max)) }
        try await expectRefused(.invalidDuration) { try await $0.extend("existing", by: .seconds(-1)) }
        try await expectRefused(.invalidDuration) { try await $0.extend("existing", by: .seconds(3_155_760_000)) }
        try await expectRefused(.invalidDuration) { try await $0.shorten("existing", by: .zero) }
        try await expectRefused(.invalidDuration) { try await $0.prune(olderThan: .seconds(-1)) }
        try await expectRefused(.invalidDuration) { _ = try await $0.expiring(within: .zero) }
    }

    @Test("Duration text: NaN, infinities, negatives, zero, overflow and garbage are refused by name")
    func invalidDurationText() {
        for text in ["nan", "NaN", "inf", "-inf", "infinity", "-5", "-5s", "0", "0s", "PT0S", "",
                     "99999999999999999999999", "1e400", "101y", "5 parsecs", "1h1h", "30m1h", "P1Y", "PT", "0.0004"] {
            do {
                _ = try DurationText.parse(text)
                Issue.record("\(text) was accepted")
            } catch {
                #expect(error.code == .invalidDuration)
                #expect(error.message.contains("'\(text)'"), "\(error.message)")
            }
        }
    }

    @Test("Duration text: every documented form parses")
    func durationTextForms() throws {
        let cases: [(String, Duration)] = [
            ("90s", .seconds(90)), ("15m", .minutes(15)), ("1h30m", .minutes(90)), ("2d", .hours(48)),
            ("250ms", .milliseconds(250)), ("PT15M", .minutes(15)), ("P1DT2H", .hours(26)), ("PT0.5S", .milliseconds(500)),
            ("P1W", .hours(168)), ("90", .seconds(90)), ("1.5", .milliseconds(1500)), ("1m30s", .seconds(90)),
            ("1h2m3s4ms", .milliseconds(3_723_004)), (" 45s ", .seconds(45)), ("1.5h", .minutes(90)),
        ]
        for (text, expected) in cases {
            #expect(try DurationText.parse(text) == expected, "\(text)")
        }
    }

    @Test("Limits outside 1...10000 are refused")
    func invalidLimits() async throws {
        try await expectRefused(.invalidArgument, naming: "0") { _ = try await $0.active(limit: 0) }
        try await expectRefused(.invalidArgument, naming: "10001") { _ = try await $0.expired(limit: 10_001) }
    }

    @Test("A batch with one bad request writes nothing")
    func badBatchWritesNothing() async throws {
        try await expectRefused(.invalidKey) {
            try await $0.start([.countdown("fine", duration: .seconds(1)), .countdown("", duration: .seconds(1))])
        }
        try await expectRefused(.invalidArgument, naming: "'twice'") {
            try await $0.start([.countdown("twice", duration: .seconds(1)), .stopwatch("twice")])
        }
        try await expectRefused(.alreadyActive, naming: "'existing'") {
            try await $0.start([.countdown("new", duration: .seconds(1)), .countdown("existing", duration: .seconds(1))])
        }
    }

    @Test("Conflicts and unknown keys change nothing")
    func conflictsChangeNothing() async throws {
        try await expectRefused(.alreadyActive, naming: "'existing'") { try await $0.start("existing", duration: .seconds(9)) }
        try await expectRefused(.notFound, naming: "'ghost'") { try await $0.pause("ghost") }
        try await expectRefused(.wrongState, naming: "already running") { try await $0.resume("existing") }
        try await expectRefused(.invalidArgument) { try await $0.calibrate(serverTime: Date(timeIntervalSince1970: .nan)) }
        try await expectRefused(.invalidDuration) {
            try await $0.start("late", endingAt: Date(timeIntervalSince1970: 0))
        }
    }
}
