import Foundation

// Usage: EmbedMigrationsTool OUTPUT.swift [--import MODULE] MIGRATION.sql...
// Writes a Swift file holding every migration's file name and exact text, in file-name order
// (importing MODULE first: the module that defines `Migration`, for an engine of its own).

var arguments = CommandLine.arguments.dropFirst()
var importedModule: String?
if arguments.count >= 3, arguments[arguments.startIndex + 1] == "--import" {
    importedModule = arguments[arguments.startIndex + 2]
    arguments.remove(at: arguments.startIndex + 2)
    arguments.remove(at: arguments.startIndex + 1)
}
guard let outputPath = arguments.first else {
    FileHandle.standardError.write(Data("usage: EmbedMigrationsTool OUTPUT.swift MIGRATION.sql...\n".utf8))
    exit(64)
}

/// A Swift string literal that spells `text` exactly: every byte outside printable ASCII escaped.
func swiftLiteral(_ text: String) -> String {
    var literal = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\\": literal += "\\\\"
        case "\"": literal += "\\\""
        case "\n": literal += "\\n"
        case "\r": literal += "\\r"
        case "\t": literal += "\\t"
        case " "..."~": literal.unicodeScalars.append(scalar)
        default: literal += "\\u{\(String(scalar.value, radix: 16))}"
        }
    }
    return literal + "\""
}

var source = """
    // Generated at build time from Migrations/<engine>/*.sql. Do not edit.
    \(importedModule.map { "\nimport \($0)\n" } ?? "")

    extension Migration {
        /// Every migration of the engine's folder of `Migrations/`, in the order they apply.
        static let embedded: [Migration] = [

    """
for path in arguments.dropFirst().sorted(by: { ($0 as NSString).lastPathComponent < ($1 as NSString).lastPathComponent }) {
    let name = (path as NSString).lastPathComponent
    guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
        FileHandle.standardError.write(Data("error: \(path) is not readable UTF-8 text\n".utf8))
        exit(1)
    }
    source += "        Migration(name: \(swiftLiteral(name)), sql: \(swiftLiteral(text))),\n"
}
source += "    ]\n}\n"

do {
    try Data(source.utf8).write(to: URL(fileURLWithPath: outputPath), options: .atomic)
} catch {
    FileHandle.standardError.write(Data("error: cannot write \(outputPath): \(error)\n".utf8))
    exit(1)
}
