import CountdownStore
import Foundation

extension Benchmarks {
    // MARK: - Expiry lateness

    /// `latenessActive` running countdowns, of which `latenessPerSecond` come due every second
    /// for `latenessSeconds` seconds (evenly spread), the ticker running on the system clock. They
    /// are started 8 s before the first comes due, so that the WAL checkpoint of starting them
    /// all is over when the burst begins.
    /// Lateness is measured where the host sees it: when the expiry arrives on `store.events`,
    /// against the boot-clock instant of its deadline. Raw: `Task.sleep(until:)` on the same schedule.
    func lateness() async throws -> [Figure] {
        let dueCount = sizes.latenessPerSecond * sizes.latenessSeconds
        let spacingMicros = 1_000_000 / sizes.latenessPerSecond
        let leadMs: Int64 = 8_000
        let file = try await emptyStore("lateness.sqlite")
        let store = try CountdownStore(path: file)
        var requests = (0..<dueCount).map { index in
            CountdownRequest.countdown(
                "due-\(index)", duration: .milliseconds(leadMs + Int64(index * spacingMicros / 1000)), group: "due")
        }
        requests += (dueCount..<sizes.latenessActive).map { index in
            CountdownRequest.countdown("later-\(index)", duration: .milliseconds(2 * Self.hour + Int64(index)), group: "g\(index % 50)")
        }
        try await store.start(requests)
        let events = try await store.events(.expiries)
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        let probe = WakeProbe()

        var arrivals: [(bootNs: Int64, deadline: Date, fired: Date)] = []
        arrivals.reserveCapacity(dueCount)
        for try await event in events {
            arrivals.append((bootNanoseconds(), event.deadlineAt ?? .distantFuture, event.firedAt ?? .distantPast))
            if arrivals.count == dueCount { break }
        }
        let machine = probe.stop()
        running.cancel()
        _ = try? await running.value
        // W and the boot clock advance together within a boot: their difference at the last
        // checkpoint maps each deadline (a W instant) to the boot instant it came due.
        let raw = try RawDatabase(path: file)
        let clock = try raw.prepare("SELECT heartbeat_at_ms - heartbeat_boot_ms FROM countdown_clock")
        _ = try clock.step()
        let wallMinusBoot = clock.int(0)
        try await store.close()

        var late: [Double] = []
        var early = 0
        for arrival in arrivals {
            let deadlineMs = Int64((arrival.deadline.timeIntervalSince1970 * 1000).rounded())
            let lateNs = arrival.bootNs - (deadlineMs - wallMinusBoot) * 1_000_000
            if lateNs < 0 || arrival.fired < arrival.deadline { early += 1 }
            late.append(Double(lateNs) / 1e6)
        }
        late.sort()
        // Where the lateness arises: at firing (the recorded lateness, whole ms) or in delivery.
        let firing = arrivals.map { Double(Int64(($0.fired.timeIntervalSince1970 - $0.deadline.timeIntervalSince1970) * 1000)) }.sorted()
        let delivery = arrivals.map { arrival in
            Double(arrival.bootNs - (Int64((arrival.fired.timeIntervalSince1970 * 1000).rounded()) - wallMinusBoot) * 1_000_000) / 1e6
        }.sorted()
        log(String(
            format: "  lateness at firing p50 %.0f p99 %.0f max %.0f ms; firing to delivery p50 %.2f p99 %.2f max %.2f ms",
            percentile(firing, 0.5), percentile(firing, 0.99), firing.last ?? 0,
            percentile(delivery, 0.5), percentile(delivery, 0.99), delivery.last ?? 0))
        log("  the machine meanwhile: \(machine)")
        let rawProbe = WakeProbe()
        let rawLate = try await sleepLateness(count: dueCount, spacingMicros: spacingMicros)
        log("  the machine during the raw sleeps: \(rawProbe.stop())")
        let n = sizes.latenessActive
        return [
            Figure(name: "expiry lateness p50", n: n, ours: percentile(late, 0.5), raw: percentile(rawLate, 0.5), unit: "ms", target: .atMost(0.5)),
            Figure(name: "expiry lateness p99", n: n, ours: percentile(late, 0.99), raw: percentile(rawLate, 0.99), unit: "ms", target: .atMost(2)),
            Figure(name: "expiry lateness max", n: n, ours: late.last ?? .nan, raw: rawLate.last, unit: "ms", target: .atMost(10)),
            Figure(name: "expiries early", n: dueCount, ours: Double(early), raw: nil, unit: "count", target: .atMost(0)),
        ]
    }

    /// Wake-up lateness of `Task.sleep(until:)` on the continuous clock, one deadline every
    /// `spacingMicros`, in milliseconds, sorted.
    private func sleepLateness(count: Int, spacingMicros: Int) async throws -> [Double] {
        let clock = ContinuousClock()
        let start = clock.now + .milliseconds(200)
        var late: [Double] = []
        late.reserveCapacity(count)
        for index in 0..<count {
            let deadline = start + .microseconds(index * spacingMicros)
            try await Task.sleep(until: deadline, clock: clock)
            late.append((clock.now - deadline).seconds * 1e3)
        }
        return late.sorted()
    }

    // MARK: - Display ticks

    /// A ticker on a virtual clock with `tickKeys` subscribed keys; each tick is the work from
    /// moving the clock one second to the snapshot in hand and the ticker idle again (heartbeat
    /// included). Raw: reading the same rows by key and computing and sorting their remaining time.
    func displayTicks() async throws -> Figure {
        let clock = VirtualClock()
        let file = try await emptyStore("ticks.sqlite")
        let store = try CountdownStore(path: file, configuration: .init(clock: clock))
        let keys = (0..<sizes.tickKeys).map { "tick-\($0)" }
        try await store.start(keys.enumerated().map { .countdown($1, duration: .milliseconds(Self.hour + Int64($0) * 100)) })
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        var snapshots = try ticker.ticks(keys: keys, every: .seconds(1)).makeAsyncIterator()
        await ticker.waitUntilIdle()
        clock.advance(by: .seconds(1))
        guard let first = await snapshots.next(), first.items.count == keys.count else {
            throw BenchmarkError("the first tick did not carry every key")
        }
        var perTick: [Double] = []
        for _ in 0..<sizes.ticks {
            await ticker.waitUntilIdle()
            let seconds = await timed {
                clock.advance(by: .seconds(1))
                let snapshot = await snapshots.next()
                precondition(snapshot?.items.count == keys.count)
                await ticker.waitUntilIdle()
            }
            perTick.append(seconds * 1e3)
        }
        running.cancel()
        _ = try? await running.value
        let now = try await store.now()
        try await store.close()

        let db = try RawDatabase(path: file)
        let chunkSize = 500
        let chunk = try db.prepare(
            "SELECT \(Raw.itemColumns) FROM countdowns WHERE key IN (\(Array(repeating: "?", count: chunkSize).joined(separator: ",")))")
        var rawPerTick: [Double] = []
        for _ in 0..<sizes.ticks {
            rawPerTick.append(
                try await timed {
                    let count = try Raw.tickRefresh(db, keys: keys, timeline: now.active + now.gap, chunk: chunk, chunkSize: chunkSize)
                    precondition(count == keys.count)
                } * 1e3)
        }
        return Figure(
            name: "display tick, subscribed keys", n: keys.count, ours: median(perTick), raw: median(rawPerTick),
            unit: "ms/tick", target: .atMost(5))
    }

    // MARK: - Idle ticker and memory, in a fresh process

    /// Runs this executable again as a probe on the large store: the ticker alone for
    /// `idleSeconds`, measuring its CPU time and resident memory; raw: a bare connection doing a
    /// heartbeat UPDATE and a next-deadline lookup every second.
    func idle(_ file: String) async throws -> [Figure] {
        let ours = try runProbe(file: file, raw: false)
        let raw = try runProbe(file: file, raw: true)
        return [
            Figure(
                name: "idle ticker CPU", n: sizes.stored, ours: ours.cpuPercent, raw: raw.cpuPercent,
                unit: "% of a core", target: .atMost(1)),
            Figure(
                name: "resident memory, ticker running", n: sizes.stored, ours: ours.peakMiB, raw: raw.peakMiB, unit: "MiB",
                target: .atMost(64)),
        ]
    }

    struct ProbeResult: Codable {
        var cpuPercent: Double
        var peakMiB: Double
        var residentMiB: Double
    }

    private func runProbe(file: String, raw: Bool) throws -> ProbeResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        if !FileManager.default.isExecutableFile(atPath: process.executableURL!.path) {
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        }
        process.arguments = ["--probe", file, "--seconds", "\(sizes.idleSeconds)"] + (raw ? ["--raw"] : [])
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchmarkError("the probe exited with status \(process.terminationStatus)")
        }
        return try JSONDecoder().decode(ProbeResult.self, from: data)
    }
}

/// The probe process: opens the store at `file`, runs what is measured for `seconds`, and
/// prints a ``Benchmarks/ProbeResult`` as JSON.
func probe(file: String, seconds: Int, raw: Bool) async throws {
    let warmUp: Duration = .seconds(1)
    var stop: () async throws -> Void
    if raw {
        let task = Task.detached {
            let db = try RawDatabase(path: file)
            let heartbeat = try db.prepare("UPDATE countdown_clock SET heartbeat_at_ms = ?1, heartbeat_boot_ms = ?2 WHERE id = 1")
            let lookup = try Raw.NextDeadline(db)
            while !Task.isCancelled {
                try heartbeat.bind([.int(Date().millisecondsSince1970), .int(bootNanoseconds() / 1_000_000)]).run()
                _ = try lookup(wallTimeline: 0, activeTimeline: 0)
                try await Task.sleep(for: .seconds(1))
            }
        }
        stop = {
            task.cancel()
            _ = try? await task.value
        }
    } else {
        let store = try CountdownStore(path: file)
        let ticker = CountdownTicker(store: store)
        let task = Task { try await ticker.run() }
        stop = {
            task.cancel()
            try await task.value
            try await store.close()
        }
    }
    try await Task.sleep(for: warmUp)
    let cpuBefore = processCPUSeconds()
    let start = ContinuousClock.now
    try await Task.sleep(for: .seconds(seconds))
    let cpu = processCPUSeconds() - cpuBefore
    let wall = (ContinuousClock.now - start).seconds
    let memory = residentMemoryKiB()
    try await stop()
    let result = Benchmarks.ProbeResult(
        cpuPercent: cpu / wall * 100, peakMiB: Double(memory.peak) / 1024, residentMiB: Double(memory.current) / 1024)
    FileHandle.standardOutput.write(try JSONEncoder().encode(result))
}

extension Date {
    var millisecondsSince1970: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }
}
