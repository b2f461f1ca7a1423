import Foundation
import Testing

extension RealProcesses {
    /// The HTTP API's contract, `openapi.json`: served as it is kept in the repository, a valid
    /// OpenAPI 3.1 document, and followed by a real `countdown serve`, as Schemathesis finds it
    /// with all its checks (generated valid and invalid requests, with and without the token).
    @Suite(
        "countdown serve: the OpenAPI contract",
        .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)),
        .timeLimit(.minutes(8)))
    struct ServerContractTests {
        static let token = "a-token-long-enough-for-the-contract"
        static let document = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("openapi.json")

        let folder: TemporaryFolder
        var db: String { folder.path("contract.sqlite") }

        init() throws {
            folder = try TemporaryFolder()
        }

        @Test(
            "GET /api/openapi.json is openapi.json of the repository, and a valid OpenAPI 3.1 document",
            .enabled(if: installed("openapi_spec_validator"), "openapi-spec-validator is not installed (pip install openapi-spec-validator)"))
        func servedAndValid() async throws {
            let kept = try Data(contentsOf: Self.document)
            let server = try await ServeProcess.start(database: db, folder: folder, arguments: ["--token", Self.token])
            let served = try await server.get("/api/openapi.json")
            await server.stop()
            #expect(served.status == 200 && served.header("Content-Type")?.hasPrefix("application/json") == true, "\(served.summary)")
            #expect(served.body == kept, "the served document differs from openapi.json: rebuild")
            let validator = try HelperProcess(
                [
                    "python3", "-c",
                    "import sys; from openapi_spec_validator import validate; from openapi_spec_validator.readers import read_from_filename; validate(read_from_filename(sys.argv[1])[0]); print('valid')",
                    Self.document.path,
                ],
                executable: URL(fileURLWithPath: "/usr/bin/env"))
            _ = await validator.finish(limit: 60, status: nil)
            #expect(validator.process.terminationStatus == 0 && validator.stdout.contains("valid"), "openapi-spec-validator: \(validator.stdout) \(validator.stderr.suffix(3000))")
        }

        static func installed(_ module: String) -> Bool {
            (try? HelperProcess.run(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", "import \(module)"]))?.status == 0
        }

        @Test(
            "Schemathesis, every check, against a real server with the token: nothing found",
            .enabled(if: installed("schemathesis"), "schemathesis is not installed (pip install schemathesis): the contract check is skipped"))
        func schemathesis() async throws {
            let server = try await ServeProcess.start(database: db, folder: folder, arguments: ["--token", Self.token])
            // A countdown ends every 250 ms for as long as the run may take, so that every read of
            // `/api/stream` holds messages and each is checked against the document.
            for index in 1...1200 {
                let started = try await server.post(
                    "/api/countdowns", jsonBody(["key": "tick-\(index)", "duration": "\(index * 250)ms"]), token: Self.token)
                guard started.status == 200 else {
                    await server.stop()
                    Issue.record("starting tick-\(index) failed: \(started.summary)")
                    return
                }
            }
            let config = Self.document.deletingLastPathComponent().appendingPathComponent("schemathesis.toml").path
            let seed = ProcessInfo.processInfo.environment["COUNTDOWN_SCHEMATHESIS_SEED"].flatMap(Int.init) ?? Int(Date().timeIntervalSince1970) % 100_000
            let run = try HelperProcess(
                [
                    "schemathesis", "--config-file", config, "--no-color", "run", Self.document.path, "--url", "http://127.0.0.1:\(server.port)", "--checks", "all",
                    "--header", "Authorization: Bearer \(Self.token)", "--max-examples", "25", "--seed", String(seed),
                    "--request-timeout", "10", "--workers", "1",
                ],
                // Its cache goes to the test's folder, not into the package.
                executable: URL(fileURLWithPath: "/usr/bin/env"), directory: folder.url)
            _ = await run.finish(limit: 300, status: nil)
            let finished = !run.process.isRunning
            await server.stop()
            let output = run.stdout + run.stderr
            print("schemathesis, seed \(seed): \(output.split(separator: "\n").suffix(4).joined(separator: "\n"))")
            // What it found comes before its warnings and summary: that part, with every run of one
            // short text (a generated body of hundreds of kilobytes) cut short.
            let shortened = (try? NSRegularExpression(pattern: "(.{1,8}?)\\1{20,}")).map {
                $0.stringByReplacingMatches(
                    in: output, range: NSRange(output.startIndex..., in: output), withTemplate: "$1$1$1…(repeated)")
            } ?? output
            let found = shortened.range(of: "WARNINGS").map { String(shortened[..<$0.lowerBound].suffix(12_000)) } ?? String(shortened.suffix(6000))
            #expect(
                finished && run.process.terminationStatus == 0,
                "schemathesis found problems (or did not end in 300 s); replay with COUNTDOWN_SCHEMATHESIS_SEED=\(seed): \(found)")
        }
    }
}
