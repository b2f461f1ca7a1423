import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// How long a client may take at each step of a connection before the server closes it.
///
/// Each client holds a connection, its buffers and a task only as long as it keeps the
/// exchange moving: a client that opens a connection and sends half a request, sends its body a
/// byte at a time, keeps a connection open between requests, or stops reading what the server
/// sends, is closed after these limits, whatever it does next.
public struct ConnectionLimits: Sendable, Hashable {
    /// From the connection's start, or the end of the previous answer, until a whole request
    /// head has arrived. nginx's `client_header_timeout` is 60 s.
    public var requestHead: Duration
    /// From the request head until the end of its body.
    public var requestBody: Duration
    /// How long the server's writes may stay blocked because the client reads nothing: an
    /// event stream whose client stopped reading is dropped after this.
    public var stalledWrite: Duration

    /// Limits of the given durations.
    public init(
        requestHead: Duration = .seconds(10), requestBody: Duration = .seconds(30),
        stalledWrite: Duration = .seconds(10)
    ) {
        self.requestHead = requestHead
        self.requestBody = requestBody
        self.stalledWrite = stalledWrite
    }

    /// 10 s for a request head, 30 s for a body, 10 s of writes blocked by a client that does not read.
    public static let standard = ConnectionLimits()

    /// The handler that applies these limits to one connection, for Hummingbird's
    /// `.http1(additionalChannelHandlers:)`.
    public func handler() -> any RemovableChannelHandler {
        ConnectionGuard(limits: self)
    }
}

/// Closes a connection whose client is too slow at any step (see ``ConnectionLimits``).
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let limits: ConnectionLimits
    private var requestTimer: Scheduled<Void>?
    private var stallTimer: Scheduled<Void>?
    /// Requests whose head arrived and whose answer has not ended yet.
    private var open = 0

    init(limits: ConnectionLimits) {
        self.limits = limits
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context, limits.requestHead) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context, limits.requestHead)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        requestTimer?.cancel()
        stallTimer?.cancel()
    }

    func channelInactive(context: ChannelHandlerContext) {
        requestTimer?.cancel()
        stallTimer?.cancel()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            open += 1
            arm(context, limits.requestBody)
        case .body:
            break
        case .end:
            requestTimer?.cancel()
            requestTimer = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            open = max(0, open - 1)
            if open == 0 { arm(context, limits.requestHead) }
        }
        context.write(data, promise: promise)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stallTimer?.cancel()
            stallTimer = nil
        } else if stallTimer == nil {
            stallTimer = schedule(context, limits.stalledWrite)
        }
        context.fireChannelWritabilityChanged()
    }

    private func arm(_ context: ChannelHandlerContext, _ limit: Duration) {
        requestTimer?.cancel()
        requestTimer = schedule(context, limit)
    }

    private func schedule(_ context: ChannelHandlerContext, _ limit: Duration) -> Scheduled<Void> {
        let channel = context.channel
        let (seconds, attoseconds) = limit.components
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        return context.eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) {
            channel.close(promise: nil)
        }
    }
}
