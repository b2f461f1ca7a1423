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
        let store = try await CountdownStore(
            postgresURL: "postgres://app@db1:5432,db2:5432/orders?target_session_attrs=read-write"
                + "&sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem")
        return store
    }

    /// "Running on PostgreSQL in production": a managed service's string, with its CA.
    func managedService() async throws -> CountdownStore {
        let store = try await CountdownStore(
            postgresURL: "postgres://app@orders.abc123.eu-west-1.rds.amazonaws.com:5432/orders"
                + "?sslmode=verify-full&sslrootcert=/etc/ssl/rds-global-bundle.pem&application_name=checkout")
        return store
    }

    /// "Running on PostgreSQL in production": every server named, the one that takes writes asked for.
    func failover() async throws -> CountdownStore {
        let store = try await CountdownStore(
            postgresURL: "postgres://app@db1:5432,db2:5432/orders?target_session_attrs=read-write&connect_timeout=3")
        return store
    }
}
