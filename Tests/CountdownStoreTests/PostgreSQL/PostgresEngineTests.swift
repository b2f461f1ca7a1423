import Foundation
import Logging
import PostgresNIO
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite
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

    @Test("Durability on PostgreSQL: .full makes every write transaction flush its commit whatever the server says; .normal leaves the server's setting")
    func durabilityIsSynchronousCommit() async throws {
        let server = try TestPostgres.shared()
        let schema = "durability_\(UUID().uuidString.prefix(8).lowercased())"
        // A server whose sessions do not wait for their commits to be flushed.
        let url = server.url + "?sslmode=disable&options=-c%20synchronous_commit%3Doff"
        for (durability, expected) in [(CountdownStore.Durability.normal, "off"), (.full, "on")] {
            var configuration = CountdownStore.Configuration()
            configuration.durability = durability
            let store = try await CountdownStore(postgresURL: url, schema: schema, configuration: configuration)
            let engine = try #require(store.engine as? PostgresEngine)
            func setting(writing: Bool) async throws -> String? {
                try await engine.transaction(writing: writing) { tx in
                    try tx.run("SHOW synchronous_commit").rows.first.map { try $0.decode(String.self) }
                }
            }
            #expect(try await setting(writing: true) == expected, "a write transaction with \(durability)")
            #expect(try await setting(writing: false) == "off", "reads leave the session's setting")
            try await store.start("order-\(durability)", duration: .minutes(5))
            #expect(try await store.countdown("order-\(durability)")?.state == .running)
            #expect(store.sqliteDatabase == nil, "no GRDB database on PostgreSQL, and no trap")
            try await store.close()
        }
    }
}

@Suite("PostgreSQL wake-ups", .timeLimit(.minutes(2)))
struct PostgresWakeUpTests {
    /// A store on the fixture's schema and virtual clock, learning of other hosts' writes as `wakeUps` says.
    private func host(_ fixture: Fixture, wakeUps: PostgresWakeUps) async throws -> CountdownStore {
        try await CountdownStore(
            client: try PostgresFixtures.client(), schema: fixture.schema, place: "schema \(fixture.schema)",
            wakeUps: wakeUps, configuration: fixture.configuration, databaseClock: false)
    }

    /// The server processes of connections listening on the store's channel.
    private func listeners(_ fixture: Fixture) async throws -> [Int32] {
        try await TestPostgres.shared().withClient { client in
            try await client.query(
                PostgresQuery(unsafeSQL: "SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN \"\(notificationChannel(schema: fixture.schema))\";'")
            ).collect().map { try $0.decode(Int32.self) }
        }
    }

    @Test("A start on one host wakes the holder's ticker on another through NOTIFY, with no clock moving; after its LISTEN connection is cut, the holder listens again")
    func notifyWakesTheHolder() async throws {
        let fixture = try Fixture(engine: .postgres)
        let holder = try await host(fixture, wakeUps: .notifications)
        let visitor = try await host(fixture, wakeUps: .pollOnly)
        let running = await RunningTicker(holder)
        try await eventually("the holder's ticker listens") { try await listeners(fixture).count == 1 }
        await running.ticker.waitUntilIdle()
        // What the channel carries, as a listener of the test's own hears it.
        let heard = Locked<[String]>([])
        let channel = notificationChannel(schema: fixture.schema)
        let listening = Task {
            try await PostgresFixtures.client().withConnection { connection in
                try await connection.listen(on: channel) { notifications in
                    heard.withLock { $0.append("listening") }
                    for try await notification in notifications { heard.withLock { $0.append(notification.payload) } }
                }
            }
        }
        defer { listening.cancel() }
        try await eventually("the test listens") { heard.withLock { $0 } == ["listening"] }

        // The virtual clock stands still, so no poll runs: only a notification can wake the holder.
        let before = holder.changes.version
        try await visitor.start("soon", duration: .seconds(1))
        try await eventually("the holder hears of the start") { holder.changes.version != before }
        await running.advance(fixture.clock, by: .seconds(1))
        #expect(try await holder.countdown("soon")?.state == .expired)
        #expect(try await events(holder).filter { $0.kind == "expired" }.count == 1)

        // A deadline after the soonest one sends nothing; notifications arrive in commit order,
        // so a marker sent afterwards closes the list.
        try await visitor.start("first", duration: .seconds(60))
        try await visitor.start("later", duration: .seconds(120))
        _ = try await PostgresFixtures.client().query("SELECT pg_notify(\(channel), 'marker')").collect()
        try await eventually("the marker arrives") { heard.withLock { $0.last } == "marker" }
        #expect(heard.withLock { $0 } == ["listening", "deadline", "expired", "deadline", "marker"])

        // The LISTEN connection is cut: the holder listens again on a new one (re-scanning at once).
        let cut = try await listeners(fixture)
        try await TestPostgres.shared().withClient { client in
            for pid in cut { _ = try await client.query("SELECT pg_terminate_backend(\(pid))").collect() }
        }
        try await eventually("a new LISTEN connection") {
            fixture.clock.advance(by: .milliseconds(100))  // the reconnection waits on the store's clock
            let now = try await listeners(fixture)
            return now.count == 1 && now != cut
        }
        await running.ticker.waitUntilIdle()
        let again = holder.changes.version
        try await visitor.start("sooner", duration: .seconds(2))
        try await eventually("the holder hears of the start on its new connection") { holder.changes.version != again }
        try await running.stop()
        try await visitor.close()
        try await holder.close()
    }

    @Test("URLs take ?wakeups=notify or poll, and name a bad value")
    func wakeUpsInURLs() throws {
        #expect(try PostgresConnectionString("postgres://app@db:5432/orders?wakeups=poll").wakeUps == .pollOnly)
        #expect(try PostgresConnectionString("postgres://app@db:5432/orders?wakeups=notify").wakeUps == .notifications)
        #expect(try PostgresConnectionString("postgres://app@db:5432/orders").wakeUps == nil)
        #expect(throws: CountdownError.self) { try PostgresConnectionString("postgres://app@db:5432/orders?wakeups=sometimes") }
        do {
            _ = try PostgresConnectionString("postgres://app@db:5432/orders?wakeups=sometimes")
        } catch {
            #expect(error.code == .invalidArgument && error.message.contains("unknown wakeups") && error.message.contains("sometimes"))
        }
        #expect(notificationChannel(schema: String(repeating: "s", count: 63)).utf8.count <= 63)
        #expect(notificationChannel(schema: "tenant_1") == "countdown_tenant_1")
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
                    client: try PostgresFixtures.client(), schema: schema, place: "schema \(schema)", wakeUps: .pollOnly,
                    // A lease that outlasts the test however slow the machine: a holder's lease never
                    // runs out between two of its steps.
                    configuration: CountdownStore.Configuration(clock: OffsetClock(offset: offset), leaseDuration: .seconds(120)),
                    databaseClock: true))
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
    @Test("Writers of events do not wait for one another, and no reader reads past an event still being written: IDs are read in order")
    func eventIDsAreReadInOrder() async throws {
        let schema = PostgresFixtures.newSchema()
        let other = try await hosts(schema: schema)[1]
        let armed = HarnessLock(false)
        let holding = HarnessLock(false)
        let release = DispatchSemaphore(value: 0)
        // Once, right before its COMMIT (its event numbered), the first host waits to be released.
        let first = try await CountdownStore(
            client: try PostgresFixtures.client(), schema: schema, place: "schema \(schema)", wakeUps: .pollOnly,
            configuration: CountdownStore.Configuration(leaseDuration: .seconds(120)), databaseClock: true,
            beforeCommit: {
                guard armed.withLock({ armed in defer { armed = false }; return armed }) else { return }
                holding.withLock { $0 = true }
                _ = release.wait(timeout: .now() + 20)
            })
        try await first.start("warm-up", duration: .minutes(5))
        _ = try await other.consumer("mailer")
        let warmUp = try await other.lastEventID()
        armed.withLock { $0 = true }
        let firstStart = Task { _ = try await first.start("first", duration: .minutes(5)) }
        try await eventually("the first write is held before its commit") { holding.withLock { $0 } }
        // The other host's write numbers a higher ID and commits while the first is held.
        try await other.start("second", duration: .minutes(5))
        let committed = try await PostgresFixtures.client().query(
            PostgresQuery(unsafeSQL: "SELECT key FROM \"\(schema)\".countdown_events WHERE kind = 'started' ORDER BY id")
        ).decode(String.self).reduce(into: [String]()) { $0.append($1) }
        #expect(committed == ["warm-up", "second"], "the second write did not wait for the first")
        // Readers go no further than the event still being written.
        #expect(try await other.lastEventID() == warmUp)
        #expect(try await other.deliverableEvents(after: 0, filter: .all, limit: 100).0.map(\.key) == ["warm-up"])
        let claimed = try await other.claimEvents(consumer: "mailer", claimant: "reader", filter: .all)
        #expect(claimed?.map(\.key) == ["warm-up"])
        #expect(try await other.claimEvents(consumer: "mailer", claimant: "reader", filter: .all) == nil)
        release.signal()
        try await firstStart.value
        #expect(try await other.deliverableEvents(after: warmUp, filter: .all, limit: 100).0.map(\.key) == ["first", "second"])
        let rest = try await other.claimEvents(consumer: "mailer", claimant: "reader", filter: .all)
        #expect(rest?.map(\.key) == ["first", "second"])
        try await first.close()
    }

    @Test("A new store whose creation waited for another host's migration starts its clocks at the server's time: no clock event")
    func slowCreationStartsTheClocksRight() async throws {
        let schema = PostgresFixtures.newSchema()
        let (release, releaseNow) = AsyncStream.makeStream(of: Void.self)
        let locked = Locked(false)
        // Another session holds the lock a store's creation takes, as a host migrating would.
        let holder = Task {
            try await PostgresFixtures.client().withConnection { connection in
                let logger = Logger(label: "migration-lock")
                _ = try await connection.query("BEGIN", logger: logger)
                _ = try await connection.query(
                    PostgresQuery(unsafeSQL: "SELECT pg_advisory_xact_lock(hashtext('CountdownStore:\(schema)'))"), logger: logger)
                locked.withLock { $0 = true }
                for await _ in release {}
                _ = try await connection.query("COMMIT", logger: logger)
            }
        }
        try await eventually("the lock is held") { locked.withLock { $0 } }
        // A tolerance well above a round trip to the server on a loaded machine (the first
        // reading's placement is only as exact as its round trip), well below the wait.
        let configuration = CountdownStore.Configuration(leaseDuration: .seconds(120), clockEditTolerance: .milliseconds(500))
        let opening = Task {
            try await CountdownStore(
                client: try PostgresFixtures.client(), schema: schema, place: "schema \(schema)", wakeUps: .pollOnly,
                configuration: configuration, databaseClock: true)
        }
        try await eventually("the creation waits for the lock") {
            try await PostgresFixtures.client().query(
                "SELECT count(*)::bigint FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock%'"
            ).decode(Int64.self).first { _ in true } ?? 0 > 0
        }
        try await Task.sleep(for: .seconds(2))  // a wait far past the 500 ms tolerance
        releaseNow.finish()
        try await holder.value
        let store = try await opening.value
        try await store.heartbeat()
        try await store.start("a", duration: .minutes(1))
        #expect(try await events(store).map(\.kind) == ["started"], "no clock event")
        // W is the server's clock, not ahead of it by the wait (within half a second either way
        // of the instants the server read before and after, however slow the machine).
        let serverNow = { () async throws -> Int64 in
            try await PostgresFixtures.client().query("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")
                .decode(Int64.self).first { _ in true } ?? 0
        }
        let before = try await serverNow()
        let wall = try await store.now().wall
        let after = try await serverNow()
        #expect(wall >= before - 500 && wall <= after + 500, "W \(wall) is the server's time, between \(before) and \(after)")
        try await store.close()
    }

    @Test("Hosts opening one named consumer at the same instant share it: the first creates it, none fails")
    func consumerOpenedSideBySide() async throws {
        let schema = PostgresFixtures.newSchema()
        let stores = try await hosts(schema: schema)
        try await stores[0].start("a", duration: .minutes(1))
        for round in 0..<10 {
            let name = "mailer-\(round)"
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in stores { for _ in 0..<3 { group.addTask { _ = try await store.consumer(name) } } }
                try await group.waitForAll()
            }
        }
        let client = try PostgresFixtures.client()
        let rows = try await client.query(
            PostgresQuery(unsafeSQL: "SELECT name, last_event_id FROM \"\(schema)\".countdown_consumers ORDER BY name")
        ).decode((String, Int64).self).reduce(into: [String]()) { $0.append("\($1.0)@\($1.1)") }
        #expect(rows == (0..<10).map { "mailer-\($0)@0" }.sorted())
        var events = try await stores[1].consumer("mailer-3").events().makeAsyncIterator()
        let first = try await events.next()
        let recorded = try await client.query(
            PostgresQuery(unsafeSQL: "SELECT id, kind, coalesce(key, '-') FROM \"\(schema)\".countdown_events ORDER BY id")
        ).decode((Int64, String, String).self).reduce(into: [String]()) { $0.append("\($1.0) \($1.1) \($1.2)") }
        #expect(first?.key == "a", "the shared consumer starts at the beginning: \(String(describing: first)); recorded \(recorded)")
    }

    @Test("Writers on three hosts run side by side: a reader following the events never skips one, each due countdown expires once")
    func writersSideBySide() async throws {
        let schema = PostgresFixtures.newSchema()
        let stores = try await hosts(schema: schema)
        guard case .held = try await stores[0].heartbeat() else { Issue.record("the first host did not take the lease"); return }
        let client = try PostgresFixtures.client()
        /// Event IDs above `cursor`, in order, as the store's readers read them: each read on its own
        /// snapshot, and no further than the lowest event still being written (a plain
        /// `SELECT … WHERE id > cursor` could see a later ID commit before an earlier one).
        let idsAfter = { (cursor: Int64) async throws -> [Int64] in
            try await stores[1].engine.readEvents { tx in try tx.events(afterID: cursor, limit: Int(Int32.max)).compactMap(\.id) }
        }
        /// Every event ID recorded, read directly once the writers are done.
        let allIDs = { () async throws -> [Int64] in
            try await client.query(PostgresQuery(unsafeSQL: "SELECT id FROM \"\(schema)\".countdown_events ORDER BY id"))
                .decode(Int64.self).reduce(into: []) { $0.append($1) }
        }
        let finished = HarnessLock(false)
        let writing = Task {
            defer { finished.withLock { $0 = true } }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (host, store) in stores.enumerated() {
                    for task in 0..<4 {
                        group.addTask {
                            for index in 0..<20 {
                                let key = "h\(host)-t\(task)-\(index)"
                                // Short deadlines: many come due while the others still write; every
                                // fifth is cancelled before its deadline.
                                let cancelled = index % 5 == 0
                                try await store.start(key, duration: cancelled ? .minutes(10) : .milliseconds(1 + (index * 7) % 40))
                                if cancelled { _ = try await store.cancel(key) }
                                if index % 3 == 0 { try await store.expireDue() }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        var seen: [Int64] = []
        // Reads while the writers commit; one more read after they finished.
        var done = false
        while !done {
            done = finished.withLock { $0 }
            seen += try await idsAfter(seen.last ?? 0)
        }
        try await writing.value
        // Every countdown not cancelled comes due within 40 ms: expire what is left, from every host at once.
        let stop = Date().addingTimeInterval(30)
        let running = { () async throws -> Int64 in
            try await client.query(
                PostgresQuery(unsafeSQL: "SELECT count(*) FROM \"\(schema)\".countdowns WHERE state = 'running'")
            ).decode(Int64.self).reduce(0) { $0 + $1 }
        }
        // Due countdowns read as expired before their expiry is recorded: wait for the rows.
        while try await running() > 0, Date() < stop {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in stores { group.addTask { try await store.expireDue() } }
                try await group.waitForAll()
            }
        }
        seen += try await idsAfter(seen.last ?? 0)
        #expect(seen == (try await allIDs()), "the reader skipped an event a later commit revealed")
        let expired = try await client.query(
            PostgresQuery(unsafeSQL: "SELECT key FROM \"\(schema)\".countdown_events WHERE kind = 'expired'")
        ).decode(String.self).reduce(into: [String: Int]()) { $0[$1, default: 0] += 1 }
        #expect(expired.count == 3 * 4 * 16, "every countdown not cancelled expired")
        #expect(expired.values.allSatisfy { $0 == 1 }, "each expired once: \(expired.filter { $0.value != 1 })")
    }
}
