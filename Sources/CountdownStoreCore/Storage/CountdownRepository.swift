import Foundation

/// Where the store keeps its rows: transactions over a database.
package protocol CountdownRepository: Sendable {
    func read<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T
    func write<T: Sendable>(_ body: @escaping @Sendable (any RepositoryWriting) throws -> T) async throws -> T
    /// ``read(_:)`` for a body that reads events by ID (a reader's next events, the last ID).
    func readEvents<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T
}

extension CountdownRepository {
    /// ``read(_:)`` for a body that reads events by ID (a reader's next events, the last ID): an
    /// engine whose writers commit events out of order readies what those reads need first.
    package func readEvents<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws
        -> T
    {
        try await read(body)
    }
}
