import CountdownStoreCore
import Foundation
import HTTPTypes
import Hummingbird

/// `GET api/stream`: every event of the store as server-sent events, from this process and
/// every other one writing the store, live from the moment the stream opens.
///
/// Each event is one message without an event name (so a browser's `onmessage` gets them all):
/// `id:` the event ID, `data:` the event as JSON. A comment every 15 s keeps proxies from
/// closing an idle stream. A stream ends after ``EventStream/lifetime`` (the browser reconnects
/// at once and reloads what it shows), when the server stops, and when the client falls more
/// than 4,096 events behind: nothing it holds grows without bound.
struct EventStream: Sendable {
    let store: CountdownStore
    let stopping: StopSignal
    /// How long one stream lasts before the client is asked to reconnect.
    var lifetime: Duration = .seconds(300)
    /// How often an idle stream sends a comment.
    var keepAlive: Duration = .seconds(15)

    private enum Chunk: Sendable {
        case event(CountdownEvent)
        case comment
    }

    func response() async throws -> Response {
        let events = try await store.events(.all)
        let (stream, continuation) = AsyncStream<Chunk>.makeStream(bufferingPolicy: .bufferingOldest(4096))
        let (stopping, lifetime, keepAlive) = (stopping, lifetime, keepAlive)
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("X-Accel-Buffering")!] = "no"
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                let producer = Task {
                    await withTaskGroup(of: Void.self) { group in
                        group.addTask {
                            do {
                                for try await event in events {
                                    // A client that fell this far behind reconnects and reloads.
                                    if case .dropped = continuation.yield(.event(event)) { return }
                                }
                            } catch {
                                return
                            }
                        }
                        group.addTask {
                            while (try? await Task.sleep(for: keepAlive)) != nil {
                                continuation.yield(.comment)
                            }
                        }
                        group.addTask { try? await Task.sleep(for: lifetime) }
                        group.addTask { await stopping.wait() }
                        await group.next()
                        group.cancelAll()
                    }
                    continuation.finish()
                }
                defer { producer.cancel() }
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                try await writer.write(ByteBuffer(string: "retry: 1000\n: connected\n\n"))
                for await chunk in stream {
                    switch chunk {
                    case .comment:
                        try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                    case .event(let event):
                        let data = try encoder.encode(EventJSON(event: event))
                        var buffer = ByteBuffer(string: "id: \(event.id)\ndata: ")
                        buffer.writeBytes(data)
                        buffer.writeString("\n\n")
                        try await writer.write(buffer)
                    }
                }
                try await writer.finish(nil)
            })
    }
}

/// Set once when the server stops: open streams end at once instead of holding the stop back.
final class StopSignal: Sendable {
    private let stopped = Locked(false)

    init() {}

    func stop() {
        stopped.withLock { $0 = true }
    }

    var isStopped: Bool { stopped.withLock { $0 } }

    /// Returns once ``stop()`` was called (polled every 100 ms), or when the task is cancelled.
    func wait() async {
        while !isStopped {
            guard (try? await Task.sleep(for: .milliseconds(100))) != nil else { return }
        }
    }
}
