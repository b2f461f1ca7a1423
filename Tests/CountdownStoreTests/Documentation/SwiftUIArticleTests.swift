import Foundation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite
@testable import CountdownStoreUI

#if canImport(SwiftUI)
import SwiftUI
#endif

// The code of the article "Countdowns in a SwiftUI app": its plain part compiled and run here,
// its views compiled wherever SwiftUI exists.

/// The app's countdowns: the order deadlines and the time on screen, with no SwiftUI in them.
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
@MainActor
final class OrderCountdowns {
    let lifecycle: CountdownAppLifecycle
    /// The orders waiting for payment, soonest deadline first.
    let orders: CountdownListModel
    /// A stopwatch of the time the app spends on screen.
    let timeOnScreen: CountdownListModel

    /// Opens the store in Application Support (or in `folder`).
    init(folder: URL? = nil) throws {
        lifecycle = try CountdownAppLifecycle(folder: folder)
        orders = lifecycle.model(.group("orders"))
        timeOnScreen = lifecycle.model(.keys(["time-on-screen"]))
    }

    /// At launch: the ticker, and the stopwatch, started once and found again by key afterwards.
    func launch() async {
        lifecycle.start()
        if (try? await lifecycle.store.countdown("time-on-screen")) == nil {
            await timeOnScreen.startStopwatch("time-on-screen", policy: .active)
        }
    }

    /// A new order has fifteen minutes to be paid.
    func placeOrder(_ number: Int) async {
        await orders.start("order-\(number)", duration: .seconds(15 * 60), group: "orders")
    }
}

#if canImport(SwiftUI)
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
struct OrdersView: View {
    let countdowns: OrderCountdowns
    @State private var nextOrder = 1042

    var body: some View {
        NavigationStack {
            List {
                Section("Time on screen") {
                    ForEach(countdowns.timeOnScreen.rows) { row in
                        Text(timerOf: row).monospacedDigit()
                    }
                }
                Section("Orders") {
                    ForEach(countdowns.orders.rows) { row in
                        HStack {
                            Text(row.key)
                            Spacer()
                            Text(timerOf: row).monospacedDigit()
                        }
                        .swipeActions {
                            Button("Cancel", role: .destructive) {
                                Task { await countdowns.orders.cancel(row.key) }
                            }
                        }
                    }
                }
            }
            .navigationTitle("Orders")
            .toolbar {
                Button("New order") {
                    let number = nextOrder
                    nextOrder += 1
                    Task { await countdowns.placeOrder(number) }
                }
            }
            .alert(
                "Refused",
                isPresented: Binding(
                    get: { countdowns.orders.failure != nil },
                    set: { if !$0 { countdowns.orders.dismissFailure() } })
            ) {
                Button("OK") {}
            } message: {
                Text(countdowns.orders.failure?.message ?? "")
            }
        }
        .task { await countdowns.orders.follow() }
        .task { await countdowns.timeOnScreen.follow() }
    }
}
#endif

@Suite("Article: Countdowns in a SwiftUI app")
@MainActor
struct SwiftUIArticleTests {
    @Test("The app's countdowns: orders with deadlines, the time on screen counting only in the foreground, across a relaunch", .timeLimit(.minutes(5)))
    func ordersApp() async throws {
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        let folder = try TemporaryFolder()
        let countdowns = try OrderCountdowns(folder: folder.url)
        let following = [
            Task { @MainActor in await countdowns.orders.follow() },
            Task { @MainActor in await countdowns.timeOnScreen.follow() },
        ]
        await countdowns.launch()
        await countdowns.placeOrder(1042)
        await countdowns.placeOrder(1043)
        try await eventuallyOnMain("the rows") {
            countdowns.orders.rows.map(\.key) == ["order-1042", "order-1043"] && countdowns.timeOnScreen.rows.count == 1
        }
        #expect(countdowns.orders.rows.allSatisfy { $0.isCounting && $0.pauseTime == nil && $0.countsDown })
        let stopwatch = try #require(countdowns.timeOnScreen.rows.first)
        #expect(stopwatch.item.kind == .stopwatch && !stopwatch.countsDown && stopwatch.item.policy == .active)

        // The same order again is refused, as a value the alert shows.
        await countdowns.placeOrder(1042)
        #expect(countdowns.orders.failure?.error.code == .alreadyActive)
        #expect(countdowns.orders.failure?.message.contains("order-1042") == true)

        await countdowns.lifecycle.phaseChanged(to: .background)
        try await eventuallyOnMain("the stopwatch stands still in the background") {
            countdowns.timeOnScreen.rows.first?.pauseTime != nil
        }
        #expect(countdowns.orders.rows.allSatisfy { $0.isCounting }, "the deadlines keep counting")
        await countdowns.lifecycle.phaseChanged(to: .active)
        try await eventuallyOnMain("the stopwatch counts again") { countdowns.timeOnScreen.rows.first?.isCounting == true }

        for task in following { task.cancel() }
        for task in following { await task.value }
        await countdowns.lifecycle.close()

        // Launched again: the stopwatch is found by key, not started twice.
        let relaunched = try OrderCountdowns(folder: folder.url)
        await relaunched.launch()
        #expect(relaunched.timeOnScreen.failure == nil)
        #expect(try await relaunched.lifecycle.store.list(.all).map(\.key).sorted() == ["order-1042", "order-1043", "time-on-screen"])
        await relaunched.lifecycle.close()
    }

    @Test("README's taste: the lifecycle in Application Support and a model of a group", .timeLimit(.minutes(5)))
    func readmeTaste() async throws {
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        let fileName = "countdowns-\(UUID().uuidString).sqlite"
        let created = try CountdownAppLifecycle(fileName: fileName)
        let path = try #require(created.store.path)
        await created.close()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        try await readmeCode(CountdownAppLifecycle(fileName: fileName))
    }

    /// README's lines, with the lifecycle it opens handed in (README opens the default file).
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    private func readmeCode(_ made: @autoclosure () throws -> CountdownAppLifecycle) async throws {
        func CountdownAppLifecycle() throws -> CountdownStoreUI.CountdownAppLifecycle { try made() }
        let lifecycle = try CountdownAppLifecycle()  // the store in the app's folder, and its ticker
        lifecycle.start()
        let orders = lifecycle.model(.group("orders"))  // rows sorted as `list` sorts them, kept up to date
        #expect(await orders.start("order-1042", duration: .seconds(900), group: "orders") != nil)
        #expect(orders.rows.map(\.key) == ["order-1042"])
        await lifecycle.close()
    }
}
