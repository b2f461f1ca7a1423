import Foundation
import Testing

@testable import CountdownStoreCore

/// The input SPEC section 7 accepts, stored as it is on every engine: keys of 256 bytes, SQL
/// metacharacters and emoji, canonically equivalent spellings as one key, payloads of 64 KiB (one
/// byte more refused), durations from 1 ms to 100 years.
@Suite("Validation")
struct ValidationTests {
    @Test("Keys: 256 bytes, SQL metacharacters and emoji are accepted as they are", arguments: TestEngine.all)
    func acceptedKeys(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let keys = [String(repeating: "k", count: 256), "'; DROP TABLE countdowns; --", "🚀 launch", "%_\\*?"]
        for key in keys {
            try await store.start(key, duration: .seconds(5))
            #expect(try await store.countdown(key)?.key == key)
        }
        #expect(try await store.counts().total == keys.count)
    }

    @Test("Keys: NFC and NFD spellings of one name are the same key", arguments: TestEngine.all)
    func canonicallyEquivalentKeysAreOne(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let nfc = "caf\u{E9}"
        let nfd = "cafe\u{301}"
        try await store.start(nfd, duration: .seconds(5))
        #expect(try await store.countdown(nfc)?.key == nfc)
        await expectError(.alreadyActive) { try await store.start(nfc, duration: .seconds(5)) }
    }

    @Test("Payloads over 64 KiB are refused; 64 KiB exactly is accepted", arguments: TestEngine.all)
    func payloadLimit(engine: TestEngine) async throws {
        try await expectRefused(.invalidPayload, naming: "65537 bytes") {
            try await $0.start("p", duration: .seconds(1), payload: .bytes(Data(count: 65_537)))
        }
        try await expectRefused(.invalidPayload, naming: "65537 bytes") {
            try await $0.start("p", duration: .seconds(1), payload: .text(String(repeating: "x", count: 65_537)))
        }
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let bytes = Data((0..<65_536).map { UInt8($0 % 256) })
        try await store.start("p", duration: .seconds(1), payload: .bytes(bytes))
        #expect(try await store.countdown("p")?.payload == .bytes(bytes))
    }

    @Test("Durations: 1 ms and 100 years are accepted", arguments: TestEngine.all)
    func durationBounds(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        #expect(try await store.start("min", duration: .milliseconds(1)).duration == .milliseconds(1))
        #expect(try await store.start("max", duration: .seconds(3_155_760_000)).duration == .seconds(3_155_760_000))
    }
}
