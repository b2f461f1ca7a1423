import Foundation
import PropertyBased
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// Hostile input: property-based sequences of random operations with hostile keys and
/// durations, checked against a reference model. No crash; every refusal a typed error naming
/// the problem; the database unchanged by refused input.
///
/// Size: `COUNTDOWN_HOSTILE_SEQUENCES` (40 in CI).
@Suite("Hostile input")
struct HostileInputTests {
    static let keys: [String] = [
        "", String(repeating: "x", count: 1 << 20), "a\u{0}b", "'; DROP TABLE countdowns; --", "🚀⏱",
        "caf\u{E9}", "cafe\u{301}", "k", "tab\tkey", String(repeating: "é", count: 129), "%_*?\\", "ok",
    ]
    static let durations = ["-5s", "0", "nan", "inf", "-inf", "99999999999999999999", "1ms", "45s", "3h", "PT0S", "-0.5"]
    enum Operation: Int, CaseIterable { case start, replace, stopwatch, pause, resume, cancel, extend, remove, restart }

    /// What the model holds for a key.
    enum Held: Equatable { case running, paused, ended }
    struct Item: Equatable { var held: Held; var stopwatch: Bool }
    /// What the model expects of an operation: the key's new item (nil: removed), or a refusal.
    enum Outcome: Equatable {
        case success(Item?)
        case failure(CountdownError.Code)
    }

    static func isValidKey(_ key: String) -> Bool {
        !key.isEmpty && !key.unicodeScalars.contains { $0.properties.generalCategory == .control }
            && key.precomposedStringWithCanonicalMapping.utf8.count <= 256
    }

    /// The outcome the model predicts: a new item state (nil: removed), or the refusal code.
    static func predict(_ operation: Operation, _ item: Item?) -> Outcome {
        switch operation {
        case .start:
            let active = item.map { $0.held != .ended } ?? false
            return active ? Outcome.failure(.alreadyActive) : Outcome.success(Item(held: .running, stopwatch: false))
        case .replace:
            return .success(Item(held: .running, stopwatch: false))
        case .stopwatch:
            let active = item.map { $0.held != .ended } ?? false
            return active ? Outcome.failure(.alreadyActive) : Outcome.success(Item(held: .running, stopwatch: true))
        case .pause:
            guard let item else { return .failure(.notFound) }
            return item.held == .running ? .success(Item(held: .paused, stopwatch: item.stopwatch)) : .failure(.wrongState)
        case .resume:
            guard let item else { return .failure(.notFound) }
            return item.held == .paused ? .success(Item(held: .running, stopwatch: item.stopwatch)) : .failure(.wrongState)
        case .cancel:
            guard let item else { return .failure(.notFound) }
            return item.held != .ended ? .success(Item(held: .ended, stopwatch: item.stopwatch)) : .failure(.wrongState)
        case .extend:
            guard let item else { return .failure(.notFound) }
            return !item.stopwatch && item.held != .ended ? .success(item) : .failure(.wrongState)
        case .remove:
            return item == nil ? .failure(.notFound) : .success(nil)
        case .restart:
            guard let item else { return .failure(.notFound) }
            return .success(Item(held: .running, stopwatch: item.stopwatch))
        }
    }

    static func apply(_ operation: Operation, key: String, duration: Duration, on store: CountdownStore) async throws(CountdownError) {
        switch operation {
        case .start: try await store.start(key, duration: duration)
        case .replace: try await store.start(key, duration: duration, whenActive: .replace)
        case .stopwatch: try await store.startStopwatch(key)
        case .pause: try await store.pause(key)
        case .resume: try await store.resume(key)
        case .cancel: try await store.cancel(key)
        case .extend: try await store.extend(key, by: duration)
        case .remove: try await store.remove(key)
        case .restart: try await store.restart(key)
        }
    }

    @Test(
        "Random operation sequences with hostile keys and durations agree with the reference model",
        .shrinking(shrinkFailures), arguments: TestEngine.all)
    func hostileSequences(engine: TestEngine) async throws {
        let space = Operation.allCases.count * Self.keys.count * Self.durations.count
        let sequences = suiteSize("COUNTDOWN_HOSTILE_SEQUENCES", ci: 40)
        let refusals = Locked(0)
        await propertyCheck(count: sequences, input: Gen.int(in: 0...(space - 1)).array(of: 1...25)) { steps in
            let fixture = try Fixture(engine: engine)
            let store = try await fixture.open()
            var model: [String: Item] = [:]
            for step in steps {
                let operation = Operation.allCases[step % Operation.allCases.count]
                let key = Self.keys[(step / Operation.allCases.count) % Self.keys.count]
                let text = Self.durations[step / (Operation.allCases.count * Self.keys.count)]
                let before = try await snapshot(store)
                let expected: Outcome
                let name = key.precomposedStringWithCanonicalMapping
                let usesDuration = operation == .start || operation == .replace || operation == .extend
                var duration = Duration.seconds(1)
                if !Self.isValidKey(key) {
                    expected = .failure(.invalidKey)
                } else if usesDuration, let parsed = try? DurationText.parse(text) {
                    duration = parsed
                    expected = Self.predict(operation, model[name])
                } else if usesDuration {
                    expected = .failure(.invalidDuration)
                    #expect(throws: CountdownError.self) { try DurationText.parse(text) }
                } else {
                    expected = Self.predict(operation, model[name])
                }
                if case .failure(.invalidDuration) = expected, Self.isValidKey(key) {
                    // The text never becomes a Duration: the parser refused it by name.
                    do {
                        _ = try DurationText.parse(text)
                    } catch let error as CountdownError {
                        #expect(error.message.contains("'\(text)'"))
                    }
                    refusals.withLock { $0 += 1 }
                    continue
                }
                do {
                    try await Self.apply(operation, key: key, duration: duration, on: store)
                    switch expected {
                    case .success(let item): model[name] = item
                    case .failure(let code): Issue.record("\(operation) \(quoted(key)) \(text) succeeded; the model expected \(code)")
                    }
                } catch let error as CountdownError {
                    refusals.withLock { $0 += 1 }
                    if case .failure(let code) = expected {
                        #expect(error.code == code, "\(operation) \(quoted(key)) \(text): \(error.message)")
                    } else {
                        Issue.record("\(operation) \(quoted(key)) \(text) was refused: \(error.message)")
                    }
                    #expect(try await snapshot(store) == before, "refused input changed nothing")
                } catch {
                    Issue.record("an untyped error: \(error)")
                }
            }
            let stored = try await store.list(.all, limit: 10_000)
            #expect(Set(stored.map(\.key)) == Set(model.keys), "the store holds exactly the model's keys")
            for item in stored {
                let held: Held = item.state == .running ? .running : item.state == .paused ? .paused : .ended
                #expect(model[item.key] == Item(held: held, stopwatch: item.kind == .stopwatch), "\(item.key)")
            }
            #expect(try await store.diagnostics().integrity == ["ok"])
            try await store.close()
        }
        let report = "hostile-input suite (\(engine)): \(sequences) sequences of up to 25 operations, \(refusals.withLock { $0 }) refusals, all typed, crashes 0"
        print(report)
        if let file = ProcessInfo.processInfo.environment["COUNTDOWN_RELIABILITY_REPORT"] { try? (report + "\n").appendLine(to: file) }
    }
}
