import ArgumentParser
import CountdownStore
import Foundation
import Logging

extension CountdownCommand {
    /// `countdown run`: the ticker in the foreground, one JSON line per expiry.
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the ticker in the foreground and print one JSON line per expiry.",
            discussion: """
                With --consumer, resumes from that consumer's cursor, sharing its expiries with other runs of \
                the same consumer (each expiry goes to one of them): a line counts as acknowledged once \
                written (with --exec, once CMD exits 0; CMD gets COUNTDOWN_KEY, COUNTDOWN_GROUP, \
                COUNTDOWN_PAYLOAD, COUNTDOWN_LATE_MS, COUNTDOWN_GENERATION and COUNTDOWN_DEADLINE_AT in its \
                environment, and is retried until it succeeds). SIGINT and SIGTERM stop it gracefully.
                """)

        @OptionGroup var global: GlobalOptions
        @Option(help: "Only expiries of this group.") var group: String?
        @Option(help: "A named consumer whose cursor persists across runs.") var consumer: String?
        @Option(help: "A shell command to run for each expiry.") var exec: String?
        @Option(
            help: ArgumentHelp(
                "With --consumer: how long expiries handed to this run stay its own when it dies before acknowledging "
                    + "them, before another run of the consumer gets them (default 30s).",
                valueName: "duration"))
        var claimTimeout: String?
        @Option(
            help: ArgumentHelp(
                "How long expired and cancelled countdowns are kept after they end, or 'forever' (default 7d).",
                valueName: "duration|forever"))
        var retainEnded: String?
        @Option(
            help: ArgumentHelp(
                "How long events are kept once every named consumer has passed them, or 'forever' (default 7d).",
                valueName: "duration|forever"))
        var retainEvents: String?

        /// `text` as a retention period: a duration, or `nil` for "forever"; `fallback` when not given.
        static func retention(_ text: String?, option: String, fallback: Duration?) throws(CountdownError) -> Duration?
        {
            guard let text else { return fallback }
            if text.lowercased() == "forever" { return nil }
            do {
                return try DurationText.parse(text)
            } catch {
                throw CountdownError(
                    .invalidDuration, "invalid --\(option) \(quoted(text)): give a duration like 7d, or forever")
            }
        }

        func run() async throws {
            let timeout = try claimTimeout.map { text throws(CountdownError) -> Duration in
                let duration = try DurationText.parse(text)
                guard duration > .zero else {
                    throw CountdownError(.invalidArgument, "invalid claim timeout \"\(text)\": must be more than zero")
                }
                return duration
            }
            var retention = CountdownStore.Retention()
            retention.endedItems = try Self.retention(
                retainEnded, option: "retain-ended", fallback: retention.endedItems)
            retention.events = try Self.retention(retainEvents, option: "retain-events", fallback: retention.events)
            let store = try await global.openStore(claimTimeout: timeout, retention: retention)
            // The stop a signal begins: the acknowledgement or command under way, and closing,
            // wait for the database until its deadline, not longer.
            let stopping = StopDeadline(bound: store.stopBound)
            let output = ExpiryOutput(store: store, group: group, consumer: consumer, command: exec, stopping: stopping)
            let ticker = CountdownTicker(store: store)
            let notifier = SystemdNotifier.shared
            // The ticker and the printer side by side (and, under systemd, what it is told);
            // SIGINT or SIGTERM cancels them, the ticker then writes its final heartbeat. (No
            // timers of its own: see `BootSleeper`.)
            let work = Task {
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    tasks.addTask { try await ticker.run() }
                    tasks.addTask { try await output.run() }
                    if notifier.isEnabled {
                        tasks.addTask { try await SystemdSupervision(notifier: notifier, ticker: ticker).run() }
                    }
                    defer { tasks.cancelAll() }
                    _ = try await tasks.next()
                }
            }
            // Each of them gives up on the database at the stop's deadline; this wait, a moment
            // later, so that the process ends whatever happens.
            let outer = StopDeadline(bound: store.stopBound + .seconds(1))
            let waiting = Task { await BoundedWait.result(of: work, by: outer, passingCancellation: true) }
            let stop = SignalStop {
                notifier.notifyStopping()
                stopping.start()
                waiting.cancel()
            }
            defer { withExtendedLifetime(stop) {} }
            switch await waiting.value {
            case .success?:
                break
            case .failure(let error)?:
                // After a stop, what the database could not be reached for was logged already.
                let stopped =
                    stopping.hasStarted
                    && (error is CancellationError || (error as? CountdownError)?.isTransient == true)
                if !stopped && !(error is CancellationError) {
                    try? await store.close(by: stopping)
                    throw error
                }
            case nil:
                toolLogger.warning(
                    "the ticker and the expiry output did not stop within the stop's bound; exiting without them",
                    metadata: ["bound": "\(outer.bound)"])
            }
            try await store.close(by: stopping)
        }
    }
}

/// Writes each expiry as a JSON line, runs the command for it, and acknowledges it.
struct ExpiryOutput {
    let store: CountdownStore
    let group: String?
    let consumer: String?
    let command: String?
    /// The stop a signal began: once it has, the command and the acknowledgement under way are
    /// waited for until its deadline, not longer.
    let stopping: StopDeadline

    func run() async throws {
        let filter = EventFilter(kinds: [.expired], group: group)
        let events: CountdownEvents
        var named: EventConsumer?
        if let consumer {
            named = try await store.consumer(consumer)
            events = try await named!.events(filter)
        } else {
            events = try await store.events(filter)
        }
        guard let named, command == nil else {
            for try await event in events {
                FileHandle.standardOutput.write(Data((Self.line(for: event) + "\n").utf8))
                if let command {
                    guard try await runUntilSuccess(command, for: event) else { return }
                }
                if let named {
                    guard try await acknowledge(event, of: named) else { return }
                }
            }
            return
        }
        // Written means handled: the lines of a batch read go out together, and one
        // acknowledgement covers the batch once it is written, before the next batch is asked
        // for (a reader that asks with events unacknowledged is given them again).
        var buffer = Data()
        var unacknowledged: CountdownEvent?
        var iterator = events.makeAsyncIterator()
        var lastRead: CountdownEvent?
        while let event = try await iterator.next() {
            buffer.append(contentsOf: (Self.line(for: event) + "\n").utf8)
            lastRead = event
            let batchEnds = !iterator.hasBufferedEvents
            guard batchEnds || buffer.count >= 65_536 else { continue }
            FileHandle.standardOutput.write(buffer)
            buffer.removeAll(keepingCapacity: true)
            unacknowledged = event
            if batchEnds {
                unacknowledged = nil
                guard try await acknowledge(event, of: named) else { return }
            }
        }
        // Stopped in the middle of a batch: what was written is acknowledged.
        if !buffer.isEmpty {
            FileHandle.standardOutput.write(buffer)
            unacknowledged = lastRead
        }
        if let last = unacknowledged { _ = try await acknowledge(last, of: named) }
    }

    /// Acknowledges `event`: written means handled, so the acknowledgement completes even if a
    /// stop arrives while it is written, unless the database does not answer by the stop's
    /// deadline. A lost connection to the database (a server restarting) is retried, 0.1 s
    /// later, then up to 1 s apart, until it succeeds or a stop arrives; returns false after a
    /// stop that left it unwritten (the event is then delivered again), with a warning.
    func acknowledge(_ event: CountdownEvent, of consumer: EventConsumer) async throws -> Bool {
        var retry = ConnectionRetry()
        while true {
            let writing = Task { try await consumer.acknowledge(event) }
            switch await BoundedWait.result(of: writing, by: stopping, passingCancellation: false) {
            case .success(let recorded)?:
                retry.succeeded(toolLogger)
                if !recorded {
                    // Fenced: this reader lost its claim (it stalled past the claim timeout) and
                    // another reader took the events over, which delivers them too.
                    toolLogger.warning(
                        "another reader took this expiry over before it was acknowledged; it delivers it too",
                        metadata: ["key": "\(event.key ?? "")", "event_id": "\(event.id)"])
                }
                return true
            case nil:
                warnUnacknowledged(event, why: "no answer from the database within \(stopping.bound)")
                return false
            case .failure(let failure)?:
                guard let error = failure as? CountdownError, error.isTransient else { throw failure }
                if Task.isCancelled {
                    warnUnacknowledged(event, why: "the database cannot be reached", error: error)
                    return false
                }
                let delayMs = retry.failed(error, toolLogger)
                do {
                    let clock = SystemClock()
                    try await clock.sleep(untilBootMilliseconds: clock.bootMilliseconds + delayMs)
                } catch {
                    warnUnacknowledged(event, why: "the database cannot be reached", error: error)
                    return false
                }
            }
        }
    }

    /// Says that the acknowledgement of `event` was not written before stopping.
    private func warnUnacknowledged(_ event: CountdownEvent, why: String, error: (any Error)? = nil) {
        var metadata: Logger.Metadata = ["key": "\(event.key ?? "")", "event_id": "\(event.id)"]
        if let error { metadata["error"] = "\(error)" }
        toolLogger.warning(
            "could not acknowledge an expiry before stopping (\(why)); it will be delivered again", metadata: metadata)
    }

    /// `{"event":"expired","key":…,"group":…,"generation":…,"deadline_at":…,"fired_at":…,"late_ms":…,"payload":…}`.
    static func line(for event: CountdownEvent) -> String {
        JSON.object([
            ("event", .string(event.kind.rawValue)),
            ("key", .string(event.key)),
            ("group", .string(event.group)),
            ("generation", .int(event.generation)),
            ("deadline_at", .instant(event.deadlineAt)),
            ("fired_at", .instant(event.firedAt)),
            ("late_ms", .duration(event.late)),
            ("payload", .string(event.payload?.jsonText)),
        ]).text
    }

    /// Runs `command` through `/bin/sh -c` until it exits 0, waiting longer between failures;
    /// returns false if the task is cancelled first, or if the command under way when a stop
    /// arrives has not exited by the stop's deadline (it is left running, its expiry not
    /// acknowledged, with a warning).
    func runUntilSuccess(_ command: String, for event: CountdownEvent) async throws -> Bool {
        var delay = Duration.milliseconds(500)
        while !Task.isCancelled {
            let running = Task { try await Self.execute(command, for: event) }
            guard let ran = await BoundedWait.result(of: running, by: stopping, passingCancellation: false) else {
                toolLogger.warning(
                    """
                    the command for an expiry did not exit within the stop's bound; \
                    left running, the expiry not acknowledged
                    """,
                    metadata: ["key": "\(event.key ?? "")", "bound": "\(stopping.bound)"])
                return false
            }
            let status = try ran.get()
            if status == 0 { return true }
            toolLogger.warning(
                "command failed; retrying",
                metadata: ["status": "\(status)", "key": "\(event.key ?? "")", "retry_in": "\(delay)"])
            do {
                let clock = SystemClock()  // the boot clock: a shifted wall clock cannot disturb it
                try await clock.sleep(untilBootMilliseconds: clock.bootMilliseconds + milliseconds(delay))
            } catch {
                return false
            }
            delay = min(delay * 2, .seconds(30))
        }
        return false
    }

    private static func execute(_ command: String, for event: CountdownEvent) async throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        var environment = ProcessInfo.processInfo.environment
        environment["COUNTDOWN_KEY"] = event.key ?? ""
        environment["COUNTDOWN_GROUP"] = event.group ?? ""
        environment["COUNTDOWN_PAYLOAD"] = event.payload?.jsonText ?? ""
        environment["COUNTDOWN_LATE_MS"] = String(event.late.map(milliseconds) ?? 0)
        environment["COUNTDOWN_GENERATION"] = String(event.generation ?? 0)
        environment["COUNTDOWN_DEADLINE_AT"] = event.deadlineAt.map { StoreTime.iso8601($0) } ?? ""
        // systemd's notification socket and watchdog are this process's alone (sd_notify(3)).
        for name in SystemdNotifier.variables { environment.removeValue(forKey: name) }
        process.environment = environment
        return try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { finished in continuation.resume(returning: finished.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(
                    throwing: CountdownError(.invalidArgument, "cannot run '\(command)': \(error.localizedDescription)")
                )
            }
        }
    }
}
