import PostgresNIO

/// Runs an owned `PostgresClient` for as long as the store is open.
final class ClientRunner: Sendable {
    private let task: Task<Void, Never>

    init(_ client: PostgresClient) {
        task = Task { await client.run() }
    }

    func stop() {
        task.cancel()
    }
}
