@_exported import CountdownStore
@_exported import CountdownStorePostgres
import Foundation

/// Where a store is: an SQLite file, or a PostgreSQL database named by a connection string. The
/// one place that tells the two apart, so that a host (and the `countdown` tool) that accepts
/// either from its user opens the right engine with one call: ``CountdownStore/init(location:configuration:)``.
///
/// ```swift
/// let location = StoreLocation(ProcessInfo.processInfo.environment["COUNTDOWN_DB"] ?? "countdowns.sqlite")
/// let store = try await CountdownStore(location: location)
/// print("opened \(location)")   // a connection string without its password
/// ```
public enum StoreLocation: Sendable, Hashable, CustomStringConvertible {
    /// An SQLite file, by its path.
    case file(String)
    /// A PostgreSQL database, by its connection string: a `postgres://` or `postgresql://` URL,
    /// or libpq's `key=value` pairs (such as `host=db1,db2 dbname=orders`).
    case postgres(String)

    /// The location `text` names: a connection string for a `postgres://` or `postgresql://`
    /// URL, or for `key=value` pairs that start with one of libpq's keywords; a file's path
    /// otherwise.
    public init(_ text: String) {
        self = PostgresConnectionString.isConnectionString(text) ? .postgres(text) : .file(text)
    }

    /// The location as a person may see it: a connection string without its password.
    public var description: String {
        switch self {
        case .file(let path): path
        case .postgres(let url): PostgresConnectionString.redact(url)
        }
    }

    /// Whether the location is a database server's (whose existence the store learns only by
    /// connecting), rather than a file.
    public var isServer: Bool {
        if case .postgres = self { return true }
        return false
    }
}

extension CountdownStore {
    /// Opens the store at `location`: in the SQLite file (see ``CountdownStore/init(path:configuration:sqlite:)``),
    /// or in the PostgreSQL database (see ``CountdownStore/init(postgresURL:schema:wakeUps:configuration:)``).
    ///
    /// - Throws: what the engine's own opening throws.
    public convenience init(
        location: StoreLocation, configuration: Configuration = Configuration()
    ) async throws(CountdownError) {
        try await self.init(
            location: location, configuration: configuration,
            defaultApplicationName: ProcessInfo.processInfo.processName)
    }

    /// ``init(location:configuration:)`` with the `application_name` a PostgreSQL server sees when
    /// neither the string nor `PGAPPNAME` names one (the tool names its version).
    package convenience init(
        location: StoreLocation, configuration: Configuration, defaultApplicationName: String
    ) async throws(CountdownError) {
        switch location {
        case .file(let path):
            try self.init(path: path, configuration: configuration)
        case .postgres(let url):
            try await self.init(
                postgresURL: url, configuration: configuration, defaultApplicationName: defaultApplicationName)
        }
    }
}
