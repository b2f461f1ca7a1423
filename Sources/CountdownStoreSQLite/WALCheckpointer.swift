import CountdownStoreCore
import CSQLiteShim
import Foundation
import GRDB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Folds the write-ahead log into the database file while a ticker runs, at moments when no
/// expiry is near, from a connection and a low-priority thread of its own.
///
/// SQLite checkpoints automatically in whichever commit pushes the WAL past 1,000 pages: that
/// commit copies megabytes and syncs the file before it returns, and an expiry committed then
/// is late by as much. While the ticker runs, the store's connection does not checkpoint; the
/// ticker calls ``idle(untilNextDeadlineMs:)`` before it sleeps, and a passive checkpoint (it
/// never blocks a writer) starts when the WAL holds 1,000 pages not yet copied and no deadline
/// comes within 50 ms, or in any case once 262,144 pages (1 GiB of 4 KiB pages) are waiting:
/// a burst of a thousand expiries a second, about ten pages each, can go on for 25 seconds
/// before a checkpoint has to run beside it. Between the batches of a backlog, a WAL past 64 MiB
/// makes the backlog wait for a checkpoint that starts it over (``betweenBatches()``). A WAL
/// file grown past 128 MiB (readers kept it from starting over) is trimmed back in steps of at
/// most 16 MiB after checkpoints that copied it all (``trimStep()``): the store's commits never
/// cut it themselves. Only for a store that opened its own file: a host's database keeps the
/// host's settings.
final class WALCheckpointer: EngineUpkeep, @unchecked Sendable {
    // Safe: the mutable properties are reached only under `lock`; the rest is fixed at init.
    private let lock = NSLock()
    /// Frames in the WAL after the store connection's last commit (SQLite's WAL hook).
    private var walFrames = 0
    /// Frames the last checkpoint copied, counted in the WAL it saw.
    private var checkpointed = 0
    private var running = false
    private var stopped = false
    private var hasFinished = false
    private var finished: CheckedContinuation<Void, Never>?
    /// How many checkpoints have run, and who waits for a number of them (tests).
    private var completed = 0
    private var completionWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    /// A backlog waits for the checkpoint after the one under way: it starts as that one ends.
    private var holdAfterCurrent = false
    /// The next checkpoint also starts the WAL over (SQLite's `RESTART`, waiting at most
    /// ``restartWaitMs`` for readers of the frames it copied).
    private var restartNext = false

    /// The store's own connection, whose automatic checkpoints this one replaces.
    private let writer: any DatabaseWriter
    private let queue: DatabaseQueue
    private let pipe = WakePipe()

    /// SQLite's own threshold for automatic checkpoints.
    static let pagesWorthCopying = 1000
    /// The WAL never holds more than this many pages waiting, near a deadline or not.
    static let mostPagesWaiting = 262_144
    /// How large the WAL may grow during a backlog before the backlog waits for a checkpoint to
    /// copy it all (16,384 pages: 64 MiB of 4 KiB pages, half of ``trimmedWALBytes``). Half, so
    /// that a WAL file that grew only in backlogs never needs trimming: each step of trimming is a
    /// cut that holds every other writer back while the kernel lets go of the file's pages.
    static let pagesBeforeARestart = 16_384
    /// The size a WAL file grown in a burst is trimmed back to.
    static let trimmedWALBytes: Int64 = 128 << 20
    /// How much one step of trimming cuts, at most: the step holds every other writer back while
    /// the kernel lets go of the file's pages (about 87 ms for a few hundred MiB, in one trace).
    static let trimStepBytes: Int64 = 16 << 20

    /// The pause between two steps of trimming, for other writers.
    static let pauseBetweenStepsMicroseconds: useconds_t = 5_000

    /// How long a checkpoint that starts the WAL over waits for the readers of its frames (and
    /// holds other writers back meanwhile), at most.
    static let restartWaitMs: CInt = 20
    /// How far the next deadline must be for a checkpoint to start.
    static let quietMs: Int64 = 50

    /// The store connection's own setting, given back by ``stop()``.
    private let automaticPages: Int

    /// How many pages of WAL make a backlog wait for the WAL to start over.
    private let restartAfter: Int
    /// The `-wal` file, and the size and step of trimming it (``trimmedWALBytes``, ``trimStepBytes``).
    private let walPath: String
    private let trimmedBytes: Int64
    private let stepBytes: Int64
    /// The size of the `-wal` file after the last checkpoint; how many trimming steps cut it.
    private var walFileBytes: Int64 = 0
    private var trims = 0

    private init(
        writer: any DatabaseWriter, queue: DatabaseQueue, automaticPages: Int, restartAfter: Int, walPath: String,
        trimmedBytes: Int64, stepBytes: Int64
    ) {
        self.writer = writer
        self.queue = queue
        self.automaticPages = automaticPages
        self.restartAfter = restartAfter
        self.walPath = walPath
        self.trimmedBytes = trimmedBytes
        self.stepBytes = stepBytes
    }

    /// Takes over checkpointing for the store's own file at `path`, from a connection of its own.
    /// `pagesBeforeARestart`, `trimmedWALBytes`, `trimStepBytes`: ``pagesBeforeARestart``,
    /// ``trimmedWALBytes`` and ``trimStepBytes``, unless a test asks for less.
    static func start(
        for repository: SQLiteEngine, path: String, pagesBeforeARestart: Int = WALCheckpointer.pagesBeforeARestart,
        trimmedWALBytes: Int64 = WALCheckpointer.trimmedWALBytes, trimStepBytes: Int64 = WALCheckpointer.trimStepBytes
    ) throws -> WALCheckpointer {
        let queue = try DatabaseQueue(
            path: path,
            configuration: DatabaseOpening.grdbConfiguration(
                busyTimeout: repository.busyTimeout, durability: repository.durability))
        // Only a restart waits (passive checkpoints never do), and only briefly.
        queue.inDatabase { db in
            if let connection = db.sqliteConnection { sqlite3_busy_timeout(connection, restartWaitMs) }
        }
        let checkpointer = WALCheckpointer(
            writer: repository.writer, queue: queue,
            automaticPages: DatabaseOpening.automaticCheckpointPages(repository.durability),
            restartAfter: pagesBeforeARestart, walPath: path + "-wal", trimmedBytes: max(0, trimmedWALBytes),
            stepBytes: max(1, trimStepBytes))
        try checkpointer.takeOverCheckpoints()
        let size = checkpointer.walFileSize()
        checkpointer.lock.withLock { checkpointer.walFileBytes = size }
        let thread = Thread { checkpointer.run() }
        thread.name = "CountdownStore.WALCheckpointer"
        #if !os(Linux)
            thread.qualityOfService = .background
        #endif
        thread.start()
        return checkpointer
    }

    /// The ticker is about to sleep and the next deadline is `gapMs` away (`nil`: none is due):
    /// starts a checkpoint when one is worth it now.
    func idle(untilNextDeadlineMs gapMs: Int64?) {
        let start = lock.withLock { () -> Bool in
            // A WAL smaller than what was copied has started again from its beginning.
            let waiting = walFrames >= checkpointed ? walFrames - checkpointed : walFrames
            let worthIt = waiting >= Self.pagesWorthCopying || walFileBytes > trimmedBytes
            guard !running, !stopped, worthIt, (gapMs ?? .max) >= Self.quietMs || waiting >= Self.mostPagesWaiting
            else { return false }
            running = true
            return true
        }
        if start { pipe.poke() }
    }

    /// Between two batches of a backlog: starts a checkpoint when one is worth it; and once the
    /// WAL holds ``pagesBeforeARestart`` pages, holds the backlog until a checkpoint has copied
    /// them all, so that the next commit writes the WAL over from its start.
    ///
    /// Checkpoints beside a backlog never catch up with it by themselves: each copies what was
    /// committed when it began, while the backlog commits more. Left alone, the WAL of a backlog
    /// of a million grows past a gigabyte: a file that large is written over from its start only
    /// once no reader holds any of it, and trimming it back takes many steps, each holding every
    /// other process's write (and any process opening the store) while it cuts.
    /// Held here, the WAL starts over as soon as no reader holds its frames (a restart waits at
    /// most ``restartWaitMs`` for them, then the backlog goes on and the next batch tries again),
    /// so it grows only while readers keep a restart from happening. The pause is one checkpoint
    /// of what the last ones left, since they run beside the backlog all along.
    func betweenBatches() async {
        idle(untilNextDeadlineMs: nil)
        let wait = lock.withLock { () -> Int? in
            guard !stopped, walFrames >= restartAfter else { return nil }
            restartNext = true
            if !running {
                running = true
                return completed + 1
            }
            // The one under way began before the last batches: the one after it copies them.
            holdAfterCurrent = true
            return completed + 2
        }
        guard let wait else { return }
        pipe.poke()
        await waitForCheckpoints(wait)
    }

    /// How many frames the WAL held after the store connection's last commit.
    var framesInWAL: Int { lock.withLock { walFrames } }

    /// How many checkpoints have run so far.
    var checkpointsRun: Int { lock.withLock { completed } }

    /// Whether a checkpoint is under way.
    var isCheckpointing: Bool { lock.withLock { running } }

    /// How many steps of trimming have cut the WAL file so far.
    var trimmingSteps: Int { lock.withLock { trims } }

    /// Returns once `count` checkpoints have run in all, or the checkpointer has stopped.
    func waitForCheckpoints(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = lock.withLock {
                if completed >= count || hasFinished { return true }
                completionWaiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Stops, waiting for a checkpoint under way, and gives the store's connection its automatic
    /// checkpoints back.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = lock.withLock {
                stopped = true
                if hasFinished { return true }
                finished = continuation
                return false
            }
            if done { continuation.resume() } else { pipe.poke() }
        }
        // The store's setting, which also replaces this checkpointer's WAL hook with SQLite's own.
        try? writer.unsafeReentrantWrite { db in try db.execute(sql: "PRAGMA wal_autocheckpoint = \(automaticPages)") }
    }

    private func run() {
        #if os(Linux)
            // On Linux the nice value of `who = 0` is the calling thread's alone: the lowest priority.
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
        #endif
        while true {
            pipe.wait(timeoutMs: -1)
            let (stop, work) = lock.withLock { (stopped, running) }
            if stop { break }
            guard work else { continue }
            defer { if lock.withLock({ running }) { pipe.poke() } }
            // A restart asked for while this one was being started waits for the next.
            let mode: Database.CheckpointMode = lock.withLock {
                guard restartNext, !holdAfterCurrent else { return .passive }
                restartNext = false
                return .restart
            }
            CrashPoints.reach(.checkpointBefore)
            // A restart that still finds readers after its wait copied what it could: the WAL
            // starts over at a later one.
            let result = try? queue.writeWithoutTransaction { db -> (walFrameCount: Int, checkpointedFrameCount: Int) in
                if mode == .restart {
                    // A restart holds every writer back while it runs: copy the WAL passively
                    // first and sync it (writers go on), so that the restart copies only what
                    // was written meanwhile and syncs that little before it lets them go.
                    _ = try db.checkpoint(.passive)
                    _ = countdown_sync_database(db.sqliteConnection)
                    return try db.checkpoint(.restart)
                }
                let copied = try db.checkpoint(.passive)
                // SQLite syncs the database file only after a checkpoint that reached the end of
                // the WAL, which one beside busy writers never does: the pages it copied would
                // wait in memory, and the next checkpoint to reach the end (a restart, which
                // holds every writer back) would write them all out at once. Sync them now.
                _ = countdown_sync_database(db.sqliteConnection)
                return copied
            }
            CrashPoints.reach(.checkpointAfter)
            let waiters = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
                running = holdAfterCurrent
                holdAfterCurrent = false
                if let result { checkpointed = result.checkpointedFrameCount }
                completed += 1
                let ready = completionWaiters.filter { $0.count <= completed }.map(\.continuation)
                completionWaiters.removeAll { $0.count <= completed }
                return ready
            }
            waiters.forEach { $0.resume() }
            // Then, once the WAL was copied to its end, a step of trimming its file. While a step
            // cut it and it is still over the size, another follows shortly (the pipe is poked):
            // the steps take turns with other writers.
            let copiedAll = result.map { $0.checkpointedFrameCount >= $0.walFrameCount } ?? false
            let trimmed = copiedAll && trimStep()
            let size = walFileSize()
            let again = lock.withLock { () -> Bool in
                walFileBytes = size
                if trimmed { trims += 1 }
                guard trimmed, size > trimmedBytes, !stopped else { return false }
                running = true
                return true
            }
            if again { usleep(Self.pauseBetweenStepsMicroseconds) }
        }
        try? queue.close()
        let (waiter, waiters) = lock.withLock {
            hasFinished = true
            // Whoever waits for a checkpoint that will not run now goes on.
            defer { completionWaiters.removeAll() }
            return (finished, completionWaiters.map(\.continuation))
        }
        waiters.forEach { $0.resume() }
        waiter?.resume()
    }

    /// The size of the `-wal` file (0 when there is none).
    private func walFileSize() -> Int64 {
        var status = stat()
        guard stat(walPath, &status) == 0 else { return 0 }
        return Int64(status.st_size)
    }

    /// One step of trimming a WAL file grown past ``trimmedWALBytes``, after a checkpoint that
    /// copied it all: returns whether the file shrank.
    ///
    /// SQLite cuts the file only in the commit of a write that starts the WAL over, to that
    /// connection's `journal_size_limit`. The store's connections have none (a commit that cut a
    /// WAL grown to hundreds of MiB would hold every writer back for as long as the kernel takes
    /// to let go of its pages); this connection makes the write, with a limit at most
    /// ``trimStepBytes`` below the file's size: it rewrites the database header's user version
    /// as it is. When readers still use the WAL, nothing starts over and nothing is cut.
    private func trimStep() -> Bool {
        let size = walFileSize()
        guard size > trimmedBytes else { return false }
        let limit = max(trimmedBytes, size - stepBytes)
        do {
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_size_limit = \(limit)")
                try db.inTransaction(.immediate) {
                    let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
                    try db.execute(sql: "PRAGMA user_version = \(version)")
                    return .commit
                }
            }
        } catch {
            return false
        }
        return walFileSize() < size
    }

    /// Turns off the store connection's automatic checkpoints and counts its WAL frames instead.
    private func takeOverCheckpoints() throws {
        let context = Unmanaged.passUnretained(self).toOpaque()
        try writer.unsafeReentrantWrite { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            guard let connection = db.sqliteConnection else { return }
            // Lives until `stop()` hands the hook back to SQLite, which the ticker awaits.
            sqlite3_wal_hook(
                connection,
                { context, _, _, frames in
                    guard let context else { return SQLITE_OK }
                    let checkpointer = Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue()
                    checkpointer.lock.withLock { checkpointer.walFrames = Int(frames) }
                    return SQLITE_OK
                }, context)
        }
    }
}
