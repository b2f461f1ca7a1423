import ArgumentParser
import CountdownStore
import CountdownStoreLocation
import Foundation
import Logging

/// The tool's logger: on stderr, so stdout stays the tool's output, from `--log-level` (default
/// warning) in `--log-format` (``ToolLogSettings``).
let toolLogger = Logger(label: "countdown") { label in ToolLogHandler(label: label) }

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The database file, or a PostgreSQL connection string "
                + "(postgres://USER@HOST:PORT/DB, or host=H dbname=DB ...).",
            valueName: "path"))
    var db: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How log lines on stderr are written: text, json (one object per line), journal (journald's "
                + "<N> priority prefixes), or auto: journal when stderr is the journal, else text.",
            valueName: "format"))
    var logFormat: LogFormat = .auto

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The least severe log lines written: trace, debug, info, notice, warning, error or critical.",
            valueName: "level"))
    var logLevel: Logger.Level = .warning

    /// Makes `--log-format` and `--log-level` the process's, before anything is logged (the parser
    /// calls this once the options are read, before the command runs).
    func validate() throws {
        let settings = ToolLogSettings(format: logFormat.resolved(), level: logLevel)
        ToolLogSettings.current.withLock { $0 = settings }
    }

    /// `--db`, else `$COUNTDOWN_DB`, else `$XDG_DATA_HOME/countdown/<file>` (or `~/.local/share/...`).
    func databasePath(defaultFile: String = "countdowns.sqlite") -> String {
        if let db, !db.isEmpty { return db }
        let environment = ProcessInfo.processInfo.environment
        if defaultFile == "countdowns.sqlite", let path = environment["COUNTDOWN_DB"], !path.isEmpty { return path }
        let dataHome =
            environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (homeDirectory(environment) as NSString).appendingPathComponent(".local/share")
        return ((dataHome as NSString).appendingPathComponent("countdown") as NSString).appendingPathComponent(
            defaultFile)
    }

    /// `~`: `$HOME`, as every Unix tool reads it; the password database only when it is unset or empty.
    private func homeDirectory(_ environment: [String: String]) -> String {
        if let home = environment["HOME"], !home.isEmpty { return home }
        return NSHomeDirectory()
    }

    /// Opens the store: in PostgreSQL for a connection string, else in the file, creating its
    /// folder (mode 0700) as needed.
    func openStore(
        defaultFile: String = "countdowns.sqlite", logger: Logger = toolLogger, claimTimeout: Duration? = nil,
        retention: CountdownStore.Retention? = nil, metrics: CountdownStore.MetricsOptions? = nil
    ) async throws(CountdownError) -> CountdownStore {
        let path = databasePath(defaultFile: defaultFile)
        var configuration = CountdownStore.Configuration(logger: logger)
        if let metrics { configuration.metrics = metrics }
        if let claimTimeout { configuration.claimTimeout = claimTimeout }
        if let retention { configuration.retention = retention }
        let location = StoreLocation(path)
        if case .file = location {
            try createFolder(of: path)
        }
        return try await CountdownStore(
            location: location, configuration: configuration, defaultApplicationName: ToolVersion.applicationName)
    }

    /// Creates the folder of the file at `path` (mode 0700) when it is missing.
    private func createFolder(of path: String) throws(CountdownError) {
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty, !FileManager.default.fileExists(atPath: folder) {
            do {
                try FileManager.default.createDirectory(
                    atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw CountdownError(
                    .storageFailure, "cannot create the folder '\(folder)': \(error.localizedDescription)")
            }
        }
    }
}

/// `--json`.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false
}

extension CountdownPolicy: ExpressibleByArgument {}
extension StateFilter: ExpressibleByArgument {}
extension IntegrityCheck: ExpressibleByArgument {}

/// Runs `body` with the store open, closing it afterwards whatever happens.
func withStore<T>(
    _ options: GlobalOptions, defaultFile: String = "countdowns.sqlite",
    _ body: (CountdownStore) async throws -> T
) async throws -> T {
    let store = try await options.openStore(defaultFile: defaultFile)
    do {
        let result = try await body(store)
        try await store.close()
        return result
    } catch {
        try? await store.close()
        throw error
    }
}
