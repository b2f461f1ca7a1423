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
                "With --consumer: how long expiries handed to this run stay its own when it dies before acknowledging them, before another run of the consumer gets them (default 30s).",
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
        static func retention(_ text: String?, option: String, fallback: Duration?) throws(CountdownError) -> Duration? {
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
            retention.endedItems = try Self.retention(retainEnded, option: "retain-ended", fallback: retention.endedItems)
            retention.events = try Self.retention(retainEvents, option: "retain-events", fallback: retention.events)
            let store = try await global.openStore(claimTimeout: timeout, retention: retention)
            let output = ExpiryOutput(store: store, group: group, consumer: consumer, command: exec)
            let ticker = CountdownTicker(store: store)
            // The ticker and the printer side by side; SIGINT or SIGTERM cancels both, the ticker
            // then writes its final heartbeat. (No timers of its own: see `BootSleeper`.)
            let work = Task {
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    tasks.addTask { try await ticker.run() }
                    tasks.addTask { try await output.run() }
                    defer { tasks.cancelAll() }
                    _ = try await tasks.next()
                }
            }
            let stop = SignalStop(cancelling: work)
            defer { withExtendedLifetime(stop) {} }
            do {
                try await work.value
            } catch is CancellationError {
            } catch {
                try? await store.close()
                throw error
            }
            try await store.close()
        }
    }
}

/// Writes each expiry as a JSON line, runs the command for it, and acknowledges it.
struct ExpiryOutput {
    let store: CountdownStore
    let group: String?
    let consumer: String?
    let command: String?

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
                    guard try await Self.runUntilSuccess(command, for: event) else { return }
                }
                if let named {
                    guard try await Self.acknowledge(event, of: named) else { return }
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
                guard try await Self.acknowledge(event, of: named) else { return }
            }
        }
        // Stopped in the middle of a batch: what was written is acknowledged.
        if !buffer.isEmpty {
            FileHandle.standardOutput.write(buffer)
            unacknowledged = lastRead
        }
        if let last = unacknowledged { _ = try await Self.acknowledge(last, of: named) }
    }

    /// Acknowledges `event`: written means handled, so the acknowledgement completes even if a
    /// stop arrives while it is written. A lost connection to the database (a server
    /// restarting) is retried, 0.1 s later, then up to 1 s apart, until it succeeds or a stop
    /// arrives; returns false after a stop (the event is then delivered again).
    static func acknowledge(_ event: CountdownEvent, of consumer: EventConsumer) async throws -> Bool {
        var retry = ConnectionRetry()
        while true {
            do {
                try await Task { try await consumer.acknowledge(event) }.value
                retry.succeeded(toolLogger)
                return true
            } catch let error as CountdownError where error.isTransient && !Task.isCancelled {
                let delayMs = retry.failed(error, toolLogger)
                do {
                    let clock = SystemClock()
                    try await clock.sleep(untilBootMilliseconds: clock.bootMilliseconds + delayMs)
                } catch {
                    return false
                }
            }
        }
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
    /// returns false if the task is cancelled first.
    static func runUntilSuccess(_ command: String, for event: CountdownEvent) async throws -> Bool {
        var delay = Duration.milliseconds(500)
        while !Task.isCancelled {
            let status = try await execute(command, for: event)
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
        process.environment = environment
        return try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { finished in continuation.resume(returning: finished.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: CountdownError(.invalidArgument, "cannot run '\(command)': \(error.localizedDescription)"))
            }
        }
    }
}

