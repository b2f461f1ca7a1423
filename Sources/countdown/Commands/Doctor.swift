import ArgumentParser
import CountdownBuildInfo
import CountdownStore
import CountdownStoreLocation
import Foundation

extension CountdownCommand {
    /// `countdown doctor`: what the store is and whether it is sound.
    struct Doctor: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the database: schema, integrity, counts, clocks, lease and recent clock events.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        @Option(
            help: """
                How thoroughly to check the database: full (every page and index; about a second per million \
                countdowns on SQLite), \
                quick (every page, indexes not compared with their tables), or skip.
                """)
        var integrity: IntegrityCheck = .full

        func run() async throws {
            let given = global.databasePath()
            let location = StoreLocation(given)
            // A connection string is shown without its password.
            let path = location.description
            guard location.isServer || FileManager.default.fileExists(atPath: given) else {
                report(problem: CountdownError(.notFound, "no database at '\(path)'"), path: path)
            }
            let store: CountdownStore
            do {
                // Opening never overwrites: a damaged or foreign file is refused untouched.
                store = try await global.openStore()
            } catch {
                report(problem: error, path: path)
            }
            let diagnostics = try await store.diagnostics(integrity: integrity)
            try await store.close()
            let healthy = diagnostics.integrity == ["ok"]
            if output.json {
                print(json(diagnostics, path: path, healthy: healthy).text)
            } else {
                print(text(diagnostics, path: path))
            }
            if !healthy { throw ExitCode(ExitStatus.storage) }
        }

        /// Reports a database that cannot be opened, and exits with its status.
        private func report(problem: CountdownError, path: String) -> Never {
            if output.json {
                print(
                    JSON.object([
                        ("path", .string(path)), ("ok", .bool(false)),
                        (
                            "error",
                            .object([("code", .string(problem.code.name)), ("message", .string(problem.message))])
                        ),
                    ]).text)
                Foundation.exit(ExitStatus.of(problem))
            }
            Main.fail(problem.message, status: ExitStatus.of(problem))
        }

        /// The check's result, which check ran and how long it took.
        private func integrityText(_ report: StoreDiagnostics) -> String {
            guard report.integrityCheck != .skip else { return "not checked (--integrity skip)" }
            let seconds = Double(report.integrityDuration.milliseconds) / 1000
            return report.integrity.map(TerminalText.safe).joined(separator: "; ")
                + String(format: " (%@ check, %.1f s)", report.integrityCheck.rawValue, seconds)
        }

        private func countsText(_ counts: CountdownCounts) -> String {
            CountdownState.allCases.map { state in "\(counts.count(state)) \(state.rawValue)" }.joined(separator: ", ")
        }

        private func text(_ report: StoreDiagnostics, path: String) -> String {
            let clock = report.clock
            var lines = [
                "version        \(CountdownStore.version) (commit \(BuildInfo.commit))",
                "database       \(TerminalText.safe(path))",
                "schema         \(report.appliedMigrations.count) of \(report.knownMigrations.count) migrations "
                    + "applied (\(report.appliedMigrations.last ?? "none"))",
                "integrity      \(integrityText(report))",
                "countdowns     \(countsText(report.counts))",
                "store clock    \(StoreTime.iso8601(milliseconds: clock.now.wall))",
                "active time    \(DurationText.format(.milliseconds(clock.now.active))) (A = \(clock.now.active) ms)",
                "background gap \(DurationText.format(.milliseconds(clock.now.gap))) (G = \(clock.now.gap) ms)",
                "calibration    \(milliseconds(clock.calibrationOffset)) ms"
                    + (clock.calibratedAt.map { ", set \(StoreTime.iso8601($0))" } ?? ", never set"),
                "clock skew     \(milliseconds(clock.clockSkew)) ms (system clock + calibration − store clock)",
                "last heartbeat \(StoreTime.iso8601(clock.lastHeartbeat))",
                "boot           \(TerminalText.safe(clock.bootIdentity ?? "unknown"))",
                "host           \(clock.suspended ? "suspended" : "not suspended")",
                "lease          "
                    + (clock.leaseHolder.map {
                        "held by \(TerminalText.safe($0)) until \(StoreTime.iso8601(clock.leaseExpiresAt!))"
                    } ?? "free (no ticker running)"),
            ]
            for detail in report.engineDetails {
                lines.append(TerminalText.pad(detail.name, to: 15) + TerminalText.safe(detail.value))
            }
            lines.append("clock events   " + (report.recentClockEvents.isEmpty ? "none" : ""))
            for event in report.recentClockEvents {
                lines.append(
                    "  \(StoreTime.iso8601(event.recordedAt))  \(event.kind.rawValue)  "
                        + "\(TerminalText.safe(event.detail ?? ""))"
                )
            }
            return lines.joined(separator: "\n")
        }

        private func json(_ report: StoreDiagnostics, path: String, healthy: Bool) -> JSON {
            let clock = report.clock
            return .object([
                ("version", .string(CountdownStore.version)),
                ("commit", .string(BuildInfo.commit)),
                ("path", .string(path)),
                ("ok", .bool(healthy)),
                (
                    "schema",
                    .object([
                        ("applied", .array(report.appliedMigrations.map(JSON.string))),
                        ("known", .array(report.knownMigrations.map(JSON.string))),
                    ])
                ),
                ("integrity", .array(report.integrity.map(JSON.string))),
                ("integrity_check", .string(report.integrityCheck.rawValue)),
                ("integrity_ms", .int(report.integrityDuration.milliseconds)),
                (
                    "counts",
                    .object(CountdownState.allCases.map { ($0.rawValue, .int(Int64(report.counts.count($0)))) })
                ),
                (
                    "clock",
                    .object([
                        ("wall_at", .string(StoreTime.iso8601(milliseconds: clock.now.wall))),
                        ("active_ms", .int(clock.now.active)),
                        ("gap_ms", .int(clock.now.gap)),
                        ("calibration_offset_ms", .int(milliseconds(clock.calibrationOffset))),
                        ("calibrated_at", .instant(clock.calibratedAt)),
                        ("clock_skew_ms", .int(milliseconds(clock.clockSkew))),
                        ("last_heartbeat_at", .instant(clock.lastHeartbeat)),
                        ("boot_id", .string(clock.bootIdentity)),
                        ("suspended", .bool(clock.suspended)),
                    ])
                ),
                (
                    "lease",
                    .object([
                        ("holder", .string(clock.leaseHolder)),
                        ("expires_at", .instant(clock.leaseExpiresAt)),
                    ])
                ),
                ("engine", .object(report.engineDetails.map { ($0.name, .string($0.value)) })),
                (
                    "clock_events",
                    .array(
                        report.recentClockEvents.map { event in
                            .object([
                                ("kind", .string(event.kind.rawValue)),
                                ("at", .instant(event.recordedAt)),
                                ("detail", .string(event.detail)),
                            ])
                        })
                ),
            ])
        }
    }
}
