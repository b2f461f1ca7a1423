import ArgumentParser
import CountdownStore
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How the tool writes its log lines on stderr (`--log-format`).
enum LogFormat: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// `journal` when stderr is the journal (`$JOURNAL_STREAM` names it), else `text`.
    case auto
    /// `2026-03-01T09:26:32.700Z warning countdown: message key=value`.
    case text
    /// One JSON object per line: `time`, `level`, `label`, `message`, and `metadata` when there is any.
    case json
    /// For journald: the level as a syslog priority prefix (`<4>`), no timestamp of its own.
    case journal

    /// `auto` made concrete for this process: `journal` when `$JOURNAL_STREAM` names stderr.
    func resolved(environment: [String: String] = ProcessInfo.processInfo.environment) -> LogFormat {
        guard self == .auto else { return self }
        return Self.stderrIsJournal(environment["JOURNAL_STREAM"]) ? .journal : .text
    }

    /// Whether `journalStream` (`DEV:INODE`, systemd.exec(5)) is the device and inode of fd 2:
    /// systemd connected stderr to the journal, and it was not redirected since.
    static func stderrIsJournal(_ journalStream: String?) -> Bool {
        guard let journalStream else { return false }
        let parts = journalStream.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var status = stat()
        guard fstat(2, &status) == 0 else { return false }
        return UInt64(truncatingIfNeeded: status.st_dev) == device && UInt64(truncatingIfNeeded: status.st_ino) == inode
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// The process-wide log settings, set from the global options before any line is written.
struct ToolLogSettings: Sendable {
    /// The format, never `auto`.
    var format: LogFormat = LogFormat.auto.resolved()
    /// The least severe level written.
    var level: Logger.Level = .warning

    /// The settings of this process.
    static let current = Locked(ToolLogSettings())
}

/// The tool's log handler: every line on stderr (stdout is the tool's output), in the format and
/// from the level of ``ToolLogSettings/current``.
struct ToolLogHandler: LogHandler {
    let label: String
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    /// A level set on this logger alone; nil: the process-wide level.
    private var ownLevel: Logger.Level?

    init(label: String) {
        self.label = label
    }

    var logLevel: Logger.Level {
        get { ownLevel ?? ToolLogSettings.current.withLock { $0.level } }
        set { ownLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let explicit = event.metadata { merged.merge(explicit) { $1 } }
        if let error = event.error { merged["error"] = "\(error)" }
        let format = ToolLogSettings.current.withLock { $0.format }
        let line = Self.line(
            format: format, level: event.level, label: label, message: "\(event.message)", metadata: merged,
            time: Date())
        Self.output.withLock { _ in FileHandle.standardError.write(Data(line.utf8)) }
    }

    /// Serializes the writes, so that the lines of two threads never interleave.
    private static let output = Locked(())

    /// One record as a line (with its newline) in `format`.
    static func line(
        format: LogFormat, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata, time: Date
    ) -> String {
        switch format {
        case .json:
            var fields: [(String, JSON)] = [
                ("time", .string(StoreTime.iso8601(time))), ("level", .string(level.rawValue)),
                ("label", .string(label)), ("message", .string(message)),
            ]
            if !metadata.isEmpty { fields.append(("metadata", json(.dictionary(metadata)))) }
            return JSON.object(fields).text + "\n"
        case .journal:
            return "<\(priority(level))>" + oneLine(message) + pairs(metadata) + "\n"
        case .text, .auto:
            return "\(StoreTime.iso8601(time)) \(level) \(label): " + oneLine(message) + pairs(metadata) + "\n"
        }
    }

    /// The syslog priority of `level` (sd-daemon(3)).
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// ` key=value …`, sorted by key; a value with spaces, quotes or `=` in quotes.
    private static func pairs(_ metadata: Logger.Metadata) -> String {
        metadata.sorted { $0.key < $1.key }.map { key, value in
            let text = oneLine("\(value)")
            let plain = !text.isEmpty && !text.contains { $0 == " " || $0 == "\"" || $0 == "=" }
            let shown =
                plain
                ? text
                : "\""
                    + text.replacingOccurrences(of: "\\", with: "\\\\")
                    .replacingOccurrences(of: "\"", with: "\\\"") + "\""
            return " \(oneLine(key))=\(shown)"
        }.joined()
    }

    /// `text` on one line: line breaks written as `\n` and `\r`, so that a record is never split.
    private static func oneLine(_ text: String) -> String {
        guard text.contains(where: { $0.isNewline }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\u{0B}", "\u{0C}", "\u{85}", "\u{2028}", "\u{2029}": out += " "
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// A metadata value as JSON: strings stay strings, lists arrays and dictionaries objects.
    private static func json(_ value: Logger.MetadataValue) -> JSON {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible): .string(convertible.description)
        case .array(let values): .array(values.map(json))
        case .dictionary(let fields): .object(fields.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) })
        }
    }
}
