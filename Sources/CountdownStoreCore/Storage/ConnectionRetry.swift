import Foundation
import Logging

/// The pauses between attempts after the database connection was lost (a ticker's, an event
/// reader's): 0.1 s, doubling up to 1 s, back to 0.1 s after an attempt that succeeds.
package struct ConnectionRetry: Sendable {
    /// The first pause.
    package static let firstDelayMs: Int64 = 100
    /// The longest pause.
    package static let longestDelayMs: Int64 = 1000

    /// How many attempts in a row failed.
    package private(set) var failures = 0
    private var delayMs = Self.firstDelayMs

    /// No attempt yet.
    package init() {}

    /// Records a failed attempt, logging it as a warning; returns the pause before the next.
    package mutating func failed(_ error: CountdownError, _ logger: Logger) -> Int64 {
        let pause = delayMs
        failures += 1
        logger.warning(
            "lost the database connection; trying again",
            metadata: ["error": "\(error)", "attempt": "\(failures)", "retry_in_ms": "\(pause)"])
        delayMs = min(Self.longestDelayMs, delayMs * 2)
        return pause
    }

    /// Records a successful attempt: after failures, says the connection is back.
    package mutating func succeeded(_ logger: Logger) {
        guard failures > 0 else { return }
        logger.info("connected to the database again", metadata: ["failed_attempts": "\(failures)"])
        failures = 0
        delayMs = Self.firstDelayMs
    }
}
