@_spi(Testing) import CountdownStoreSQLite
import CountdownStore
import CountdownStoreCore
import CSQLiteTestVFS
import Foundation

// A process for the reliability suites to start, stop and kill. Every line it prints is
// written unbuffered, so what the suite reads is what happened before a SIGKILL.
//
//   crash DB SEED       random operations forever, with a ticker and a named consumer:
//                       "begin N KEY", then "ack N KEY STATE GEN DURATION KIND PAYLOAD" once committed
//                       ("ack N KEY refused CODE" when refused, "ack N KEY removed"),
//                       "delivered EVENT_ID KEY GEN" for each expiry the consumer gets, and
//                       "checkpoint begin" / "checkpoint end" around each WAL checkpoint
//   groupcrash DB TAG   16 tasks starting countdowns TAG-tTASK-INDEX one call each (group commit),
//                       pausing every third: "ack KEY" / "paused KEY" once each call returned,
//                       "largest N" (the largest group so far) every 100 starts
//   drain DB            expire what is due and deliver every pending expiry, then exit
//   fill DB             start countdowns with 4 KiB payloads until a write fails:
//                       "committed N" after each, then "error CODE message"
//   write DB PREFIX N   start N countdowns due within seconds, pausing and resuming some;
//                       exit status 1 if any operation failed
//   crashpoint DB POINT OP
//                       a fixed script of operations, acknowledged as "ack KEY STATE GEN" (or
//                       "ack KEY absent"), that sends itself SIGKILL at crash point POINT (a
//                       CrashPoints name, "checkpoint.during-N" or "close.during-N": at the N-th
//                       database write of that checkpoint) reached while doing OP; prints
//                       "expect KEY STATE GEN" before OP, "dying at POINT" before the kill, and
//                       "missed POINT" (exit 3) when the script ended without reaching it
//   powerloss DB SEED normal|full
//                       through a VFS that, at a seeded write or sync, forgets every write not
//                       yet synced (tearing that one) and sends itself SIGKILL: opens the store
//                       and starts p-0, p-1, … printing "ack I" after each; "done OPS" (exit 0)
//                       when the loss never came
//
//   fatal DB            dies of a fatal error at once (the harness's own test)
//
// Any error ends the process with exit status 70 and the error on stderr: never a fatal error,
// whose backtracer would outlive the process.

/// SplitMix64: a small, seedable generator, so a failing seed can be replayed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func describe(_ item: Countdown) -> String {
    let payload: String
    switch item.payload {
    case .text(let text)?: payload = text
    case .bytes?: payload = "bytes"
    case nil: payload = "-"
    }
    let duration = item.duration.map { String($0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000) } ?? "-"
    return "\(item.state.rawValue) \(item.generation) \(duration) \(item.kind.rawValue) \(payload)"
}

/// Prints and acknowledges every expiry delivered to the consumer "torture".
func consume(_ store: CountdownStore) async throws {
    let consumer = try await store.consumer("torture")
    for try await event in try await consumer.events(.expiries) {
        say("delivered \(event.id) \(event.key ?? "-") \(event.generation ?? 0)")
        try await consumer.acknowledge(event)
    }
}

@main
enum Helper {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard arguments.count >= 2 else {
            FileHandle.standardError.write(Data("usage: CountdownTortureHelper crash|drain|fill|write|crashpoint|powerloss DB ...\n".utf8))
            exit(64)
        }
        let (mode, path) = (arguments[0], arguments[1])
        do {
            switch mode {
            case "crash": try await crash(path, seed: UInt64(arguments.count > 2 ? arguments[2] : "1") ?? 1)
            case "groupcrash": try await groupCrash(path, tag: arguments.count > 2 ? arguments[2] : "c")
            case "drain": try await drain(path)
            case "fill": try await fill(path)
            case "hostcrash" where arguments.count == 3: try await HostTransactionWorkload.run(path, tag: arguments[2], drain: false)
            case "hostdrain": try await HostTransactionWorkload.run(path, tag: "", drain: true)
            case "write": try await write(path, prefix: arguments[2], count: Int(arguments[3]) ?? 100)
            case "crashpoint" where arguments.count == 4:
                try await CrashPointScript(path: path, point: arguments[2], operation: arguments[3]).run()
            case "fatal": fatalError("a deliberate fatal error, for the harness's own test")
            case "powerloss" where arguments.count == 4:
                try await powerLoss(path, seed: UInt64(arguments[2]) ?? 1, durability: CountdownStore.Durability(rawValue: arguments[3]) ?? .normal)
            default:
                FileHandle.standardError.write(Data("unknown mode or arguments: \(arguments)\n".utf8))
                exit(64)
            }
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            exit(70)
        }
    }

    static func crash(_ path: String, seed: UInt64) async throws {
        var rng = SplitMix(state: seed)
        // A short claim timeout: what a killed worker's reader had claimed goes to the next worker soon.
        let configuration = CountdownStore.Configuration(
            heartbeatInterval: .milliseconds(100), leaseDuration: .milliseconds(300), claimTimeout: .seconds(1))
        // The suite counts the WAL checkpoints that ran, and the kills that cut one short.
        CrashPoints.install { point in
            if point == .checkpointBefore { say("checkpoint begin") }
            if point == .checkpointAfter { say("checkpoint end") }
        }
        let store = try CountdownStore(path: path, configuration: configuration)
        let ticker = CountdownTicker(store: store)
        Task { try await ticker.run() }
        Task { try await consume(store) }
        let keys = (0..<24).map { "k\($0)" }
        var n = 0
        while true {
            n += 1
            let key = keys.randomElement(using: &rng)!
            let short = Int.random(in: 0..<4, using: &rng) == 0
            let duration = Duration.milliseconds(
                short ? Int64.random(in: 30...600, using: &rng) : Int64.random(in: 20_000...300_000, using: &rng))
            let choice = Int.random(in: 0..<12, using: &rng)
            let amount = Duration.milliseconds(Int64.random(in: 1...60_000, using: &rng))
            say("begin \(n) \(key)")
            say("ack \(n) \(key) " + (await operate(store, choice: choice, key: key, duration: duration, amount: amount, payload: .text("p\(n)"))))
            if Int.random(in: 0..<8, using: &rng) == 0 {
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...20, using: &rng)))
            }
        }
    }

    /// Applies one operation; describes its outcome as an ack line's tail.
    static func operate(
        _ store: CountdownStore, choice: Int, key: String, duration: Duration, amount: Duration, payload: CountdownPayload
    ) async -> String {
        do {
            let item: Countdown
            switch choice {
            case 0, 1, 2: item = try await store.start(key, duration: duration, payload: payload, whenActive: .replace)
            case 3: item = try await store.start(key, duration: duration, policy: .active, payload: payload)
            case 4: item = try await store.startStopwatch(key, payload: payload)
            case 5: item = try await store.pause(key)
            case 6: item = try await store.resume(key)
            case 7: item = try await store.cancel(key)
            case 8: item = try await store.restart(key)
            case 9: item = try await store.extend(key, by: amount)
            case 10: item = try await store.shorten(key, by: amount / 2)
            default:
                _ = try await store.remove(key)
                return "removed"
            }
            return describe(item)
        } catch {
            return "refused \(error.code.name)"
        }
    }

    static func drain(_ path: String) async throws {
        let store = try CountdownStore(path: path)
        // Free the lease and the consumer claims of a killed worker at once, then expire and
        // deliver everything due.
        try await store.sqliteDatabase!.write { db in
            try db.execute(sql: "UPDATE countdown_lease SET holder = NULL, expires_at_ms = 0")
            try db.execute(sql: "UPDATE countdown_consumer_claims SET claimed_until_ms = 0")
        }
        try await store.heartbeat()
        // Deliver what is left to the consumer, as the workers did (readers of one consumer
        // share one filter: a range a worker found no expiry in is handled for every reader),
        // until its cursor has passed the last event. The delivery's own writes record what came
        // due meanwhile (short countdowns keep coming due): once a round adds no event, every
        // expiry recorded is delivered. Those that closing the store records come after the
        // last event it prints.
        let consumer = try await store.consumer("torture")
        var last: Int64 = 0
        while true {
            while try await store.expireDue().count > 0 {}
            let through = try await store.recentEvents(kinds: nil, limit: 1).first?.id ?? 0
            if through == last { break }
            last = through
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await consume(store) }
                group.addTask {
                    while try await consumer.acknowledgedThrough() < through { try await Task.sleep(for: .milliseconds(20)) }
                }
                // The cursor got there (or the reader failed, which this rethrows): the reader stops.
                try await group.next()
                group.cancelAll()
                try await group.waitForAll()
            }
        }
        say("drained \(last)")
        try await store.close()
    }

    static func fill(_ path: String) async throws {
        let store = try CountdownStore(path: path)
        let payload = CountdownPayload.text(String(repeating: "x", count: 4096))
        var n = 0
        while true {
            do {
                try await store.start("fill-\(n)", duration: .seconds(3600), payload: payload)
                say("committed \(n)")
                n += 1
            } catch {
                say("error \(error.code.name) \(error.message)")
                exit(3)
            }
        }
    }

    /// 16 tasks start countdowns one call each (keys `TAG-tTASK-INDEX`), so that the store's
    /// group commit takes them into shared transactions, and pause every third; each
    /// acknowledgement is printed once the call returned. Runs until killed; every 100 starts it
    /// prints the largest group committed so far.
    static func groupCrash(_ path: String, tag: String) async throws {
        let store = try CountdownStore(path: path)
        let acknowledged = Locked(0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<16 {
                group.addTask {
                    for index in 0... {
                        let key = "\(tag)-t\(task)-\(index)"
                        try await store.start(key, duration: .seconds(3600), group: tag, payload: .text("p\(index)"))
                        say("ack \(key)")
                        if index % 3 == 0 {
                            try await store.pause(key)
                            say("paused \(key)")
                        }
                        let count = acknowledged.withLock { count -> Int in
                            count += 1
                            return count
                        }
                        if count % 100 == 0 { say("largest \(store.groups.stats.largest)") }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    static func write(_ path: String, prefix: String, count: Int) async throws {
        let store = try CountdownStore(path: path)
        var rng = SplitMix(state: UInt64(prefix.utf8.reduce(7) { $0 &* 31 &+ Int($1) }.magnitude))
        var failed = false
        for index in 0..<count {
            let key = "\(prefix)-\(index)"
            do {
                try await store.start(key, duration: .milliseconds(Int64.random(in: 200...3000, using: &rng)), group: prefix)
                if index % 7 == 0 {
                    try await store.pause(key)
                    try await store.resume(key)
                }
            } catch {
                FileHandle.standardError.write(Data("error \(key): \(error)\n".utf8))
                failed = true
            }
        }
        try await store.close()
        exit(failed ? 1 : 0)
    }
}

// MARK: - Simulated power loss

extension Helper {
    static func powerLoss(_ path: String, seed: UInt64, durability: CountdownStore.Durability) async throws {
        var rng = SplitMix(state: seed)
        guard countdown_testvfs_register() == 0 else {
            FileHandle.standardError.write(Data("cannot register the test VFS\n".utf8))
            exit(70)
        }
        // About 510 writes and syncs make the whole run under NORMAL, about 970 under FULL (each
        // commit's WAL frames reach the file in one write): most trials lose power somewhere in
        // it, from creating the file to the last start.
        let operations = durability == .full ? 1_050 : 560
        countdown_testvfs_power_loss_after(Int.random(in: 1...operations, using: &rng), seed)
        let store = try CountdownStore(path: path, configuration: .init(durability: durability))
        for index in 0..<400 {
            try await store.start("p-\(index)", duration: .seconds(3600), payload: .text(String(repeating: "x", count: Int.random(in: 0...600, using: &rng))))
            say("ack \(index)")
        }
        try await store.close()
        say("done \(countdown_testvfs_operations())")
    }
}
