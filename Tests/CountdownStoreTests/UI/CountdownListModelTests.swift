import Foundation
import Observation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite
@testable import CountdownStoreUI

/// Polls (real time) on the main actor until `condition` holds; fails the test after `limit` seconds.
@MainActor
func eventuallyOnMain(_ what: String, limit: Double = 30, _ condition: @MainActor () throws -> Bool) async throws {
    let deadline = Date().addingTimeInterval(limit)
    while try !condition() {
        guard Date() < deadline else {
            Issue.record("\(what): not within \(Int(limit)) s")
            throw CancellationError()
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// Counts the changes `withObservationTracking` reports for what `read` reads, re-registering
/// after each one, as SwiftUI does for a view's body.
@MainActor
final class ObservedChanges {
    private(set) var count = 0
    private let read: @MainActor () -> Void

    init(_ read: @escaping @MainActor () -> Void) {
        self.read = read
        track()
    }

    private func track() {
        withObservationTracking { read() } onChange: { [weak self] in
            // Counted as the change happens (the model changes on the main actor), so that a test
            // that sees the new value sees the count too; registering again waits for the change
            // to be made, as SwiftUI's next render does.
            MainActor.assumeIsolated { self?.count += 1 }
            Task { @MainActor in self?.track() }
        }
    }
}

/// The observable model of countdowns and the app's lifecycle, on Linux, as a SwiftUI screen
/// would use them: observed with `withObservationTracking`, on virtual time.
@Suite("SwiftUI model and app lifecycle")
@MainActor
struct CountdownListModelTests {
    /// A store on virtual time with a running ticker, and a model of `selection` following it.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    struct Following {
        let fixture: Fixture
        let store: CountdownStore
        let running: RunningTicker
        let model: CountdownListModel
        let task: Task<Void, Never>

        @MainActor
        init(_ selection: CountdownSelection = .active, beat: Duration? = .seconds(1), prepare: (CountdownStore) async throws -> Void = { _ in }) async throws {
            fixture = try Fixture()
            fixture.clock.advance(by: .milliseconds(437))  // off the second
            store = try await fixture.open()
            try await prepare(store)
            running = await RunningTicker(store)
            let model = CountdownListModel(store: store, ticker: running.ticker, selection: selection, beat: beat)
            self.model = model
            task = Task { @MainActor in await model.follow() }
        }

        func stop() async throws {
            task.cancel()
            await task.value
            try await running.stop()
            try await store.close()
        }
    }

    @Test("On a beat every row changes in one assignment, at one instant aligned on the beat")
    func rowsChangeTogetherOnABeat() async throws {
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        let following = try await Following(.active, beat: .seconds(1)) { store in
            try await store.start("order-1", duration: .seconds(900), group: "payments")
            try await store.start("order-2", duration: .seconds(60), group: "payments")
            try await store.start("screen", duration: .seconds(300), policy: .active)
            try await store.startStopwatch("uptime")
        }
        let model = following.model
        try await eventuallyOnMain("the first rows") { model.rows.count == 4 }
        #expect(model.rows.map(\.key) == ["order-2", "screen", "order-1", "uptime"], "list's order")
        await following.running.advance(following.fixture.clock, by: .seconds(1))
        try await eventuallyOnMain("the first beat") { model.lastBeat != nil }

        for _ in 0..<3 {
            let before = model.rows
            let beatBefore = try #require(model.lastBeat)
            let changes = ObservedChanges { _ = model.rows }
            await following.running.advance(following.fixture.clock, by: .seconds(1))
            try await eventuallyOnMain("the next beat") { model.lastBeat != beatBefore }
            try await eventuallyOnMain("the change observed") { changes.count >= 1 }
            let after = model.rows
            let beat = try #require(model.lastBeat)
            #expect(beat.wall % 1000 == 0 && beat.wall - beatBefore.wall == 1000, "aligned beats: \(beatBefore.wall) → \(beat.wall)")
            #expect(Set(after.map(\.item.computedAt)).count == 1, "one instant for every row")
            for (old, new) in zip(before, after) {
                #expect(old.key == new.key)
                #expect(new.elapsed - old.elapsed == .seconds(1), "\(new.key): \(old.elapsed) → \(new.elapsed)")
                if let remaining = new.remaining { #expect(old.remaining! - remaining == .seconds(1)) }
                #expect(new.needsBeat)
            }
        }
        #expect(model.needsBeat)
        try await following.stop()
    }

    @Test("Each row's timerInterval agrees with its remaining time within a millisecond, on the device's clock, calibrated or not")
    func timerIntervalsAgreeWithRemaining() async throws {
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        let following = try await Following(.items(state: .all), beat: nil) { store in
            try await store.start("deadline", duration: .milliseconds(90_061), group: "orders")
            try await store.start("later", duration: .seconds(7200))
            try await store.startStopwatch("on-screen", policy: .active)
            try await store.start("held", duration: .seconds(30))
            try await store.pause("held")
        }
        let model = following.model
        let clock = following.fixture.clock
        try await eventuallyOnMain("the rows") { model.rows.count == 4 }
        for calibration in [Duration.zero, .seconds(3600)] {
            if calibration > .zero {
                // The store clock moves to a server's time an hour ahead; the device's clock does not.
                let serverTime = Date(timeIntervalSince1970: Double(clock.systemMilliseconds + 3_600_000) / 1000)
                try await following.store.calibrate(serverTime: serverTime)
                await following.model.refresh()
            }
            let device = Double(clock.systemMilliseconds) / 1000  // the device's clock, now
            for row in model.rows {
                #expect(abs(row.deviceTime.timeIntervalSince1970 - device) < 0.001, "\(row.key) at \(row.deviceTime) on the device")
                let start = row.timerInterval.lowerBound.timeIntervalSince1970
                #expect(abs((device - start) - CountdownRow.seconds(row.elapsed)) < 0.001, "\(row.key): elapsed")
                if let remaining = row.remaining {
                    let end = row.timerInterval.upperBound.timeIntervalSince1970
                    #expect(abs((end - device) - CountdownRow.seconds(remaining)) < 0.001, "\(row.key): \(end - device) s vs \(remaining)")
                    #expect(row.countsDown)
                } else {
                    #expect(row.timerInterval.upperBound == .distantFuture && !row.countsDown)
                }
            }
            let held = try #require(model.rows.first { $0.key == "held" })
            #expect(held.pauseTime == held.deviceTime && !held.isCounting && !held.needsBeat)
            let deadline = try #require(model.rows.first { $0.key == "deadline" })
            #expect(deadline.pauseTime == nil && deadline.isCounting && deadline.figureText.hasPrefix("1m30") && !deadline.showsHours)
            #expect(model.rows.first { $0.key == "later" }?.showsHours == true)
        }
        try await following.stop()
    }

    @Test("A suspended app stops its active rows and not its wall rows; resumed, they count again")
    func suspendedAppStopsActiveRows() async throws {
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        let fixture = try Fixture()
        let lifecycle = CountdownAppLifecycle(store: try await fixture.open())
        lifecycle.start()
        await lifecycle.ticker.waitUntilIdle()
        let model = lifecycle.model(.active)
        let following = Task { @MainActor in await model.follow() }
        #expect(await model.start("order", duration: .seconds(900)) != nil)
        #expect(await model.start("screen-time", duration: .seconds(600), policy: .active) != nil)
        try await eventuallyOnMain("both rows") { model.rows.count == 2 }
        #expect(model.rows.allSatisfy { $0.isCounting })

        let changes = ObservedChanges { _ = model.rows }
        await lifecycle.phaseChanged(to: .background)
        #expect(lifecycle.phase == .background && lifecycle.lastError == nil)
        try await eventuallyOnMain("the rows after the suspend") { model.rows.first { $0.key == "screen-time" }?.isCounting == false }
        #expect(changes.count >= 1)
        let screen = try #require(model.rows.first { $0.key == "screen-time" })
        let order = try #require(model.rows.first { $0.key == "order" })
        #expect(screen.pauseTime != nil && order.pauseTime == nil && order.isCounting)

        // Ten seconds in the background: the wall countdown counts, the active one stands still.
        fixture.clock.advance(by: .seconds(10))
        await lifecycle.ticker.waitUntilIdle()
        await model.refresh()
        let screenLater = try #require(model.rows.first { $0.key == "screen-time" })
        let orderLater = try #require(model.rows.first { $0.key == "order" })
        #expect(screenLater.remaining == screen.remaining, "active time stood still")
        #expect(orderLater.remaining == order.remaining! - .seconds(10), "wall time counted")

        await lifecycle.phaseChanged(to: .inactive)
        await lifecycle.phaseChanged(to: .active)
        try await eventuallyOnMain("the rows after the resume") { model.rows.allSatisfy { $0.isCounting } }
        #expect(lifecycle.phase == .active && lifecycle.isRunning)
        following.cancel()
        await following.value
        await lifecycle.close()
        #expect(!lifecycle.isRunning && lifecycle.lastError == nil)
    }

    @Test("With two windows, the store is suspended only once both are in the background, and resumed when one comes back")
    func followsTheMostAwakeWindow() async throws {
        let fixture = try Fixture()
        let lifecycle = CountdownAppLifecycle(store: try await fixture.open())
        func suspended() async throws -> Bool { try await lifecycle.store.clockStatus().suspended }
        let (first, second) = (UUID(), UUID())
        await lifecycle.phaseChanged(to: .active, scene: first)
        await lifecycle.phaseChanged(to: .active, scene: second)
        await lifecycle.phaseChanged(to: .background, scene: first)
        #expect(lifecycle.phase == .active)
        #expect(try await suspended() == false, "the other window is on screen")
        await lifecycle.phaseChanged(to: .inactive, scene: second)
        #expect(lifecycle.phase == .inactive)
        #expect(try await suspended() == false)
        await lifecycle.phaseChanged(to: .background, scene: second)
        #expect(lifecycle.phase == .background)
        #expect(try await suspended() == true, "every window is in the background")
        await lifecycle.phaseChanged(to: .active, scene: first)
        #expect(lifecycle.phase == .active)
        #expect(try await suspended() == false)
        // The window on screen closes: the app is as its other window is.
        await lifecycle.sceneEnded(first)
        #expect(lifecycle.phase == .background)
        #expect(try await suspended() == true)
        // The last window closes: nothing changes.
        await lifecycle.sceneEnded(second)
        #expect(lifecycle.phase == .background && lifecycle.lastError == nil)
        #expect(AppPhase.ofScenes([]) == .background && AppPhase.ofScenes([.background, .inactive]) == .inactive)
        await lifecycle.close()
    }

    @Test("Actions go through the store; a refusal is a value naming the bad input, and changes nothing")
    func actionsAndRefusals() async throws {
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        let following = try await Following(.items(state: .all, group: "kitchen"), beat: nil)
        let model = following.model
        #expect(await model.start("tea", duration: .seconds(180), group: "kitchen")?.state == .running)
        try await eventuallyOnMain("the row") { model.rows.map(\.key) == ["tea"] }
        #expect(await model.pause("tea")?.state == .paused)
        #expect(model.rows.first?.state == .paused && model.rows.first?.pauseTime != nil)
        #expect(await model.resume("tea")?.state == .running)
        #expect(await model.extend("tea", by: .seconds(60))?.duration == .seconds(240))
        #expect(model.failure == nil)

        #expect(await model.pause("coffee") == nil)
        let missing = try #require(model.failure)
        #expect(missing.action == .pause && missing.key == "coffee" && missing.error.code == .notFound)
        #expect(missing.message.contains("'coffee'"), "\(missing.message)")
        #expect(await model.start("eggs", duration: .zero, group: "kitchen") == nil)
        #expect(model.failure?.error.code == .invalidDuration && model.failure?.id != missing.id)
        #expect(await model.start("<b>", duration: .seconds(1), group: String(repeating: "g", count: 200)) == nil)
        #expect(model.failure?.error.code == .invalidGroup)
        model.dismissFailure()
        #expect(model.failure == nil)
        #expect(try await following.store.list(.all).map(\.key) == ["tea"], "refusals changed nothing")

        #expect(await model.cancel("tea")?.state == .cancelled)
        #expect(model.rows.map(\.state) == [.cancelled] && model.rows.first?.isCounting == false)
        try await following.stop()
    }

    @Test("A model of keys follows them in any state, in list's order; one of a state filter only that state")
    func selections() async throws {
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        let following = try await Following(.keys(["b", "a", "gone", "w"]), beat: .seconds(1)) { store in
            try await store.start("a", duration: .seconds(50))
            try await store.start("b", duration: .seconds(20))
            try await store.startStopwatch("w")
            try await store.start("c", duration: .seconds(10))
        }
        let model = following.model
        try await eventuallyOnMain("the rows") { model.rows.count == 3 }
        #expect(model.rows.map(\.key) == ["b", "a", "w"])
        _ = await model.cancel("b")
        #expect(model.rows.map(\.key) == ["a", "w", "b"], "ended last")
        await following.running.advance(following.fixture.clock, by: .seconds(2))
        try await eventuallyOnMain("a beat") { model.lastBeat != nil }
        #expect(model.rows.map(\.key) == ["a", "w", "b"])
        try await following.stop()

        let paused = try await Following(.items(state: .paused), beat: .seconds(1)) { store in
            try await store.start("p", duration: .seconds(50))
            try await store.pause("p")
            try await store.start("r", duration: .seconds(50))
        }
        try await eventuallyOnMain("the paused row") { paused.model.rows.map(\.key) == ["p"] }
        await paused.running.advance(paused.fixture.clock, by: .seconds(2))
        try await eventuallyOnMain("a beat") { paused.model.lastBeat != nil }
        #expect(paused.model.rows.map(\.key) == ["p"] && !paused.model.needsBeat)
        try await paused.stop()
    }

    @Test("The lifecycle opens its store in the app's own folder in Application Support, and a second launch finds the countdowns")
    func opensInApplicationSupport() async throws {
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        let name = "countdowns-\(UUID().uuidString).sqlite"
        let support = try FileManager.default.url(for: .applicationSupportDirectory, in: .userDomainMask, appropriateFor: nil, create: true)
        let folder = try CountdownAppLifecycle.defaultFolder()
        #expect(folder.deletingLastPathComponent().standardizedFileURL == support.standardizedFileURL)
        #expect(folder.lastPathComponent == (Bundle.main.bundleIdentifier ?? ProcessInfo.processInfo.processName))
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(at: folder.appendingPathComponent(name + suffix)) }
        }
        let first = try CountdownAppLifecycle(fileName: name)
        #expect(first.store.path == folder.appendingPathComponent(name).path && FileManager.default.fileExists(atPath: folder.appendingPathComponent(name).path))
        #expect(!FileManager.default.fileExists(atPath: support.appendingPathComponent(name).path), "nothing straight in Application Support")
        try await first.store.start("order", duration: .seconds(900))
        await first.close()
        let second = try CountdownAppLifecycle(fileName: name)
        #expect(try await second.store.countdown("order")?.state == .running)
        await second.close()
    }

    @Test("A store an earlier version left straight in Application Support moves into the app's folder with its countdowns; one with a write-ahead log stays until closed")
    func movesTheStoreOfAnEarlierVersion() async throws {
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        let name = "countdowns-\(UUID().uuidString).sqlite"
        let support = try FileManager.default.url(for: .applicationSupportDirectory, in: .userDomainMask, appropriateFor: nil, create: true)
        let legacy = support.appendingPathComponent(name).path
        let moved = try CountdownAppLifecycle.defaultFolder().appendingPathComponent(name).path
        defer {
            for path in [legacy, moved] {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
        }
        // An earlier version's store, still open in another process: its log holds the countdown.
        let earlier = try CountdownStore(path: legacy)
        try await earlier.start("order", duration: .seconds(900))
        #expect(((try FileManager.default.attributesOfItem(atPath: legacy + "-wal"))[.size] as? NSNumber)?.intValue ?? 0 > 0)
        let whileOpen = try CountdownAppLifecycle(fileName: name)
        #expect(whileOpen.store.path == legacy, "a store with a log is used where it is")
        #expect(try await whileOpen.store.countdown("order")?.state == .running)
        await whileOpen.close()
        try await earlier.close()

        // Closed: it moves, whole, and nothing of it is left behind.
        let relaunched = try CountdownAppLifecycle(fileName: name)
        #expect(relaunched.store.path == moved)
        #expect(try await relaunched.store.countdown("order")?.state == .running)
        for suffix in ["", "-wal", "-shm"] {
            #expect(!FileManager.default.fileExists(atPath: legacy + suffix), "\(legacy + suffix) is gone")
        }
        await relaunched.close()
    }
}

extension RealProcesses {
    /// The model in a process of its own, and the tool writing the same store from another.
    @Suite("SwiftUI model and another process", .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)))
    @MainActor
    struct ModelAcrossProcesses {
        @Test("The model changes when another process starts, pauses and cancels a countdown")
        func changesFromAnotherProcess() async throws {
            guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
            let folder = try TemporaryFolder()
            let path = folder.path()
            let store = try CountdownStore(path: path)
            let model = CountdownListModel(store: store, selection: .items(state: .all))
            let following = Task { @MainActor in await model.follow() }
            let changes = ObservedChanges { _ = model.rows }
            for (arguments, expected) in [
                (["start", "order-7", "15m"], CountdownState.running),
                (["pause", "order-7"], .paused),
                (["cancel", "order-7"], .cancelled),
            ] {
                let before = changes.count
                let ran = try HelperProcess.run(countdownBinary, ["--db", path] + arguments)
                try #require(ran.status == 0, "\(ran.stderr)")
                try await eventuallyOnMain("the model sees \(arguments[0]) from the other process", limit: 10) {
                    model.rows.first?.state == expected
                }
                #expect(changes.count > before)
            }
            following.cancel()
            await following.value
            try await store.close()
        }
    }
}
