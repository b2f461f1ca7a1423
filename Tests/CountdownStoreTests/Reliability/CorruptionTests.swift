import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// Corruption: damaged files give a typed error, or open cleanly; damage the open cannot see
/// is reported by the next read of it and by `diagnostics()` (`countdown doctor`). Never a
/// crash, and the file is never overwritten.
///
/// Size: `COUNTDOWN_CORRUPTION_FILES` (200 in CI).
@Suite("Corruption")
struct CorruptionTests {
    enum Outcome: String, CaseIterable {
        case refusedAtOpen = "refused at open"
        case cleanOpen = "clean open, integrity ok"
        case damageReported = "opened, damage reported by a read or by integrity_check"
    }

    /// A sound database with items in every state, events and a consumer, fully checkpointed.
    static func makeBase(_ path: String) async throws -> Data {
        let clock = VirtualClock()
        let store = try CountdownStore(path: path, configuration: .init(clock: clock))
        try await store.heartbeat()
        try await store.start((0..<300).map {
            $0.isMultiple(of: 9) ? .stopwatch("s\($0)", group: "g\($0 % 5)")
                : .countdown("k\($0)", duration: .seconds(Int64($0) + 1), group: "g\($0 % 5)", payload: .text(String(repeating: "p", count: $0)))
        })
        for index in stride(from: 1, to: 300, by: 7) where !index.isMultiple(of: 9) { try await store.pause("k\(index)") }
        clock.advance(by: .seconds(100))
        try await store.expireDue()
        _ = try await store.consumer("c")
        try await store.close()
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    /// Opens and reads the file at `path`; returns what happened. Anything but a typed error fails the test.
    static func examine(_ path: String) async -> Outcome {
        let store: CountdownStore
        do {
            store = try CountdownStore(path: path, configuration: .init(clock: VirtualClock()))
        } catch {
            return .refusedAtOpen
        }
        var damaged = false
        do {
            let diagnostics = try await store.diagnostics()
            damaged = diagnostics.integrity != ["ok"]
        } catch {
            damaged = true
        }
        for read in [
            { _ = try await store.list(.all, limit: 10_000) },
            { _ = try await store.counts() },
            { _ = try await store.expired(limit: 10_000) },
            { _ = try await store.recentEvents(limit: 10_000) },
            { _ = try await store.countdown("k10") },
        ] as [() async throws -> Void] {
            do {
                try await read()
            } catch {
                #expect(error is CountdownError, "a typed error, not \(error)")
                damaged = true
            }
        }
        try? await store.close()
        return damaged ? .damageReported : .cleanOpen
    }

    @Test("Seeded random byte flips, zeroed ranges and truncations: a typed error or a clean open; never a crash, never overwritten")
    func randomDamage() async throws {
        let files = suiteSize("COUNTDOWN_CORRUPTION_FILES", ci: 200)
        let seed = UInt64(ProcessInfo.processInfo.environment["COUNTDOWN_CORRUPTION_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max / 2)
        var rng = SeededGenerator(state: seed)
        let folder = try TemporaryFolder()
        let base = try await Self.makeBase(folder.path("base.sqlite"))
        var outcomes: [Outcome: Int] = [:]
        for index in 0..<files {
            var bytes = base
            let damage: String
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                let flips = Int.random(in: 1...32, using: &rng)
                let headerFirst = Bool.random(using: &rng)
                for _ in 0..<flips {
                    let offset = headerFirst && Bool.random(using: &rng) ? Int.random(in: 0..<100, using: &rng) : Int.random(in: 0..<bytes.count, using: &rng)
                    bytes[offset] ^= UInt8.random(in: 1...255, using: &rng)
                }
                damage = "\(flips) flipped bytes"
            case 5..<7:
                let start = Int.random(in: 0..<bytes.count, using: &rng)
                let length = min(bytes.count - start, Int.random(in: 1...8192, using: &rng))
                bytes.replaceSubrange(start..<start + length, with: Data(count: length))
                damage = "\(length) zeroed bytes at \(start)"
            default:
                let length = Int.random(in: 0..<bytes.count, using: &rng)
                bytes = bytes.prefix(length)
                damage = "truncated to \(length) bytes"
            }
            let path = folder.path("damaged-\(index).sqlite")
            try bytes.write(to: URL(fileURLWithPath: path))
            let outcome = await Self.examine(path)
            outcomes[outcome, default: 0] += 1
            let after = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect(after == bytes || (bytes.isEmpty && outcome == .cleanOpen), "file \(index) (\(damage), seed \(seed)) was overwritten")
            if after != bytes, let keep = ProcessInfo.processInfo.environment["COUNTDOWN_CORRUPTION_KEEP"] {
                try? bytes.write(to: URL(fileURLWithPath: keep + "/damaged-\(index).sqlite"))
            }
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        let report = "corruption suite: seed \(seed), \(files) damaged files, crashes 0, " + Outcome.allCases.map { "\(outcomes[$0] ?? 0) \($0.rawValue)" }.joined(separator: ", ")
        print(report)
        if let file = ProcessInfo.processInfo.environment["COUNTDOWN_RELIABILITY_REPORT"] { try? (report + "\n").appendLine(to: file) }
        #expect(outcomes.values.reduce(0, +) == files)
    }

    @Test("Regression: a damaged row with NULL in a NOT NULL column is a typed error, not a trap")
    func nullInANotNullColumn() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        let store = try CountdownStore(path: path, configuration: .init(clock: VirtualClock()))
        try await store.start("a", duration: .minutes(1))
        try await store.close()
        // Damage the file the way a bit flip can: a NOT NULL column holding NULL.
        let queue = try DatabaseQueue(path: path)
        try await queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA writable_schema = ON")
            try db.execute(sql: """
                UPDATE sqlite_master SET sql = replace(sql, 'kind           TEXT    NOT NULL', 'kind           TEXT')
                WHERE name = 'countdown_events'
                """)
            try db.execute(sql: "PRAGMA writable_schema = OFF")
        }
        try queue.close()
        let damaging = try DatabaseQueue(path: path)
        try await damaging.write { db in try db.execute(sql: "UPDATE countdown_events SET kind = NULL") }
        try damaging.close()

        let reopened = try CountdownStore(path: path, configuration: .init(clock: VirtualClock()))
        await expectError(.unreadableDatabase) { try await reopened.recentEvents() }
        #expect(try await reopened.countdown("a")?.state == .running, "the undamaged rows still read")
    }

    @Test(
        "Regression: a header whose file format version is damaged is refused untouched, not switched to WAL over it",
        arguments: [(UInt8(2), UInt8(0)), (0, 2), (3, 2), (2, 1)])
    func damagedFormatVersion(write: UInt8, read: UInt8) async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        var bytes = try await Self.makeBase(path)
        bytes[18] = write
        bytes[19] = read
        try bytes.write(to: URL(fileURLWithPath: path))
        let error = await expectError(.unreadableDatabase) { try CountdownStore(path: path) }
        #expect(error?.message.contains("file format versions \(write) and \(read)") == true, "\(error?.message ?? "")")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
    }

    @Test("Regression: opening and closing a store leaves its file byte for byte as it was")
    func openingWritesNothing() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        let base = try await Self.makeBase(path)
        for _ in 0..<3 {
            let store = try CountdownStore(path: path)
            _ = try await store.list(.all, limit: 1000)
            try await store.close()
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == base)
        }
    }

    @Test("A text file, an empty file and a garbage -wal beside a sound database")
    func specialFiles() async throws {
        let folder = try TemporaryFolder()
        let text = folder.path("notes.sqlite")
        try Data("# shopping\n- milk\n".utf8).write(to: URL(fileURLWithPath: text))
        #expect(await Self.examine(text) == .refusedAtOpen)
        #expect(try String(contentsOfFile: text, encoding: .utf8) == "# shopping\n- milk\n")

        let empty = folder.path("empty.sqlite")
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        #expect(await Self.examine(empty) == .cleanOpen, "an empty file is a new database")

        let sound = folder.path("sound.sqlite")
        let base = try await Self.makeBase(sound)
        var rng = SeededGenerator(state: 42)
        try Data((0..<20_000).map { _ in UInt8.random(in: 0...255, using: &rng) }).write(to: URL(fileURLWithPath: sound + "-wal"))
        #expect(await Self.examine(sound) == .cleanOpen, "a WAL with a bad header is ignored")
        #expect(try Data(contentsOf: URL(fileURLWithPath: sound)) == base)
        let store = try CountdownStore(path: sound)
        #expect(try await store.counts().total == 300)
        try await store.close()
    }
}
