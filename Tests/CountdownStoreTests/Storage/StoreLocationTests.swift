import CountdownStoreLocation
import Foundation
import Testing

@Suite("Store location")
struct StoreLocationTests {
    @Test("A path is a file; a postgres URL or libpq's key=value pairs name a server, shown without the password")
    func classification() {
        #expect(StoreLocation("countdowns.sqlite") == .file("countdowns.sqlite"))
        #expect(StoreLocation("/var/lib/countdown/host=db1.sqlite") == .file("/var/lib/countdown/host=db1.sqlite"))
        #expect(StoreLocation("postgres://app:secret@db1/orders") == .postgres("postgres://app:secret@db1/orders"))
        #expect(StoreLocation("postgresql://db1:5432,db2:5432/orders").isServer)
        #expect(StoreLocation("host=db1,db2 dbname=orders").isServer)
        #expect(!StoreLocation("./countdowns.sqlite").isServer)
        let shown = StoreLocation("postgres://app:secret@db1/orders").description
        #expect(!shown.contains("secret") && shown.contains("db1/orders"))
        #expect(StoreLocation("countdowns.sqlite").description == "countdowns.sqlite")
    }

    @Test("A file location opens the SQLite store in that file")
    func opensFile() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("location-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("countdowns.sqlite").path
        let store = try await CountdownStore(location: StoreLocation(path))
        try await store.start("order-1", duration: .seconds(60))
        #expect(store.sqliteDatabase != nil)
        try await store.close()
        let again = try CountdownStore(path: path)
        #expect(try await again.countdown("order-1")?.key == "order-1")
        try await again.close()
    }

    @Test("A connection string that does not parse is refused by name, before any connection")
    func refusesBadConnectionString() async throws {
        await #expect(throws: CountdownError.self) {
            _ = try await CountdownStore(location: StoreLocation("postgres://app@db1/orders?no_such_option=1"))
        }
    }
}
