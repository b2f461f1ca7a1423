import Foundation
import Testing

@testable import CountdownStoreCore

/// Retention's settings: on by default with the documented periods, and a period `countdown run`
/// refuses by name. The pruning itself, on every engine, is in `EngineSuite/RetentionTests.swift`.
@Suite("Retention settings")
struct RetentionSettingsTests {
    @Test("The defaults: ended countdowns and events kept 7 days, a consumer holds events back for 30 days")
    func defaults() {
        let retention = CountdownStore.Configuration().retention
        #expect(retention.endedItems == .seconds(7 * 86_400) && retention.events == .seconds(7 * 86_400))
        #expect(retention.staleConsumer == .seconds(30 * 86_400) && retention.batchSize == 1000)
        #expect(retention.interval <= .seconds(60) && retention.prunes)
        #expect(!CountdownStore.Retention.keepEverything.prunes)
    }

    @Test("countdown run refuses a bad retention period, naming it, and writes nothing")
    func toolRefusesBadRetention() throws {
        let folder = try TemporaryFolder()
        for (option, value) in [("--retain-ended", "soon"), ("--retain-events", "12 parsecs")] {
            let result = try HelperProcess.run(countdownBinary, ["--db", folder.path(), "run", option, value])
            #expect(result.status == 64, "\(option) \(value): \(result.stderr)")
            #expect(result.stderr.contains(value) && result.stderr.contains(option), "\(result.stderr)")
        }
    }
}
