import Foundation
import Testing

/// The harness of the process suites never hangs: a helper that dies of a fatal error is seen at
/// once, with its stderr, instead of leaving a backtracer that holds its output open.
extension RealProcesses {
@Suite("Harness", .enabled(if: FileManager.default.isExecutableFile(atPath: tortureHelper.path)))
struct HarnessTests {
    @Test("Regression: a helper that dies of a fatal error ends its output at once and shows its stderr")
    func fatalErrorIsReported() async throws {
        let folder = try TemporaryFolder()
        let helper = try HelperProcess(["fatal", folder.path()])
        // Well within the limit: with the backtracer on, an orphaned backtracer kept the output open for good.
        let lines = await helper.finish(limit: 20, status: nil)
        #expect(lines.isEmpty)
        #expect(helper.signalled != nil, "the helper died of a signal (its fatal error)")
        #expect(helper.stderr.contains("a deliberate fatal error"), "its stderr is kept for the report: \(helper.stderr)")
    }

    @Test("A helper that never ends is killed with its whole process group when its bound runs out")
    func hangIsBounded() async throws {
        // A shell whose child keeps the output open after the shell itself is gone.
        let helper = try HelperProcess(["-c", "sleep 600 & exit 0"], executable: URL(fileURLWithPath: "/bin/sh"))
        await withKnownIssue("the harness reports the hang") {
            _ = await helper.finish(limit: 1, status: 0)
        }
        let group = helper.process.processIdentifier
        try await eventually("the whole process group is gone", limit: 10) { kill(-group, 0) != 0 }
    }

    @Test("A wait on a helper's work fails at once, with its exit and stderr, when the helper ends first")
    func watchedHelperThatEnds() async throws {
        let helper = try HelperProcess(["-c", "echo 'cannot open the store' >&2; exit 3"], executable: URL(fileURLWithPath: "/bin/sh"))
        await withKnownIssue("the harness reports the helper's end") {
            // (What it throws after the report ends the wait, as in a test.)
            try? await eventually("the helper's work is done", watching: helper, limit: 30) { false }
        } matching: { issue in
            let text = String(describing: issue)
            // Its end, not the limit: it did not wait 30 s for work that could not come.
            return text.contains("ended (exit status 3)") && text.contains("cannot open the store")
        }
    }

    @Test("A wait on a helper's work that runs out kills the helper and reports its stderr")
    func watchedHelperThatHangs() async throws {
        let helper = try HelperProcess(["-c", "echo 'still starting' >&2; sleep 600"], executable: URL(fileURLWithPath: "/bin/sh"))
        await withKnownIssue("the harness reports the hang") {
            try? await eventually("the helper's work is done", watching: helper, limit: 1) { false }
        } matching: { issue in
            String(describing: issue).contains("still starting")
        }
        let group = helper.process.processIdentifier
        try await eventually("the whole process group is gone", limit: 10) { kill(-group, 0) != 0 }
    }
}
}
