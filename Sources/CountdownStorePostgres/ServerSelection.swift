import CountdownStoreCore
import Foundation
import Logging
import PostgresNIO

/// The server a store works with, picked from the servers its connection string names, and the
/// connection pool on it; or the host's own client, which it leaves alone.
///
/// A server is picked as libpq picks one: the servers are tried in order (or at random with
/// `load_balance_hosts=random`), each within the connect timeout, and the first that answers
/// and meets `target_session_attrs` is taken. It is picked again when a server refuses a write
/// as read-only (a primary demoted to a standby), when a statement gets no answer within the
/// engine's bound (a silent network path), and, with several servers, when a connection is
/// lost: so that the store follows a failover, whether the string lists the servers or one
/// address moves to the new primary. Until then every transaction uses the chosen pool.
final class ServerSelection: @unchecked Sendable {
    // Safe: the mutable state below is only touched under `lock`.

    /// The pool in use, on the server picked.
    struct Current: Sendable {
        let client: PostgresClient
        /// The task running an owned pool (`nil` for the host's client).
        let runner: ClientRunner?
        /// The server picked (`nil` for the host's client).
        let server: PostgresConnectionString.Server?
        /// Counts pools, so that a failure reported on an older one does not drop a newer one.
        let generation: Int
    }

    /// Why no server could be used: each server tried, and what it answered.
    struct NoServer: Error, CustomStringConvertible {
        let attempts: [(server: String, reason: String, final: Bool)]
        /// Whether every server refused for a reason that trying again does not cure (TLS or
        /// authentication), so that an opening fails at once, saying so.
        var isFinal: Bool { !attempts.isEmpty && attempts.allSatisfy(\.final) }
        var description: String {
            attempts.map { "\($0.server): \($0.reason)" }.joined(separator: "; ")
        }
    }

    private let lock = NSLock()
    private let target: PostgresConnectionString?
    private let extraParameters: [(String, String)]
    private let logger: Logger
    private var current: Current?
    private var generation = 0
    /// Set when the pool in use must be replaced (or confirmed) before the next transaction.
    private var stale = false
    /// Set once a server refused a write as read-only: from then on only a writable one is taken.
    private var needsWritable = false
    private var selecting: Task<Current, any Error>?
    private var abandoned = false

    /// A selection among the servers of `target`; nothing is connected until first use.
    init(target: PostgresConnectionString, extraParameters: [(String, String)], logger: Logger) {
        self.target = target
        self.extraParameters = extraParameters
        self.logger = logger
    }

    /// The host's client, used as it is.
    init(client: PostgresClient, logger: Logger) {
        target = nil
        extraParameters = []
        self.logger = logger
        current = Current(client: client, runner: nil, server: nil, generation: 0)
    }

    /// The server picked, for `doctor` (`nil` for the host's client or before the first pick).
    var server: PostgresConnectionString.Server? { lock.withLock { current?.server } }

    /// Runs `body` with a connection of the pool in use (picking a server first if needed); a
    /// failure that says the server is gone or refuses writes marks the pick for renewal.
    func withConnection<T: Sendable>(_ body: @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let current = try await pool()
        // A pool whose server went away keeps trying to connect to it, and a lease waits
        // meanwhile: a lease not granted within the connect timeout has the servers tried again
        // (in the background: the lease goes on waiting, and fails only if another server is taken).
        var recheck: DispatchWorkItem?
        if let target {
            let generation = current.generation
            let item = DispatchWorkItem { [weak self] in self?.pickAgain(ifStillOn: generation) }
            DispatchQueue.global().asyncAfter(
                deadline: .now() + .milliseconds(Int(target.connectTimeout.components.seconds) * 1000), execute: item)
            recheck = item
        }
        do {
            return try await current.client.withConnection { connection in
                recheck?.cancel()
                do {
                    return try await body(connection)
                } catch {
                    // A server that refuses writes as read-only keeps doing so: this connection goes.
                    if Self.isReadOnly(error) { connection.close().whenComplete { _ in } }
                    throw error
                }
            }
        } catch {
            recheck?.cancel()
            failed(error, on: current)
            throw error
        }
    }

    /// Tries the servers again in the background, if the pool of `generation` is still in use
    /// and no pick is under way.
    private func pickAgain(ifStillOn generation: Int) {
        lock.withLock {
            guard !abandoned, current?.generation == generation, selecting == nil else { return }
            stale = true
            selecting = Task { try await self.pick() }
        }
    }

    /// Stops the pools this selection owns and any pick under way.
    func abandon() {
        let (runner, task) = lock.withLock { () -> (ClientRunner?, Task<Current, any Error>?) in
            abandoned = true
            return (current?.runner, selecting)
        }
        runner?.stop()
        task?.cancel()
    }

    // MARK: Picking

    private func pool() async throws -> Current {
        enum Next { case use(Current), wait(Task<Current, any Error>) }
        let next: Next = try lock.withLock {
            if abandoned { throw WaitAbandoned(reason: "the store closed without waiting any longer") }
            if let current, !stale { return .use(current) }
            if let selecting { return .wait(selecting) }
            let task = Task { try await self.pick() }
            selecting = task
            return .wait(task)
        }
        switch next {
        case .use(let current): return current
        case .wait(let task): return try await task.value
        }
    }

    /// Tries the servers and installs the pool on the one taken (keeping the pool in use when
    /// the same server is taken again).
    private func pick() async throws -> Current {
        guard let target else {
            // The host's client: nothing to pick.
            return try lock.withLock {
                selecting = nil
                stale = false
                guard let current else { throw WaitAbandoned(reason: "no client") }
                return current
            }
        }
        let writable = lock.withLock { needsWritable } || target.targetSessionAttributes != .any
        let requirement: PostgresConnectionString.TargetSessionAttributes =
            target.targetSessionAttributes == .any && writable ? .readWrite : target.targetSessionAttributes
        var order = target.servers
        if target.loadBalance { order.shuffle() }
        var attempts: [(server: String, reason: String, final: Bool)] = []
        var chosen: (server: PostgresConnectionString.Server, mode: PostgresConnectionString.SSLMode)?
        for server in order {
            if Task.isCancelled { break }
            do {
                let mode = try await probe(server, target: target, requirement: requirement)
                chosen = (server, mode)
                break
            } catch let refusal as ServerRefused {
                attempts.append((server.description, refusal.reason, false))
            } catch {
                let (reason, final) = Self.describe(connectFailure: error)
                attempts.append((server.description, reason, final))
            }
        }
        var configuration: PostgresClient.Configuration?
        var configurationError: (any Error)?
        if let chosen {
            do {
                configuration = try target.clientConfiguration(
                    for: chosen.server, tls: chosen.mode, extraParameters: extraParameters)
            } catch {
                configurationError = error
            }
        }
        return try lock.withLock {
            selecting = nil
            if let configurationError { throw configurationError }
            guard let chosen, let configuration, !abandoned else {
                if abandoned { throw WaitAbandoned(reason: "the store closed without waiting any longer") }
                throw NoServer(attempts: attempts)
            }
            stale = false
            if let current, current.server == chosen.server { return current }
            let old = current
            generation += 1
            let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
            let next = Current(
                client: client, runner: ClientRunner(client), server: chosen.server, generation: generation)
            current = next
            if let old {
                logger.warning(
                    "moved to another PostgreSQL server",
                    metadata: ["from": "\(old.server.map(\.description) ?? "-")", "to": "\(chosen.server)"])
                old.runner?.stop()
            }
            return next
        }
    }

    /// Connects to `server` once, checks what `requirement` asks, and returns the TLS mode that
    /// worked (``PostgresConnectionString/SSLMode/allow`` tries without TLS first).
    private func probe(
        _ server: PostgresConnectionString.Server, target: PostgresConnectionString,
        requirement: PostgresConnectionString.TargetSessionAttributes
    ) async throws -> PostgresConnectionString.SSLMode {
        var modes = [target.sslMode]
        if target.sslMode == .allow { modes = [.disable, .require] }
        var lastError: (any Error)?
        for mode in modes {
            let connection: PostgresConnection
            do {
                connection = try await PostgresConnection.connect(
                    configuration: try target.connectionConfiguration(
                        for: server, tls: mode, extraParameters: extraParameters),
                    id: 0, logger: logger)
            } catch {
                lastError = error
                continue
            }
            // Closed before it goes: a connection must not end its life open.
            do {
                try await check(connection, requirement)
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
            return mode
        }
        throw lastError ?? ServerRefused(reason: "no connection")
    }

    /// Checks that the server on `connection` meets `requirement`.
    private func check(
        _ connection: PostgresConnection, _ requirement: PostgresConnectionString.TargetSessionAttributes
    ) async throws {
        guard requirement != .any else { return }
        let rows = try await connection.query(
            "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'", logger: logger)
        for try await (inRecovery, readOnly) in rows.decode((Bool, Bool).self) {
            if requirement == .primary, inRecovery {
                throw ServerRefused(reason: "a standby (in recovery), and a primary is wanted")
            }
            if requirement == .readWrite, readOnly {
                throw ServerRefused(reason: "read-only, and a server that takes writes is wanted")
            }
        }
    }

    /// Marks the pick for renewal if `error` says the server is gone or refuses writes.
    private func failed(_ error: any Error, on used: Current) {
        guard let target else { return }
        let readOnly = Self.isReadOnly(error)
        let silent = error is NoAnswer
        let lost = PostgresFailure(error, place: "").isTransient && !(error is WaitAbandoned) && !(error is NoServer)
        guard readOnly || silent || (lost && target.servers.count > 1) else { return }
        lock.withLock {
            guard current?.generation == used.generation else { return }
            stale = true
            if readOnly { needsWritable = true }
        }
    }

    /// Whether `error` is the server refusing a write because it is read-only (SQLSTATE 25006:
    /// `transaction_read_only`, a standby, or a primary that came back as one).
    static func isReadOnly(_ error: any Error) -> Bool {
        PostgresFailure(error, place: "").sqlState == "25006"
    }

    /// What a failed connection attempt says, in words, and whether trying again cannot cure it
    /// (a TLS or authentication failure).
    static func describe(connectFailure error: any Error) -> (String, Bool) {
        if let psql = error as? PSQLError {
            if let message = psql.serverInfo?[.message] {
                let state = psql.serverInfo?[.sqlState] ?? ""
                let final = state.hasPrefix("28") || state == "3D000"
                let what = state.hasPrefix("28") ? "authentication failed: " : ""
                return ("\(what)\(message) (SQLSTATE \(state))", final)
            }
            if psql.code == .sslUnsupported { return ("the server does not offer TLS, and sslmode asks for it", true) }
            if let underlying = psql.underlying {
                let text = String(describing: underlying)
                if underlying is NIOSSLError || text.contains("SSL") || text.contains("CERTIFICATE") {
                    return ("TLS failed: \(text)", true)
                }
                return (text, false)
            }
            return ("\(psql.code)", false)
        }
        if error is NIOSSLError { return ("TLS failed: \(error)", true) }
        return ("\(error)", false)
    }
}

/// A server that answered but does not meet `target_session_attrs`.
private struct ServerRefused: Error {
    let reason: String
}
