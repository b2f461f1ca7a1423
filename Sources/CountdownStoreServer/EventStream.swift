import CountdownStoreCore
import Foundation
import HTTPTypes
import Hummingbird

/// `GET api/stream`: every event of the store as server-sent events, from this process and
/// every other one writing the store, live from the moment the stream opens.
///
/// Each event is one message without an event name (so a browser's `onmessage` gets them all):
/// `id:` the event ID, `data:` the event as JSON. A comment every 15 s keeps proxies from
/// closing an idle stream. Every stream is fed by the dashboard's one ``EventHub``. A stream
/// ends after the hub's lifetime (the browser reconnects at once and reloads what it shows),
/// when the server stops, and when its client falls behind by more than the hub's buffer; at
/// most the hub's capacity of streams are open at once (beyond, 503 with `Retry-After`).
struct EventStream: Sendable {
    let hub: EventHub

    func response() throws -> Response {
        guard let (id, messages) = hub.subscribe() else {
            throw APIError(
                .serviceUnavailable, code: "tooManyStreams",
                "\(hub.capacity) event streams are open, the most this server keeps: try again later", retryAfter: 5)
        }
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("X-Accel-Buffering")!] = "no"
        let hub = hub
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                defer { hub.unsubscribe(id) }
                try await writer.write(ByteBuffer(string: "retry: 1000\n: connected\n\n"))
                for await buffer in messages {
                    // A client that reads nothing blocks this write; the connection's guard
                    // closes it (``ConnectionLimits/stalledWrite``), and the hub drops it.
                    try await writer.write(buffer)
                    hub.delivered(buffer.readableBytes, to: id)
                }
                try await writer.finish(nil)
            })
    }
}
