import CountdownStore
import Foundation

// A minimal entry point: opens the store named by --db, $COUNTDOWN_DB or the default path,
// and prints what it holds.

func defaultDatabasePath() -> String {
    let environment = ProcessInfo.processInfo.environment
    if let path = environment["COUNTDOWN_DB"], !path.isEmpty { return path }
    let dataHome = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
        ?? (NSHomeDirectory() as NSString).appendingPathComponent(".local/share")
    return (dataHome as NSString).appendingPathComponent("countdown/countdowns.sqlite")
}

var arguments = Array(CommandLine.arguments.dropFirst())
var path = defaultDatabasePath()
if let index = arguments.firstIndex(of: "--db"), index + 1 < arguments.count {
    path = arguments[index + 1]
    arguments.removeSubrange(index...index + 1)
}

do {
    try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    let store = try CountdownStore(path: path)
    let counts = try await store.counts()
    print("\(path): \(counts.count(.running)) running, \(counts.count(.paused)) paused, \(counts.count(.expired)) expired, \(counts.count(.cancelled)) cancelled")
    try await store.close()
} catch let error as CountdownError {
    FileHandle.standardError.write(Data("countdown: \(error.message)\n".utf8))
    exit(error.code.category == .invalidInput ? 64 : 74)
} catch {
    FileHandle.standardError.write(Data("countdown: \(error)\n".utf8))
    exit(70)
}
