import Foundation
import PostgresNIO
import Testing

@testable import CountdownStore
@testable import CountdownStorePostgres

@Suite("PostgreSQL engine", .timeLimit(.minutes(2)))
struct PostgresEngineTests {
    @Test("A store in a schema of its own: start, read, expire on the holder's ticker")
    func roundTrip() async throws {
        let fixture = try Fixture(engine: .postgres)
        let store = try await fixture.openTicking()
        try await store.start("order-1", duration: .seconds(30), group: "payments", payload: .text("p"))
        try await store.start("order-2", duration: .seconds(60), payload: .bytes(Data([0, 1, 2])))
        let item = try await store.countdown("order-1")
        #expect(item?.state == .running && item?.payload == .text("p"))
        try await run(store, fixture.clock, for: .seconds(31))
        #expect(try await store.countdown("order-1")?.state == .expired)
        #expect(try await store.countdown("order-2")?.payload == .bytes(Data([0, 1, 2])))
        #expect(try await events(store).map(\.kind) == ["started", "started", "expired"])
    }
}

/// The machine's clocks with the system clock moved by `offset`, as a host whose clock is wrong.
struct OffsetClock: StoreClock {
    let base = SystemClock()
    let offset: Duration

    var systemMilliseconds: Int64 { base.systemMilliseconds + offset.milliseconds }
    var bootMilliseconds: Int64 { base.bootMilliseconds }
    var bootIdentity: String? { base.bootIdentity }
    func sleep(untilBootMilliseconds deadline: Int64) async throws {
        try await base.sleep(untilBootMilliseconds: deadline)
    }
}

@Suite("PostgreSQL hosts", .timeLimit(.minutes(2)))
struct PostgresHostsTests {
    /// Three hosts on one schema, their clocks at −1 h, 0 and +1 h, on the database's clock.
    private func hosts(schema: String) async throws -> [CountdownStore] {
        var stores: [CountdownStore] = []
        for offset in [Duration.hours(-1), .zero, .hours(1)] {
            stores.append(
                try await CountdownStore(
                    client: try PostgresFixtures.client(), schema: schema, place: "schema \(schema)", runner: nil,
                    configuration: CountdownStore.Configuration(clock: OffsetClock(offset: offset)), databaseClock: true))
        }
        return stores
    }

    @Test("A host whose clock is off by an hour either way changes nothing: every host reads the database's time")
    func hostClocksDoNotMatter() async throws {
        let schema = PostgresFixtures.newSchema()
        let stores = try await hosts(schema: schema)
        let serverMs = try await PostgresFixtures.client().query("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")
            .decode(Int64.self).first { _ in true } ?? 0
        for (index, store) in stores.enumerated() {
            try await store.start("item-\(index)", duration: .minutes(10))
        }
        for store in stores {
            let wall = try await store.now().wall
            // Within seconds of the server's clock (the suite's own pace), never an hour off.
            #expect(abs(wall - serverMs) < 60_000, "W \(wall) vs the server's \(serverMs)")
            for index in stores.indices {
                let remaining = try #require(try await store.countdown("item-\(index)")?.remaining)
                #expect(remaining > .minutes(9) && remaining <= .minutes(10), "item-\(index): \(remaining)")
            }
        }
    }

    @Test("One lease across hosts: the holder is fenced by its term; another takes it once it is given up")
    func oneLeaseAcrossHosts() async throws {
        let schema = PostgresFixtures.newSchema()
        let stores = try await hosts(schema: schema)
        guard case .held = try await stores[0].heartbeat() else { Issue.record("the first host did not take the lease"); return }
        for store in stores.dropFirst() {
            guard case .heldElsewhere(let holder, _) = try await store.heartbeat() else {
                Issue.record("a second host took a live lease")
                return
            }
            #expect(holder == stores[0].instanceID)
        }
        let term = { (store: CountdownStore) async throws -> String? in
            try await store.diagnostics().engineDetails.first { $0.name == "lease term" }?.value
        }
        #expect(try await term(stores[1]) == "1")
        try await stores[0].releaseLease()
        guard case .held = try await stores[2].heartbeat() else { Issue.record("the lease was not free after release"); return }
        #expect(try await term(stores[0]) == "2")
        // Writes of hosts that do not hold the lease leave the clock row to the holder.
        let before = try await PostgresFixtures.snapshot(schema: schema).filter { $0.hasPrefix("countdown_clock") }
        try await stores[0].start("from-a-visitor", duration: .minutes(1))
        let after = try await PostgresFixtures.snapshot(schema: schema).filter { $0.hasPrefix("countdown_clock") }
        #expect(before == after)
    }
}
