import CountdownStore
import CountdownStorePostgres
import Testing

/// The code of the "Scaling out with PostgreSQL" article, compiled (it names a server the tests
/// do not have, so it is not run; the PostgreSQL suites open stores the same way).
struct ScalingOutArticleTests {
    func openingTheStore() async throws -> CountdownStore {
        let store = try await CountdownStore(
            postgresURL: "postgres://orders@db.internal:5432/orders?sslmode=require", schema: "countdowns")
        return store
    }

    /// The example of `CountdownStore.init(postgresURL:schema:wakeUps:configuration:)`'s doc comment.
    func openingFromTheDocComment() async throws -> CountdownStore {
        let store = try await CountdownStore(postgresURL: "postgres://app@db.internal:5432/orders")
        return store
    }
}
