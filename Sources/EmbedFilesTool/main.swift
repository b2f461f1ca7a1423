import Foundation

// Usage: EmbedFilesTool OUTPUT.swift TYPE FILE...
// Writes a Swift file declaring `enum TYPE` whose `files` holds every FILE's name and exact
// text, in file-name order: files that travel inside the binary, read from nowhere at run time.

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: EmbedFilesTool OUTPUT.swift TYPE FILE...\n".utf8))
    exit(64)
}
let outputPath = arguments[0]
let typeName = arguments[1]
guard let first = typeName.unicodeScalars.first, CharacterSet.letters.contains(first),
    typeName.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) || $0 == "_" })
else {
    FileHandle.standardError.write(Data("error: \"\(typeName)\" is not a Swift type name\n".utf8))
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
    // Generated at build time by EmbedFilesTool. Do not edit: edit the files named below.

    /// Files embedded at build time, by file name, in file-name order.
    enum \(typeName) {
        /// Each file's name and exact text.
        static let files: [(name: String, text: String)] = [

    """
for path in arguments.dropFirst(2).sorted(by: {
    ($0 as NSString).lastPathComponent < ($1 as NSString).lastPathComponent
}) {
    let name = (path as NSString).lastPathComponent
    guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
        FileHandle.standardError.write(Data("error: \(path) is not readable UTF-8 text\n".utf8))
        exit(1)
    }
    source += "        (name: \(swiftLiteral(name)), text: \(swiftLiteral(text))),\n"
}
source += "    ]\n}\n"

do {
    try Data(source.utf8).write(to: URL(fileURLWithPath: outputPath), options: .atomic)
} catch {
    FileHandle.standardError.write(Data("error: cannot write \(outputPath): \(error)\n".utf8))
    exit(1)
}
