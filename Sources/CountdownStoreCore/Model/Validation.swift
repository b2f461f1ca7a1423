import Foundation

/// The input rules of SPEC section 7. Every public entry point runs its input through these
/// before touching the database, so refused input changes nothing.
enum Validate {
    static let maximumKeyBytes = 256
    static let maximumGroupBytes = 128
    /// 1 ms.
    static let minimumDurationMs: Int64 = 1
    /// 100 years of 365.25 days.
    static let maximumDurationMs: Int64 = 36_525 * 86_400_000

    /// A key: 1–256 bytes of UTF-8 after NFC normalization, no NUL or control characters.
    static func key(_ key: String) throws(CountdownError) -> String {
        try name(key, what: "key", maximumBytes: maximumKeyBytes, code: .invalidKey)
    }

    /// A named consumer's name: a key's rules, refused as an invalid argument that names it.
    static func consumerName(_ name: String) throws(CountdownError) -> String {
        try self.name(name, what: "consumer name", maximumBytes: maximumKeyBytes, code: .invalidArgument)
    }

    /// A group: 1–128 bytes of UTF-8 after NFC normalization, no NUL or control characters.
    static func group(_ group: String?) throws(CountdownError) -> String? {
        guard let group else { return nil }
        return try name(group, what: "group", maximumBytes: maximumGroupBytes, code: .invalidGroup)
    }

    private static func name(
        _ raw: String, what: String, maximumBytes: Int, code: CountdownError.Code
    ) throws(CountdownError) -> String {
        if raw.isEmpty {
            throw CountdownError(code, "invalid \(what) '': a \(what) must not be empty")
        }
        // Printable ASCII, the common case: no control characters, already NFC, one byte each.
        if raw.utf8.count <= maximumBytes, raw.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            return raw
        }
        if let bad = raw.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
            throw CountdownError(
                code,
                "invalid \(what) \(quoted(raw)): "
                    + "control character U+\(String(format: "%04X", bad.value)) is not allowed"
            )
        }
        // Swift compares strings by canonical equivalence, databases by bytes: storing NFC keeps them agreeing.
        let normalized = raw.precomposedStringWithCanonicalMapping
        let bytes = normalized.utf8.count
        if bytes > maximumBytes {
            throw CountdownError(
                code, "invalid \(what) \(quoted(raw)): \(bytes) bytes of UTF-8, at most \(maximumBytes) allowed")
        }
        return normalized
    }

    /// A payload of at most 64 KiB.
    static func payload(_ payload: CountdownPayload?) throws(CountdownError) -> CountdownPayload? {
        guard let payload else { return nil }
        if payload.byteCount > CountdownPayload.maximumBytes {
            throw CountdownError(
                .invalidPayload,
                "invalid payload: \(payload.byteCount) bytes, at most \(CountdownPayload.maximumBytes) allowed")
        }
        return payload
    }

    /// A duration from 1 ms to 100 years, rounded to whole milliseconds.
    static func duration(_ duration: Duration, what: String = "duration") throws(CountdownError) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let limitSeconds = maximumDurationMs / 1000
        guard seconds >= 0, attoseconds >= 0, seconds <= limitSeconds else {
            throw CountdownError(
                .invalidDuration, "invalid \(what) \(duration): must be between 1ms and 100 years")
        }
        let ms = seconds * 1000 + (attoseconds + 500_000_000_000_000) / 1_000_000_000_000_000
        guard ms >= minimumDurationMs, ms <= maximumDurationMs else {
            throw CountdownError(
                .invalidDuration, "invalid \(what) \(duration): must be between 1ms and 100 years")
        }
        return ms
    }

    /// A page size from 1 to 10,000.
    static func limit(_ limit: Int) throws(CountdownError) -> Int {
        guard (1...10_000).contains(limit) else {
            throw CountdownError(.invalidArgument, "invalid limit \(limit): must be between 1 and 10000")
        }
        return limit
    }
}
