@_spi(Testing) import CountdownStoreSQLite
import CountdownStore
import CSQLiteTestVFS
import Foundation
import GRDB

/// Stops the process dead (SIGKILL to itself: no clean-up, no flush, no close).
func die() -> Never {
    kill(getpid(), SIGKILL)
    while true { pause() }
}

/// Where the crash-point script stops: a crash point's name, its `@N`-th occurrence, and for the
/// `*.during-N` points the database write of the checkpoint at which the VFS kills the process.
final class Trap: @unchecked Sendable {
    // Safe: `armed` and `seen` are reached only under `lock`; the rest is fixed at init.
    private let lock = NSLock()
    private var armed = false
    private var seen = 0
    let point: CrashPoints.Point
    let occurrence: Int
    /// For `checkpoint.during-N` and `close.during-N`: the database write that kills.
    let duringWrite: Int?
    let name: String

    init?(_ name: String) {
        self.name = name
        let parts = name.split(separator: "@", maxSplits: 1).map(String.init)
        guard let base = parts.first else { return nil }
        occurrence = parts.count > 1 ? Int(parts[1]) ?? 1 : 1
        if let range = base.range(of: ".during-") {
            let prefix = base[..<range.lowerBound]
            guard prefix == "close" || prefix == "checkpoint", let write = Int(base[range.upperBound...]) else { return nil }
            duringWrite = write
            point = prefix == "close" ? .closeBeforeCheckpoint : .checkpointBefore
        } else {
            guard let point = CrashPoints.Point(rawValue: base) else { return nil }
            self.point = point
            duringWrite = nil
        }
    }

    func arm() { lock.withLock { armed = true } }
    func disarm() { lock.withLock { armed = false } }

    func reached(_ reached: CrashPoints.Point) {
        let fire = lock.withLock { () -> Bool in
            guard armed, reached == point else { return false }
            seen += 1
            return seen == occurrence
        }
        guard fire else { return }
        if let duringWrite {
            say("armed \(name)")
            countdown_testvfs_kill_at_db_write(duringWrite)
        } else {
            say("dying at \(name)")
            die()
        }
    }
}

/// A fixed script of operations for the crash-point suite: see the usage at the top of `Helper.swift`.
struct CrashPointScript {
    let path: String
    let point: String
    let operation: String

    /// An operation under test: the SQL whose answer it changes, and the operation itself.
    struct Operation {
        var probe: String
        /// Runs the operation, calling `arm` right before the call whose commit is under test.
        var run: @Sendable (_ store: CountdownStore, _ arm: @Sendable () -> Void) async throws -> Void
    }

    static func item(_ key: String) -> String {
        "SELECT coalesce((SELECT state || ' ' || generation FROM countdowns WHERE key = '\(key)'), 'absent')"
    }

    static let operations: [String: Operation] = [
        "start": Operation(probe: item("new")) { store, arm in arm(); try await store.start("new", duration: .seconds(3600)) },
        "replace": Operation(probe: item("k-10")) { store, arm in arm(); try await store.start("k-10", duration: .seconds(7200), whenActive: .replace) },
        "stopwatch": Operation(probe: item("watch")) { store, arm in arm(); try await store.startStopwatch("watch") },
        "pause": Operation(probe: item("k-11")) { store, arm in arm(); try await store.pause("k-11") },
        "resume": Operation(probe: item("k-1")) { store, arm in arm(); try await store.resume("k-1") },
        "extend": Operation(probe: item("k-12")) { store, arm in arm(); try await store.extend("k-12", by: .seconds(60)) },
        "shorten": Operation(probe: item("k-13")) { store, arm in arm(); try await store.shorten("k-13", by: .seconds(60)) },
        "shorten-past-zero": Operation(probe: item("k-14")) { store, arm in arm(); try await store.shorten("k-14", by: .seconds(7200)) },
        "restart": Operation(probe: item("k-15")) { store, arm in arm(); try await store.restart("k-15") },
        "cancel": Operation(probe: item("k-16")) { store, arm in arm(); try await store.cancel("k-16") },
        "remove": Operation(probe: item("k-17")) { store, arm in arm(); _ = try await store.remove("k-17") },
        "expire-due": Operation(probe: item("due")) { store, arm in arm(); _ = try await store.expireDue() },
        "prune": Operation(probe: "SELECT count(*) FROM countdowns WHERE key IN ('k-2', 'k-3')") {
            store, arm in
            arm()
            _ = try await store.prune(olderThan: .milliseconds(1))
        },
        "acknowledge": Operation(probe: "SELECT coalesce((SELECT last_event_id FROM countdown_consumers WHERE name = 'c'), -1)") { store, arm in
            let consumer = try await store.consumer("c")
            for try await event in try await consumer.events(.all) {
                arm()
                try await consumer.acknowledge(event)
                break
            }
        },
        "heartbeat": Operation(probe: "SELECT coalesce((SELECT holder FROM countdown_lease WHERE id = 1), 'none')") {
            store, arm in
            arm()
            try await store.heartbeat()
        },
        "calibrate": Operation(probe: "SELECT calibration_offset_ms FROM countdown_clock") {
            store, arm in
            arm()
            try await store.calibrate(serverTime: Date().addingTimeInterval(3600))
        },
        "suspend": Operation(probe: "SELECT suspended FROM countdown_clock") { store, arm in arm(); try await store.enterBackground() },
    ]

    func ack(_ store: CountdownStore, _ key: String) async throws {
        if let item = try await store.countdown(key) {
            say("ack \(key) \(item.state.rawValue) \(item.generation)")
        } else {
            say("ack \(key) absent")
        }
    }

    func run() async throws {
        guard let trap = Trap(point) else {
            FileHandle.standardError.write(Data("unknown crash point \(point)\n".utf8))
            exit(64)
        }
        guard countdown_testvfs_register() == 0 else {
            FileHandle.standardError.write(Data("cannot register the test VFS\n".utf8))
            exit(70)
        }
        CrashPoints.install { trap.reached($0) }
        let configuration = CountdownStore.Configuration(heartbeatInterval: .milliseconds(100), leaseDuration: .milliseconds(300))
        if operation == "open" { trap.arm() }
        let store = try CountdownStore(path: path, configuration: configuration)
        trap.disarm()
        if operation == "open" { missed() }

        // What every crash must keep: acknowledged items in every state, events, a consumer.
        _ = try await store.consumer("c")
        let payload = CountdownPayload.text(String(repeating: "p", count: 2048))
        for index in 0..<300 {
            try await store.start("k-\(index)", duration: .seconds(3600), payload: payload)
            try await ack(store, "k-\(index)")
        }
        try await store.pause("k-1")
        try await store.cancel("k-2")
        try await store.shorten("k-3", by: .seconds(7200))
        try await store.startStopwatch("s-0")
        try await store.start("due", duration: .milliseconds(1))
        for key in ["k-1", "k-2", "k-3", "s-0", "due"] { try await ack(store, key) }
        try await Task.sleep(for: .milliseconds(10))  // "due" comes due; k-2 and k-3 finished over 1 ms ago

        switch operation {
        case "checkpoint":
            // The ticker's WAL checkpointer copies pages back once 1,000 wait and no expiry is near.
            let ticker = CountdownTicker(store: store)
            Task { try await ticker.run() }
            trap.arm()
            for index in 0..<20_000 {
                try await store.start("c-\(index)", duration: .seconds(3600), payload: payload)
                try await ack(store, "c-\(index)")
                // The checkpointer's thread has the lowest priority: on a machine with one core
                // free, a writer that never sleeps would leave it no time at all.
                if index % 100 == 99 { try await Task.sleep(for: .milliseconds(1)) }
            }
        case "close":
            trap.arm()
            try await store.close()
        default:
            guard let operation = Self.operations[operation] else {
                FileHandle.standardError.write(Data("unknown operation \(self.operation)\n".utf8))
                exit(64)
            }
            let before = try await store.sqliteDatabase!.read { db in try String.fetchOne(db, sql: "SELECT CAST((\(operation.probe)) AS TEXT)") } ?? "NULL"
            say("before \(before)\t\(operation.probe)")
            try await operation.run(store) { trap.arm() }
        }
        missed()
    }

    func missed() -> Never {
        say("missed \(point)")
        exit(3)
    }
}
