import Foundation
import PostgresNIO
import Testing

@testable import CountdownStoreCore

extension RealProcesses {
    /// `countdown --version`: one version, the one CHANGELOG names, and the commit the binary was
    /// built from, the same in `--version`, `doctor`, `api/status` and PostgreSQL's
    /// `application_name`.
    @Suite("The tool's version", .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)))
    struct VersionTests {
        /// The package's root folder (this file is in Tests/CountdownStoreTests/Processes).
        static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()

        /// The commit the checkout is at, or `nil` outside a git checkout.
        static func head() throws -> String? {
            let git = try HelperProcess.run(
                URL(fileURLWithPath: "/usr/bin/git"), ["-C", root.path, "rev-parse", "HEAD"], limit: 30)
            guard git.status == 0 else { return nil }
            return git.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        @Test("The version is the newest one CHANGELOG.md names")
        func changelogNamesIt() throws {
            let changelog = try String(contentsOf: Self.root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
            let newest = changelog.split(separator: "\n").first { $0.hasPrefix("## ") && $0.dropFirst(3).first?.isNumber == true }
            let version = newest.map { $0.dropFirst(3).prefix { !$0.isWhitespace } }.map(String.init)
            #expect(version == CountdownStore.version, "CHANGELOG's newest heading: \(newest ?? "none")")
            #expect(CountdownStore.version.wholeMatch(of: /[0-9]+\.[0-9]+\.[0-9]+/) != nil)
        }

        @Test("--version names the version and the commit the binary was built from")
        func versionFlag() throws {
            let folder = try TemporaryFolder()
            let ran = try HelperProcess.run(countdownBinary, ["--version"], environment: ["XDG_DATA_HOME": folder.path("xdg")])
            #expect(ran.status == 0, "\(ran.stderr)")
            let line = ran.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let match = line.wholeMatch(of: /countdown ([0-9.]+) \(commit ([0-9a-f]{40})(-modified)?\)/)
            #expect(match?.output.1 == Substring(CountdownStore.version), "\(line)")
            if let head = try Self.head() {
                #expect(match.map { String($0.output.2) } == head, "built from \(head): \(line)")
            }
            // Nothing was opened or created: --version reads no database.
            #expect(!FileManager.default.fileExists(atPath: folder.path("xdg")))
        }

        @Test("doctor reports the version and the commit, in text and in JSON")
        func doctor() throws {
            let folder = try TemporaryFolder()
            let db = folder.path("v.sqlite")
            #expect(try HelperProcess.run(countdownBinary, ["--db", db, "start", "a", "1h"]).status == 0)
            let version = try HelperProcess.run(countdownBinary, ["--version"]).stdout
            let text = try HelperProcess.run(countdownBinary, ["--db", db, "doctor"])
            #expect(text.status == 0, "\(text.stderr)")
            let line = text.stdout.split(separator: "\n").first { $0.hasPrefix("version ") }
            #expect(line.map { "countdown " + $0.dropFirst(8).trimmingCharacters(in: .whitespaces) }
                == version.trimmingCharacters(in: .whitespacesAndNewlines), "\(text.stdout)")
            let json = try HelperProcess.run(countdownBinary, ["--db", db, "doctor", "--json"])
            let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
            #expect(object?["version"] as? String == CountdownStore.version, "\(json.stdout)")
            #expect(version.contains(object?["commit"] as? String ?? "nothing"), "\(json.stdout)")
        }

        @Test("On PostgreSQL the tool presents its version as application_name, unless told another")
        func applicationName() async throws {
            let server = try TestPostgres.shared()
            let url = server.url + "?sslmode=disable&schema=" + PostgresFixtures.newSchema()
            let running = try HelperProcess(["--db", url, "run"], executable: countdownBinary)
            defer { running.kill() }
            var names: [String] = []
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline, !names.contains(where: { $0.hasPrefix("countdown/") }) {
                names = try await server.withClient { client in
                    var names: [String] = []
                    let rows = try await client.query("SELECT application_name FROM pg_stat_activity")
                    for try await name in rows.decode(String.self) { names.append(name) }
                    return names
                }
                if running.process.isRunning == false { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let version = try HelperProcess.run(countdownBinary, ["--version"]).stdout
            let commit = version.firstMatch(of: /commit ([0-9a-f]{12})/).map { String($0.output.1) } ?? "?"
            let expected = "countdown/\(CountdownStore.version) (\(commit)"
            #expect(names.contains { $0.hasPrefix(expected) }, "\(names); stderr: \(running.stderr)")
            #expect(names.allSatisfy { $0.utf8.count <= 63 })
        }
    }
}
