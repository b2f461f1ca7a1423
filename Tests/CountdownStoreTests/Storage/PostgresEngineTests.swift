import Foundation
import PostgresNIO
import Testing

@testable import CountdownStore
@testable import CountdownStorePostgres

@Suite("PostgreSQL engine", .timeLimit(.minutes(2)))
struct PostgresEngineTests {
    @Test("A store in a schema of its own: start, read, expire on the holder's ticker")
    func roundTrip() async throws {
        let fixture = try Fixture(engine: .postgres)
        let store = try await fixture.openTicking()
        try await store.start("order-1", duration: .seconds(30), group: "payments", payload: .text("p"))
        try await store.start("order-2", duration: .seconds(60), payload: .bytes(Data([0, 1, 2])))
        let item = try await store.countdown("order-1")
        #expect(item?.state == .running && item?.payload == .text("p"))
        try await run(store, fixture.clock, for: .seconds(31))
        #expect(try await store.countdown("order-1")?.state == .expired)
        #expect(try await store.countdown("order-2")?.payload == .bytes(Data([0, 1, 2])))
        #expect(try await events(store).map(\.kind) == ["started", "started", "expired"])
    }
}
