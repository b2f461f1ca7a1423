import CountdownStoreCore
import Foundation
import NIOCore

/// One reader of the store's events for every open event stream of a dashboard.
///
/// Each event is read from the store once and encoded once, however many streams are open:
/// N streams cost the store what one does. Each stream holds at most ``bufferBytes`` of events
/// its client has not taken yet; a stream whose client falls further behind is ended (the page
/// reconnects and reloads). At most ``capacity`` streams are open at once.
final class EventHub: Sendable {
    struct Subscriber {
        var continuation: AsyncStream<ByteBuffer>.Continuation
        var pendingBytes = 0
        var openedAt: ContinuousClock.Instant
    }

    private struct State {
        var subscribers: [Int: Subscriber] = [:]
        var nextID = 0
        var reader: Task<Void, Never>?
        var stopped = false
        /// Events read but not handed out yet: they go out together, one write per stream.
        var pending = ByteBuffer()
    }

    /// How long an event may wait to go out with the ones after it: a burst of expiries costs
    /// each stream one write per interval instead of one per event.
    static let batchInterval: Duration = .milliseconds(50)
    /// The most bytes of events held back for a batch.
    static let batchBytes = 64 * 1024

    let store: CountdownStore
    /// The most streams open at once.
    let capacity: Int
    /// The most bytes one stream holds for its client.
    let bufferBytes: Int
    /// How often every stream gets a comment, so that proxies keep an idle stream open.
    let keepAlive: Duration
    /// How long one stream lasts before it ends and its client reconnects.
    let lifetime: Duration
    private let state = Locked(State())

    init(
        store: CountdownStore, capacity: Int, bufferBytes: Int, keepAlive: Duration = .seconds(15),
        lifetime: Duration = .seconds(300)
    ) {
        self.store = store
        self.capacity = capacity
        self.bufferBytes = bufferBytes
        self.keepAlive = keepAlive
        self.lifetime = lifetime
    }

    /// A new subscription: its ID and its messages; `nil` when ``capacity`` streams are open.
    func subscribe() -> (id: Int, messages: AsyncStream<ByteBuffer>)? {
        let (messages, continuation) = AsyncStream<ByteBuffer>.makeStream(bufferingPolicy: .unbounded)
        let id: Int? = state.withLock { state in
            guard !state.stopped, state.subscribers.count < capacity else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = Subscriber(continuation: continuation, openedAt: .now)
            if state.reader == nil { state.reader = Task { [weak self] in await self?.run() } }
            return id
        }
        guard let id else {
            continuation.finish()
            return nil
        }
        continuation.onTermination = { [weak self] _ in self?.unsubscribe(id) }
        return (id, messages)
    }

    /// Tells the hub that `bytes` of a subscription's messages were handed to its client.
    func delivered(_ bytes: Int, to id: Int) {
        state.withLock { state in
            state.subscribers[id]?.pendingBytes -= bytes
        }
    }

    /// Ends a subscription.
    func unsubscribe(_ id: Int) {
        let ended = state.withLock { state -> Subscriber? in
            let subscriber = state.subscribers.removeValue(forKey: id)
            if state.subscribers.isEmpty {
                // Nobody listens: the reader stops, and what it held back is nobody's.
                state.reader?.cancel()
                state.reader = nil
                state.pending = ByteBuffer()
            }
            return subscriber
        }
        ended?.continuation.finish()
    }

    /// Ends every subscription; with `stopping`, refuses every later one (the server stops).
    func finishAll(stopping: Bool = false) {
        let all = state.withLock { state -> [Subscriber] in
            if stopping { state.stopped = true }
            defer {
                state.subscribers = [:]
                state.reader?.cancel()
                state.reader = nil
                state.pending = ByteBuffer()
            }
            return Array(state.subscribers.values)
        }
        for subscriber in all { subscriber.continuation.finish() }
    }

    /// While anyone subscribes: reads the store's events, and every ``keepAlive`` sends a
    /// comment and ends the streams older than ``lifetime``.
    private func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.read() }
            group.addTask {
                while (try? await Task.sleep(for: Self.batchInterval)) != nil { self.flush() }
            }
            group.addTask {
                while (try? await Task.sleep(for: self.keepAlive)) != nil {
                    self.publish(ByteBuffer(string: ": keep-alive\n\n"))
                    self.endExpired()
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func endExpired() {
        let now = ContinuousClock.now
        let expired = state.withLock { state -> [Subscriber] in
            let old = state.subscribers.filter { now - $0.value.openedAt >= lifetime }
            for id in old.keys { state.subscribers[id] = nil }
            return Array(old.values)
        }
        for subscriber in expired { subscriber.continuation.finish() }
    }

    /// Reads the store's events, and hands each, encoded, to every subscriber.
    private func read() async {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            for try await event in try await store.events(.all) {
                guard let data = try? encoder.encode(EventJSON(event: event)) else { continue }
                let full = state.withLock { state in
                    state.pending.writeString("id: \(event.id)\ndata: ")
                    state.pending.writeBytes(data)
                    state.pending.writeString("\n\n")
                    return state.pending.readableBytes >= Self.batchBytes
                }
                if full { flush() }
            }
        } catch {
            // The store closed or failed: every stream ends, and its page reconnects.
        }
        if !Task.isCancelled { finishAll() }
    }

    /// Hands the events held back to every subscriber, in one buffer.
    private func flush() {
        let batch = state.withLock { state -> ByteBuffer? in
            guard state.pending.readableBytes > 0 else { return nil }
            defer { state.pending = ByteBuffer() }
            return state.pending
        }
        if let batch { publish(batch) }
    }

    private func publish(_ buffer: ByteBuffer) {
        let size = buffer.readableBytes
        let (delivering, dropped) = state.withLock {
            state -> ([AsyncStream<ByteBuffer>.Continuation], [AsyncStream<ByteBuffer>.Continuation]) in
            var delivering: [AsyncStream<ByteBuffer>.Continuation] = []
            var dropped: [AsyncStream<ByteBuffer>.Continuation] = []
            for (id, subscriber) in state.subscribers {
                if subscriber.pendingBytes + size > bufferBytes {
                    state.subscribers[id] = nil
                    dropped.append(subscriber.continuation)
                } else {
                    state.subscribers[id]?.pendingBytes += size
                    delivering.append(subscriber.continuation)
                }
            }
            return (delivering, dropped)
        }
        for continuation in delivering { continuation.yield(buffer) }
        for continuation in dropped { continuation.finish() }
    }
}
