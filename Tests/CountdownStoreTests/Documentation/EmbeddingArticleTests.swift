import CountdownStore
import Foundation
import GRDB
import Logging
import ServiceLifecycle
import Testing

// The code of the article "Embedding in a host app" (CountdownStore.docc/EmbeddingInAHostApp.md),
// compiled here so it cannot drift from the API, and run on virtual time by the tests below.

// MARK: - A server

/// The host's own service in the article: a real one serves requests; this one waits for the
/// group to shut down. Its two handlers are what a request handler does with countdowns.
struct OrderAPI: Service {
    let store: CountdownStore

    func run() async throws {
        try await gracefulShutdown()
    }

    /// An order was placed: it has 15 minutes to be paid.
    func orderPlaced(_ orderID: Int) async throws {
        try await store.start(
            "order-\(orderID)", duration: .seconds(15 * 60), group: "payments",
            payload: .text(#"{"order":\#(orderID)}"#))
    }

    /// The payment arrived: stop the clock. Returns false when the countdown expired first.
    func paymentReceived(_ orderID: Int) async throws -> Bool {
        do {
            try await store.cancel("order-\(orderID)")
            return true
        } catch {
            guard error.code == .wrongState else { throw error }
            return false  // it expired first: the order is being cancelled
        }
    }
}

/// Cancels every order whose payment deadline passed, as the named consumer "order-canceller".
struct UnpaidOrderCanceller: Service {
    let store: CountdownStore
    let cancelOrder: @Sendable (String) async throws -> Void

    func run() async throws {
        let consumer = try await store.consumer("order-canceller")
        let expiries = EventFilter(kinds: [.expired], group: "payments")
        for try await expiry in try await consumer.events(expiries).cancelOnGracefulShutdown() {
            if let key = expiry.key {
                try await cancelOrder(key)
            }
            try await consumer.acknowledge(expiry)  // handled: never delivered to this consumer again
        }
    }
}

/// The host's own code that the canceller calls; in the article it marks the order cancelled.
func cancelOrderInDatabase(_ key: String) async throws {}

/// The article's server. Compiled, not run: it opens a file under /var/lib and installs signal
/// handlers. The tests below run the same group on virtual time.
func runOrderServer(logger: Logger) async throws {
    let store = try CountdownStore(
        path: "/var/lib/orders/countdowns.sqlite",
        configuration: .init(logger: logger))
    let ticker = CountdownTicker(store: store)
    let group = ServiceGroup(
        services: [
            ticker,
            UnpaidOrderCanceller(store: store, cancelOrder: cancelOrderInDatabase),
            OrderAPI(store: store),
        ],
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: logger)
    try await group.run()
    try await store.close()
}

/// The article's request handlers: one countdown as JSON, a page of them with the cursor.
func showOrder(_ store: CountdownStore, key: String) async throws -> (status: Int, body: Data) {
    do {
        guard let item = try await store.countdown(key) else { return (404, Data()) }
        return (200, try JSONEncoder().encode(item))
    } catch let error as CountdownError where error.code == .invalidKey {
        return (400, Data(error.message.utf8))
    }
}

func listOrders(_ store: CountdownStore, after cursor: ListCursor?) async throws -> (body: Data, next: ListCursor?) {
    let page = try await store.list(.active, group: "payments", limit: 100, after: cursor)
    return (try JSONEncoder().encode(page.items), page.next)  // next == nil: the list is whole
}

/// The article's logging set-up.
func countdownConfiguration(logger: Logger) -> CountdownStore.Configuration {
    var logger = logger
    logger.logLevel = .info  // lease changes, clock edits and failures; not every open
    return CountdownStore.Configuration(logger: logger)
}

// MARK: - An Apple-platform app

/// An app's countdowns: one store and its ticker for the app's lifetime. Nothing here needs
/// SwiftUI or UIKit; the app calls it from its lifecycle.
final class AppCountdowns: Sendable {
    let store: CountdownStore
    let ticker: CountdownTicker

    init(store: CountdownStore) {
        self.store = store
        self.ticker = CountdownTicker(store: store)
    }

    /// Opens the store in the app's Application Support folder.
    convenience init() throws {
        let folder = try FileManager.default.url(
            for: .applicationSupportDirectory, in: .userDomainMask, appropriateFor: nil, create: true)
        self.init(store: try CountdownStore(path: folder.appendingPathComponent("countdowns.sqlite").path))
    }

    /// Runs the ticker until the task is cancelled: start it once, at launch.
    func runTicker() async throws {
        try await ticker.run()
    }

    /// Call whenever the scene phase changes: `active` countdowns stand still in the background.
    func scenePhaseChanged(toBackground background: Bool) async throws {
        if background {
            try await store.enterBackground()
        } else {
            try await store.enterForeground()
        }
    }
}

/// What a countdown label shows: minutes and seconds left, rounded up.
func labelText(for item: Countdown?) -> String {
    guard let remaining = item?.remaining else { return "--:--" }
    let seconds = Int((remaining / .seconds(1)).rounded(.up))
    let rest = seconds % 60
    return "\(seconds / 60):" + (rest < 10 ? "0" : "") + "\(rest)"
}

/// Keeps one label up to date: the remaining time of `key` on every whole second.
func followCountdown(
    _ key: String, ticker: CountdownTicker, show: @escaping @Sendable (String) async -> Void
) async throws {
    for await snapshot in try ticker.ticks(keys: [key], every: .seconds(1)) {
        await show(labelText(for: snapshot.items.first))
    }
}

/// A screen's list of payment deadlines, soonest first, refreshed on every whole second.
@MainActor
final class PaymentDeadlinesModel {
    private(set) var rows: [Countdown] = []

    /// Runs while the screen is shown; cancelling the task ends the subscription.
    func follow(_ ticker: CountdownTicker) async throws {
        for await snapshot in try ticker.ticks(group: "payments", every: .seconds(1)) {
            rows = snapshot.items
        }
    }
}

// MARK: - Sharing the host's database

/// Opens the app's own database and the countdowns inside it: one file for both.
func openAppDatabase(at path: String) throws -> (DatabasePool, CountdownStore) {
    var configuration = GRDB.Configuration()
    configuration.busyMode = .timeout(10)  // wait for other writers (the countdown tool) instead of failing
    let dbPool = try DatabasePool(path: path, configuration: configuration)

    var migrator = DatabaseMigrator()
    migrator.registerMigration("createUser") { db in
        try db.create(table: "user") { table in
            table.autoIncrementedPrimaryKey("id")
            table.column("name", .text).notNull()
        }
    }
    try migrator.migrate(dbPool)

    let countdowns = try CountdownStore(database: dbPool)
    return (dbPool, countdowns)
}

// MARK: - Several processes

/// What a host's status page says about its ticker.
func tickerRole(_ ticker: CountdownTicker) -> String {
    switch ticker.leaseStatus {
    case .held(let until): "active: holds the countdown lease until \(until)"
    case .heldElsewhere(let holder, let until): "standby: \(holder) holds the lease until \(until)"
    case nil: "not running"
    }
}

// MARK: - Tests

/// A log handler that keeps what it is given, for the logging test.
struct RecordingLogHandler: LogHandler {
    final class Records: @unchecked Sendable {
        // Safe: `lines` is read and written under `lock` only.
        private let lock = NSLock()
        private var lines: [(Logger.Level, String)] = []
        private var keys: [String: Set<String>] = [:]
        func append(_ level: Logger.Level, _ message: String, _ metadata: Logger.Metadata?) {
            lock.withLock {
                lines.append((level, message))
                keys[message, default: []].formUnion(metadata?.keys ?? [:].keys)
            }
        }
        var all: [(Logger.Level, String)] { lock.withLock { lines } }
        /// The metadata keys logged with `message`.
        func metadataKeys(_ message: String) -> Set<String> { lock.withLock { keys[message] ?? [] } }
    }

    let records: Records
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    func log(event: LogEvent) {
        records.append(event.level, "\(event.message)", event.metadata)
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}

@Suite("Article: Embedding in a host app")
struct EmbeddingArticleTests {
    /// The article's text.
    static let article: String = {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let url = root.appendingPathComponent("Sources/CountdownStore/CountdownStore.docc/EmbeddingInAHostApp.md")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    /// A store on a fresh file with a virtual clock.
    private static func virtualStore(_ folder: TemporaryFolder, clock: VirtualClock) throws -> CountdownStore {
        try CountdownStore(path: folder.path(), configuration: .init(clock: clock))
    }

    /// Moves virtual time in steps no longer than a heartbeat, waiting for the ticker after each.
    private static func advance(
        _ clock: VirtualClock, by duration: Duration, step: Duration = .milliseconds(500), tickers: [CountdownTicker]
    ) async {
        var left = duration
        while left > .zero {
            let next = min(step, left)
            clock.advance(by: next)
            left -= next
            for ticker in tickers { await ticker.waitUntilIdle() }
        }
    }

    @Test("An unpaid order is cancelled when its 15 minutes are up, not before", .timeLimit(.minutes(5)))
    func unpaidOrderIsCancelledAfter15Minutes() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        let clock = VirtualClock()
        let store = try CountdownStore(
            path: folder.appendingPathComponent("countdowns.sqlite").path,
            configuration: .init(clock: clock))
        let ticker = CountdownTicker(store: store)
        let (cancelled, report) = AsyncStream.makeStream(of: String.self)
        let canceller = UnpaidOrderCanceller(store: store) { key in report.yield(key) }
        let group = ServiceGroup(services: [ticker, canceller], logger: Logger(label: "test"))
        let running = Task { try await group.run() }

        try await OrderAPI(store: store).orderPlaced(1042)
        await ticker.waitUntilIdle()
        clock.advance(by: .seconds(15 * 60 - 1))
        await ticker.waitUntilIdle()
        #expect(try await store.countdown("order-1042")?.state == .running)  // one second left

        clock.advance(by: .seconds(1))
        await ticker.waitUntilIdle()
        var keys = cancelled.makeAsyncIterator()
        #expect(await keys.next() == "order-1042")

        await group.triggerGracefulShutdown()
        try await running.value
        try await store.close()
    }

    @Test("The server's group: expiries reach the named consumer once; a graceful shutdown writes a final heartbeat and frees the lease", .timeLimit(.minutes(5)))
    func serverGroupDeliversAndShutsDownGracefully() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        let store = try Self.virtualStore(folder, clock: clock)
        let api = OrderAPI(store: store)
        let ticker = CountdownTicker(store: store)
        let (cancelled, report) = AsyncStream.makeStream(of: String.self)
        let canceller = UnpaidOrderCanceller(store: store) { key in report.yield(key) }
        // The article's order: the ticker first, so it stops last.
        let group = ServiceGroup(services: [ticker, canceller, api], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        await ticker.waitUntilIdle()

        try await api.orderPlaced(1)
        try await api.orderPlaced(2)
        try await store.start("otp:alice", duration: .seconds(60), group: "codes")  // not a payment
        await Self.advance(clock, by: .seconds(60), tickers: [ticker])
        #expect(try await api.paymentReceived(2), "paid in time")
        clock.advance(by: .seconds(15 * 60 - 60))  // wall countdowns: one jump is fine
        await ticker.waitUntilIdle()
        #expect(try await api.paymentReceived(1) == false, "too late: it expired first")
        var keys = cancelled.makeAsyncIterator()
        #expect(await keys.next() == "order-1", "only the unpaid order, only payments")
        if case .held = ticker.leaseStatus {} else { Issue.record("the ticker should hold the lease") }
        #expect(tickerRole(ticker).hasPrefix("active: holds the countdown lease until"))

        let lastEventBefore = try await store.recentEvents(limit: 1).first?.id
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(tickerRole(ticker) == "not running")
        let status = try await store.clockStatus()
        #expect(status.leaseHolder == nil, "the lease is free")
        #expect(status.lastHeartbeat == status.now.wallDate, "a final heartbeat")
        let expiry = try #require(try await store.recentEvents(kinds: [.expired]).first { $0.key == "order-1" })
        #expect(try await store.consumer("order-canceller").acknowledgedThrough() == expiry.id)
        #expect(try await store.recentEvents(limit: 1).first?.id == lastEventBefore, "a shutdown appends no event")
        try await store.close()
        let wal = (try? FileManager.default.attributesOfItem(atPath: folder.path() + "-wal")[.size] as? NSNumber)?.intValue ?? 0
        #expect(wal == 0, "closing folds the WAL into the database file")

        // Started again: the acknowledged expiry is not delivered again; one that came due
        // while nothing ran is caught up and delivered.
        let reopened = try Self.virtualStore(folder, clock: clock)
        try await reopened.start("order-3", duration: .seconds(1), group: "payments")
        clock.advance(by: .seconds(5))
        let again = CountdownTicker(store: reopened)
        let (secondRun, secondReport) = AsyncStream.makeStream(of: String.self)
        let secondGroup = ServiceGroup(
            services: [again, UnpaidOrderCanceller(store: reopened) { key in secondReport.yield(key) }],
            logger: Logger(label: "test"))
        let secondRunning = Task { try await secondGroup.run() }
        var secondKeys = secondRun.makeAsyncIterator()
        #expect(await secondKeys.next() == "order-3")
        await secondGroup.triggerGracefulShutdown()
        try await secondRunning.value
        try await reopened.close()
    }

    @Test("An expiry whose handling failed is delivered again at the next start", .timeLimit(.minutes(5)))
    func unacknowledgedExpiryComesAgain() async throws {
        struct MailServerDown: Error {}
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        do {
            let store = try Self.virtualStore(folder, clock: clock)
            try await OrderAPI(store: store).orderPlaced(7)
            clock.advance(by: .seconds(15 * 60))
            try await store.expireDue()
            let failing = UnpaidOrderCanceller(store: store) { _ in throw MailServerDown() }
            let group = ServiceGroup(services: [CountdownTicker(store: store), failing], logger: Logger(label: "test"))
            await #expect(throws: MailServerDown.self) { try await group.run() }
            try await store.close()
        }
        let store = try Self.virtualStore(folder, clock: clock)
        let (cancelled, report) = AsyncStream.makeStream(of: String.self)
        let group = ServiceGroup(
            services: [CountdownTicker(store: store), UnpaidOrderCanceller(store: store) { key in report.yield(key) }],
            logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        var keys = cancelled.makeAsyncIterator()
        #expect(await keys.next() == "order-7")
        await group.triggerGracefulShutdown()
        try await running.value
        try await store.close()
    }

    @Test("The configured logger gets the lease changes at info, and not the debug line of every open", .timeLimit(.minutes(5)))
    func loggerGetsLeaseChanges() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        let records = RecordingLogHandler.Records()
        let hostLogger = Logger(label: "orders") { _ in RecordingLogHandler(records: records) }
        var configuration = countdownConfiguration(logger: hostLogger)
        configuration.clock = clock
        #expect(configuration.heartbeatInterval == .seconds(1) && configuration.leaseDuration == .seconds(2))
        #expect(configuration.clockEditTolerance == .seconds(1) && CountdownStore.SQLiteOptions().busyTimeout == .seconds(10))
        let store = try CountdownStore(path: folder.path(), configuration: configuration)
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        await ticker.waitUntilIdle()
        running.cancel()
        try await running.value
        try await store.close()
        let lines = records.all
        #expect(lines.contains { $0.0 == .info && $0.1 == "holding the countdown lease" })
        #expect(!lines.contains { $0.0 == .debug }, "\(lines)")
    }

    @Test("The request handlers: a countdown as JSON in one line, a refusal caught in the closure, a cut list told from a whole one")
    func requestHandlers() async throws {
        let folder = try TemporaryFolder()
        let store = try Self.virtualStore(folder, clock: VirtualClock())
        try await store.start((0..<150).map { .countdown("order-\($0)", duration: .seconds(Int64(60 + $0)), group: "payments") })
        let shown = try await showOrder(store, key: "order-7")
        #expect(shown.status == 200)
        let object = try #require(try JSONSerialization.jsonObject(with: shown.body) as? [String: Any])
        #expect(object["key"] as? String == "order-7" && object["remaining_ms"] as? Int == 67_000)
        #expect(try await showOrder(store, key: "nobody").status == 404)
        let refused = try await showOrder(store, key: "")
        #expect(refused.status == 400 && String(decoding: refused.body, as: UTF8.self).contains("key"))
        let first = try await listOrders(store, after: nil)
        let cut: ListCursor = try #require(first.next, "150 items: the first page is cut")
        let second = try await listOrders(store, after: cut)
        #expect(second.next == nil, "the second page ends the list")
        let items = try JSONDecoder().decode([Countdown].self, from: first.body) + JSONDecoder().decode([Countdown].self, from: second.body)
        #expect(items.map(\.key) == (0..<150).map { "order-\($0)" })
        try await store.close()
    }

    @Test("A ticker that starts beside a live lease says at once that it stands by, as the article's log table says", .timeLimit(.minutes(5)))
    func standingByIsLoggedAtStart() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        let holder = try CountdownStore(path: folder.path(), configuration: .init(clock: clock))
        try await holder.heartbeat()  // a process that holds the lease (or died holding it: nobody renews it here)
        let records = RecordingLogHandler.Records()
        var configuration = countdownConfiguration(logger: Logger(label: "orders") { _ in RecordingLogHandler(records: records) })
        configuration.clock = clock
        let store = try CountdownStore(path: folder.path(), configuration: configuration)
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        await ticker.waitUntilIdle()
        let message = "standing by: another process holds the lease"
        #expect(records.all.contains { $0.0 == .info && $0.1 == message }, "\(records.all)")
        #expect(records.metadataKeys(message) == ["holder", "until"])
        let row = try #require(Self.article.split(separator: "\n").first { $0.contains("`\(message)`") })
        #expect(row.hasPrefix("| info |") && row.contains("`holder`, `until`"), "\(row)")
        // When the dead holder's lease runs out, the ticker takes it and says so.
        clock.advance(by: .seconds(3))
        await ticker.waitUntilIdle()
        #expect(records.all.contains { $0.0 == .info && $0.1 == "holding the countdown lease" })
        running.cancel()
        try await running.value
        try await store.close()
        try await holder.close()
    }

    @Test("The app's lifecycle glue: active countdowns stand still while suspended, wall ones count", .timeLimit(.minutes(5)))
    func appLifecycleSuspendsAndResumes() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        let countdowns = AppCountdowns(store: try Self.virtualStore(folder, clock: clock))
        let store = countdowns.store
        try await store.start("screen-time", duration: .seconds(60 * 60), policy: .active)
        try await store.start("cooldown", duration: .seconds(5 * 60))
        let ticker = Task { try await countdowns.runTicker() }
        await countdowns.ticker.waitUntilIdle()

        await Self.advance(clock, by: .seconds(10), tickers: [countdowns.ticker])
        try await countdowns.scenePhaseChanged(toBackground: true)
        await Self.advance(clock, by: .seconds(120), step: .seconds(30), tickers: [countdowns.ticker])
        try await countdowns.scenePhaseChanged(toBackground: false)
        await Self.advance(clock, by: .seconds(5), tickers: [countdowns.ticker])

        #expect(try await store.countdown("screen-time")?.elapsed == .seconds(15), "the background did not count")
        #expect(try await store.countdown("cooldown")?.elapsed == .seconds(135), "the background counted")
        let kinds = try await store.recentEvents(kinds: [.hostSuspended, .hostResumed]).map(\.kind)
        #expect(Set(kinds) == [.hostSuspended, .hostResumed])
        ticker.cancel()
        try await ticker.value
        try await store.close()
    }

    @Test("An app killed while suspended starts unsuspended at its next launch", .timeLimit(.minutes(5)))
    func nextLaunchStartsUnsuspended() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        do {
            let killed = AppCountdowns(store: try Self.virtualStore(folder, clock: clock))
            try await killed.store.heartbeat()
            try await killed.scenePhaseChanged(toBackground: true)
            #expect(try await killed.store.clockStatus().suspended)
        }
        clock.advance(by: .seconds(60))
        let launched = AppCountdowns(store: try Self.virtualStore(folder, clock: clock))
        let ticker = Task { try await launched.runTicker() }
        await launched.ticker.waitUntilIdle()
        #expect(try await launched.store.clockStatus().suspended == false)
        ticker.cancel()
        try await ticker.value
        try await launched.store.close()
    }

    @Test("Display ticks: a label per key and a list per group, on whole seconds, ended by cancelling", .timeLimit(.minutes(5)))
    @MainActor
    func displayTicks() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()  // starts on a whole second
        let store = try Self.virtualStore(folder, clock: clock)
        let api = OrderAPI(store: store)
        try await api.orderPlaced(1042)
        clock.advance(by: .seconds(30))
        try await api.orderPlaced(1043)
        try await store.startStopwatch("build-42", group: "payments")
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        await ticker.waitUntilIdle()

        let (labels, show) = AsyncStream.makeStream(of: String.self)
        let label = Task { try await followCountdown("order-1042", ticker: ticker) { show.yield($0) } }
        let model = PaymentDeadlinesModel()
        let list = Task { try await model.follow(ticker) }
        while ticker.subscriptionCount < 2 { await Task.yield() }
        await Self.advance(clock, by: .milliseconds(500), tickers: [ticker])
        var texts = labels.makeAsyncIterator()
        var seen: [String] = []
        for _ in 0..<3 {
            await Self.advance(clock, by: .seconds(1), step: .milliseconds(250), tickers: [ticker])
            seen.append(try #require(await texts.next()))
        }
        #expect(seen == ["14:29", "14:28", "14:27"], "\(seen)")
        while model.rows.isEmpty { await Task.yield() }
        #expect(model.rows.map(\.key) == ["order-1042", "order-1043", "build-42"], "soonest first, stopwatches last")

        label.cancel()
        list.cancel()
        _ = await label.result
        _ = await list.result
        await Self.advance(clock, by: .seconds(1), tickers: [ticker])
        #expect(ticker.subscriptionCount == 0, "cancelling the consuming task ended both subscriptions")
        running.cancel()
        try await running.value
        try await store.close()
    }

    @Test("A tick interval must be between 1 ms and 1 day")
    func tickIntervals() async throws {
        let folder = try TemporaryFolder()
        let store = try Self.virtualStore(folder, clock: VirtualClock())
        let ticker = CountdownTicker(store: store)
        await expectError(.invalidArgument) { try ticker.ticks(keys: ["a"], every: .zero) }
        await expectError(.invalidArgument) { try ticker.ticks(group: nil, every: .seconds(86_401)) }
        try await store.close()
    }

    @Test("Inside the host's own GRDB database: the countdown tables and views beside the host's, migrated once")
    func insideTheHostDatabase() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path("app.sqlite")
        do {
            let (dbPool, countdowns) = try openAppDatabase(at: path)
            try await dbPool.write { db in try db.execute(sql: "INSERT INTO user (name) VALUES ('ada')") }
            try await countdowns.start("user-1-resend-code", duration: .seconds(30))
            #expect(countdowns.path == nil)
            let names = try await dbPool.read { db in
                try String.fetchAll(
                    db,
                    sql: "SELECT type || ' ' || name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY type, name")
            }
            #expect(
                names == [
                    "table countdown_clock", "table countdown_consumer_claims", "table countdown_consumers", "table countdown_events", "table countdown_lease",
                    "table countdown_migrations", "table countdown_retired_keys", "table countdowns", "table grdb_migrations",
                    "table user", "view active_countdowns", "view countdown_figures", "view countdown_now",
                    "view expired_countdowns",
                ])
            let journal = try await dbPool.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
            #expect(journal == "wal", "a DatabasePool uses WAL")
            try await countdowns.close()
            #expect(try await dbPool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM user") } == 1, "the host's database stays open")
            try dbPool.close()
        }
        // Opened again: nothing to migrate; the countdown is still there.
        let (dbPool, countdowns) = try openAppDatabase(at: path)
        let migrations = try await dbPool.read { db in try String.fetchAll(db, sql: "SELECT name FROM countdown_migrations") }
        #expect(migrations == ["0001_core_tables.sql", "0002_views.sql", "0003_listing_indexes.sql", "0004_expiry_at_query_time.sql", "0005_consumer_claims.sql", "0006_retention.sql", "0007_active_until_lease_end.sql", "0008_rules.sql", "0009_events_by_kind_and_group.sql"])
        #expect(try await countdowns.countdown("user-1-resend-code")?.state == .running)
        try await countdowns.close()
        try dbPool.close()
        // The countdown tool opens the file by path, like this: the host's tables are no obstacle
        // once the countdown tables are there.
        let byPath = try CountdownStore(path: path)
        #expect(try await byPath.countdown("user-1-resend-code") != nil)
        try await byPath.close()
    }

    @Test("Several store instances on one file: one ticker holds the lease; the standby takes over within two lease intervals", .timeLimit(.minutes(5)))
    func standbyTakesOver() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        // A first "process" took the lease with a heartbeat and then stopped renewing it, as a
        // crashed one would.
        let crashed = try Self.virtualStore(folder, clock: clock)
        if case .held = try await crashed.heartbeat() {} else { Issue.record("the first instance should hold the lease") }
        let store = try Self.virtualStore(folder, clock: clock)
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        await ticker.waitUntilIdle()
        #expect(tickerRole(ticker).hasPrefix("standby: \(crashed.instanceID) holds the lease until"))
        await Self.advance(clock, by: .seconds(4), step: .milliseconds(250), tickers: [ticker])  // two lease intervals
        #expect(tickerRole(ticker).hasPrefix("active:"))
        running.cancel()
        try await running.value
        try await store.close()
        try await crashed.close()
    }

    @Test("In tests, a jump longer than the lease counts for active countdowns only until the lease runs out; steps of a heartbeat count in full", .timeLimit(.minutes(5)))
    func jumpsAndSteps() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        let store = try Self.virtualStore(folder, clock: clock)
        try await store.start("screen-time", duration: .seconds(60), policy: .active)
        try await store.start("cooldown", duration: .seconds(60))
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        await ticker.waitUntilIdle()
        clock.advance(by: .seconds(30))
        await ticker.waitUntilIdle()
        #expect(try await store.countdown("screen-time")?.remaining == .seconds(58), "one jump: the 2 s of the lease counted, then nobody ticked")
        #expect(try await store.countdown("cooldown")?.remaining == .seconds(30))
        await Self.advance(clock, by: .seconds(30), step: .seconds(1), tickers: [ticker])
        #expect(try await store.countdown("screen-time")?.remaining == .seconds(28), "steps of one heartbeat")
        #expect(try await store.countdown("cooldown")?.state == .expired)
        running.cancel()
        try await running.value
        try await store.close()
    }
}
