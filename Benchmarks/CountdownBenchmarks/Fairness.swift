import CountdownStore
import Foundation

// A small group's deadline beside a big group's backlog: how late one countdown of group `vip`,
// due 1 s after the instant `count` countdowns of group `sale` came due, is recorded and
// delivered to a consumer of its own group, with the ticker of this process draining the sale.

extension Benchmarks {
    func smallGroupBesideBacklog() async throws -> [Figure] {
        var figures: [Figure] = []
        for count in sizes.mass {
            settle()
            let store = try CountdownStore(path: try await emptyStore("mass-fair-\(count).sqlite"))
            // The sale, started in batches, every one due at one instant once all are in.
            let batch = 10_000
            let started = ContinuousClock.now
            let spanMs: Int64 = count > 100_000 ? 120_000 : count > 10_000 ? 20_000 : 5_000
            for first in stride(from: 0, to: count, by: batch) {
                let elapsed = Int64((ContinuousClock.now - started).seconds * 1000)
                let requests = (first..<min(count, first + batch)).map { index in
                    CountdownRequest.countdown("sale-\(index)", duration: .milliseconds(max(1, spanMs - elapsed)), group: "sale")
                }
                try await store.start(requests)
            }
            let insertMs = Int64((ContinuousClock.now - started).seconds * 1000)
            guard insertMs < spanMs - 2_000 else { throw BenchmarkError("starting \(count) took \(insertMs) ms") }
            let saleDue = spanMs - insertMs
            try await store.start("vip-1", duration: .milliseconds(saleDue + 1_000), group: "vip")
            let ticker = CountdownTicker(store: store)
            let running = Task { try await ticker.run() }
            let vip = try await store.consumer("vip")
            var expiries = try await vip.events(EventFilter(kinds: [.expired], group: "vip")).makeAsyncIterator()
            guard let expiry = try await expiries.next() else { throw BenchmarkError("no vip expiry") }
            let deliveredAt = Date()
            try await vip.acknowledge(expiry)
            let recordedLate = (expiry.late ?? .zero).seconds * 1000
            let deliveredLate = deliveredAt.timeIntervalSince(expiry.deadlineAt ?? deliveredAt) * 1000
            running.cancel()
            _ = await running.result
            try await store.close()
            log(String(format: "  %d due at once: the vip expiry recorded %.0f ms late, delivered %.0f ms after its deadline", count, recordedLate, deliveredLate))
            figures += [
                Figure(
                    name: "a small group's expiry due 1 s after \(count) of another group: recorded late", n: count,
                    ours: recordedLate, raw: nil, unit: "ms", target: .unjudged),
                Figure(
                    name: "a small group's expiry due 1 s after \(count) of another group: delivered after its deadline",
                    n: count, ours: deliveredLate, raw: nil, unit: "ms", target: .unjudged),
            ]
        }
        return figures
    }
}
