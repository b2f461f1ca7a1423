import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore

extension RealProcesses.ToolTests {
    /// Two real `countdown run` processes, one per group, as two shops sharing a store run them:
    /// the small shop's expiry, due just after the big shop's sale, is recorded in one of the
    /// first batches of the sale's drain (not after it), printed by the small shop's process
    /// alone, and the sale's expiries only by the sale's.
    @Test("countdown run --group: a small group's expiry is recorded among the first batches of another group's drain and printed by its own consumer only")
    func perGroupConsumers() async throws {
        let count = 6_000
        // The sale, and the VIP's deadline 1 ms after it, started together by the library.
        let store = try CountdownStore(path: db)
        try await store.start(
            (0..<count).map { .countdown("sale-\($0)", duration: .seconds(4), group: "sale") }
                + [.countdown("vip-0", duration: .milliseconds(4_001), group: "vip")])
        try await store.close()
        let vip = try startRun(["--group", "vip", "--consumer", "vip"])
        let sale = try startRun(["--group", "sale", "--consumer", "sale"])
        try await eventually("both processes delivered every expiry", watching: sale, limit: 90) {
            try self.sqlite3(
                """
                SELECT (SELECT last_event_id FROM countdown_consumers WHERE name = 'vip') >= \
                (SELECT id FROM countdown_events WHERE kind = 'expired' AND key = 'vip-0') \
                AND (SELECT count(*) FROM countdown_events WHERE kind = 'expired' AND group_name = 'sale') = \(count) \
                AND (SELECT last_event_id FROM countdown_consumers WHERE name = 'sale') >= \
                (SELECT max(id) FROM countdown_events WHERE kind = 'expired' AND group_name = 'sale')
                """) == "1"
        }
        let (vipStatus, vipLines) = await stop(vip)
        let (saleStatus, saleLines) = await stop(sale)
        #expect(vipStatus == 0 && saleStatus == 0)
        #expect(vipLines.map { $0["key"] as? String } == ["vip-0"], "the VIP's process printed its expiry, and nothing else")
        let saleKeys = saleLines.compactMap { $0["key"] as? String }
        #expect(Set(saleKeys).count == count && saleKeys.allSatisfy { $0.hasPrefix("sale-") }, "the sale's process printed the sale only")
        // Recorded among the first batches of the drain: fewer than two batches of the sale before it.
        let before = try sqlite3(
            """
            SELECT count(*) FROM countdown_events WHERE kind = 'expired' AND group_name = 'sale' \
            AND id < (SELECT id FROM countdown_events WHERE kind = 'expired' AND key = 'vip-0')
            """)
        #expect((Int(before) ?? .max) < 2_000, "\(before) of the sale's expiries were recorded before the VIP's")
        let late = try sqlite3("SELECT late_ms >= 0 FROM countdown_events WHERE kind = 'expired' AND key = 'vip-0'")
        #expect(late == "1", "never early")
    }
}
