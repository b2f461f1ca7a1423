import Foundation
import Logging

/// Many named countdowns and stopwatches kept in a database, so they survive restarts, crashes,
/// suspends and clock changes.
///
/// ```swift
/// let store = try CountdownStore(path: "countdowns.sqlite")
/// try await store.start("order-1042", duration: .seconds(15 * 60), group: "payments")
/// let item = try await store.countdown("order-1042")   // remaining ≈ 15 min
/// ```
///
/// Every operation is one transaction that also appends an event. Each transaction first moves
/// the store's clocks (``StoreTime``) forward to now and writes them back, so every process that
/// opens the file agrees on the time. A ticker (or a host calling ``heartbeat()``) holds the
/// store's lease: while one does, time counts as active; otherwise it counts as background gap.
public final class CountdownStore: Sendable {
    /// The configuration the store was opened with.
    public let configuration: Configuration
    /// The database file, or `nil` when the host handed the store its own database.
    public let path: String?
    /// This store instance's name in the lease row.
    public let instanceID: String

    /// The database engine: every read and write of the store goes through it.
    package let engine: any StorageEngine
    /// What the engine can do beyond ``StorageEngine``, looked up once.
    let capabilities: EngineCapabilities
    /// The operations under way on the engine: closing refuses new ones and waits for these.
    let underWay = OperationsUnderWay()
    /// Bumped after every committed write of this instance that changed items or events.
    let changes = ChangeSignal()
    /// The writes of single items waiting for the one under way, to commit together (group commit).
    package let groups: WriteGroups
    /// What this instance keeps in memory: the clocks it handed out, the lease, its readers.
    let state = Locked(MemoryState())
    /// The engine's upkeep, shared by the work that needs it at once: a running ticker, a prune.
    let upkeep = Locked(SharedUpkeep())
    /// What the store reports through swift-metrics.
    let metrics: StoreMetrics

    struct MemoryState {
        /// No clock reading handed out by this instance goes below this.
        var floor: StoreTime?
        /// Whether the host said it is suspended.
        var suspended = false
        /// Whether this instance has ever taken the lease (so closing has a lease to give up).
        var tookLease = false
        /// Until when (boot ms) the lease this instance last took or renewed runs, if it did.
        var leaseHeldUntilBoot: Int64?
        /// The checkpoint and lease expiry this instance saw last, to compute the time without a query.
        var lastCheckpoint: Checkpoint?
        var lastLeaseExpiry: Int64 = 0
        var closed = false
        /// The named consumers this instance's readers have claimed events of.
        var claimedConsumers: Set<String> = []
        /// How many readers of named consumers this instance has started.
        var readers = 0
        /// The named consumers this instance found unread for too long and said so.
        var staleConsumers: Set<String> = []
        /// Where the next expiry batch of a backlog goes on visiting groups (``GroupRotation``).
        var groupRotation = GroupRotation()
        /// When a reader of each named consumer last claimed others' events to pass them (boot ms).
        var othersPassed: [String: Int64] = [:]
    }

    /// A store on `engine`, whose database is already migrated and has its clock row.
    package init(engine: any StorageEngine, path: String?, configuration: Configuration) {
        self.engine = engine
        self.capabilities = EngineCapabilities(engine)
        self.path = path
        self.configuration = configuration
        self.metrics = StoreMetrics(configuration.metrics)
        self.groups = WriteGroups(concurrency: capabilities.concurrentWriteGroups)
        self.instanceID =
            "\(Self.hostName):\(ProcessInfo.processInfo.processIdentifier):\(UUID().uuidString.prefix(8).lowercased())"
        configuration.logger.debug("opened countdown store", metadata: ["path": "\(path ?? "host database")"])
        if configuration.clock.bootIdentity == nil, !Self.bootIdentityUnreadableSaid.exchange(true) {
            configuration.logger.warning(
                """
                the boot identity cannot be read here: a change of the system clock is taken for time that passed, \
                forward as it happened and never backward, as across a reboot
                """
            )
        }
    }

    /// Whether this process said once that its clock cannot tell the boot it runs in.
    private static let bootIdentityUnreadableSaid = Locked(false)

    /// This machine's name as the kernel has it (`gethostname(2)`), read once: never
    /// `ProcessInfo.hostName`, which on macOS can wait seconds for a reverse DNS lookup, and a
    /// store may open on the main actor.
    static let hostName: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }()

    /// A name for a new reader of a named consumer: this instance's, and a number.
    func newReaderName() -> String {
        let number = state.withLock { memory in
            memory.readers += 1
            return memory.readers
        }
        return "\(instanceID):\(number)"
    }

    /// Remembers that a reader of this instance claims events of the consumer `name`.
    func noteClaims(of name: String) {
        _ = state.withLock { $0.claimedConsumers.insert(name) }
    }

    /// Remembers that the consumer `name` was found stale; whether this is the first time.
    func noteStale(_ name: String) -> Bool {
        state.withLock { $0.staleConsumers.insert(name).inserted }
    }

    /// The consumers readers of this instance have claimed events of, by name.
    func claimedConsumers() -> [String] {
        state.withLock { $0.claimedConsumers }.sorted()
    }

    /// Writes a final heartbeat, gives up the lease if this instance holds it, and closes the
    /// database if the store opened it. The store must not be used afterwards, except for
    /// ``checkpointWAL()`` on a database the host shares with it.
    ///
    /// It returns within the lease duration (at least a second) plus a moment, whatever the
    /// database does. Where the database cannot be reached (a lost connection to a database
    /// server, a server that does not answer, another process's lock held all that time), the
    /// store still closes, with a warning naming what it could not write: its lease and the
    /// claims of its event readers run out by themselves. Operations still waiting on the
    /// database then are abandoned (they fail), and the database closes once they have ended.
    public func close() async throws(CountdownError) {
        try await close(by: StopDeadline(bound: stopBound))
    }

    /// ``close()`` giving up at `stop`'s deadline (started now unless it has started): the
    /// `countdown run` tool closes by the deadline of the stop its signal began.
    package func close(by stop: StopDeadline) async throws(CountdownError) {
        guard
            !state.withLock({ memory in
                defer { memory.closed = true }; return memory.closed
            })
        else { return }
        stop.start()
        let consumers = claimedConsumers()
        let holdsLease = state.withLock { $0.tookLease }
        let claimsReleased = Locked(false)
        let writes = Task {
            try await self.releaseClaims()
            claimsReleased.withLock { $0 = true }
            try await self.releaseLease()
        }
        switch await BoundedWait.result(of: writes, by: stop, passingCancellation: false) {
        case .success?:
            break
        case .failure(let failure)?:
            let error = CountdownError(storage: failure, path: path)
            guard error.isTransient else { throw error }
            warnUnwritten(
                consumers: consumers, claimsReleased: claimsReleased.withLock { $0 }, lease: holdsLease,
                why: "the database cannot be reached", error: error)
        case nil:
            warnUnwritten(
                consumers: consumers, claimsReleased: claimsReleased.withLock { $0 }, lease: holdsLease,
                why: "no answer from the database within \(stop.bound)", error: nil)
        }
        let running = underWay.refuseNew()
        if running > 0 {
            let drained = await BoundedWait.result(
                of: Task { await underWay.drained() }, by: stop, passingCancellation: false)
            if drained == nil {
                // The database does not answer: their waits give up, and the database closes once
                // they have ended, without this call waiting any longer.
                configuration.logger.warning(
                    "closing without waiting any longer for operations the database did not answer; they fail",
                    metadata: ["operations": "\(running)", "bound": "\(stop.bound)"])
                capabilities.abandonable?.abandonWaits()
                let (underWay, engine, logger) = (underWay, engine, configuration.logger)
                Task {
                    await underWay.drained()
                    do {
                        try engine.close()
                    } catch {
                        logger.warning("could not close the database", metadata: ["error": "\(error)"])
                    }
                }
                return
            }
        }
        try translatingErrorsNow(path: path) { try engine.close() }
    }

    /// Logs, as a warning, what closing could not write: the claims of `consumers` (unless
    /// released) and the final heartbeat that gives up the lease (if this instance took it).
    private func warnUnwritten(
        consumers: [String], claimsReleased: Bool, lease: Bool, why: String, error: CountdownError?
    ) {
        var unwritten: [String] = []
        if !consumers.isEmpty && !claimsReleased {
            unwritten.append(
                "give up the claims of consumer\(consumers.count == 1 ? "" : "s") \(consumers.joined(separator: ", "))")
        }
        if lease || unwritten.isEmpty { unwritten.append("write the final heartbeat and give up the lease") }
        var metadata: Logger.Metadata = [:]
        if let error { metadata["error"] = "\(error)" }
        configuration.logger.warning(
            "could not \(unwritten.joined(separator: " or ")) while closing (\(why)); they run out by themselves",
            metadata: metadata)
    }
}
