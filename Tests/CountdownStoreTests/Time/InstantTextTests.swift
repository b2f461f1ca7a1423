import Foundation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// The text of an instant, as the views, the tool and the events show it.
@Suite("Instant text")
struct InstantTextTests {
    @Test("iso8601(milliseconds:) agrees with Foundation's ISO-8601 formatter from 1583 to 9999, before 1970 too")
    func agreesWithFoundation() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        var generator = SystemRandomNumberGenerator()
        // Foundation counts days before the Gregorian reform (1582) on the Julian calendar; the
        // store, like SQLite's strftime, on the proleptic Gregorian one.
        let first: Int64 = -12_212_553_600_000  // 1583-01-01T00:00:00.000Z
        let last: Int64 = 253_402_300_799_999  // 9999-12-31T23:59:59.999Z
        let edges: [Int64] = [first, last, -1, 0, 1, 999, 1000, 951_782_400_000, 951_868_799_999, 1_795_571_219_545]
        for milliseconds in edges + (0..<5000).map({ _ in Int64.random(in: first...last, using: &generator) }) {
            let expected = formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
            #expect(StoreTime.iso8601(milliseconds: milliseconds) == expected, "\(milliseconds)")
        }
    }

    @Test("iso8601(milliseconds:) counts the proleptic Gregorian calendar back to year 1 and writes years past 9999 in full")
    func farYears() {
        #expect(StoreTime.iso8601(milliseconds: -62_135_596_800_000) == "0001-01-01T00:00:00.000Z")
        #expect(StoreTime.iso8601(milliseconds: 253_402_300_800_000) == "10000-01-01T00:00:00.000Z")
    }
}
