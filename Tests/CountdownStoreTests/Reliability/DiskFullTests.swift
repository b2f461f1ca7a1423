import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

extension RealProcesses {
    /// Disk full: a writer under `RLIMIT_FSIZE` (`ulimit -f`) gets a typed storage error; what it
    /// committed before is intact, and writing works again once the limit is lifted.
    @Suite("Disk full", .enabled(if: FileManager.default.isExecutableFile(atPath: tortureHelper.path)))
    struct DiskFullTests {
        @Test("A write past the file-size limit fails with a typed storage error; earlier commits survive")
        func writesPastTheLimit() async throws {
            let folder = try TemporaryFolder()
            let path = folder.path()
            // 2048 blocks of 512 bytes (dash counts in 512-byte blocks); SIGXFSZ ignored, so
            // write() fails with EFBIG instead of killing the process.
            let filler = try HelperProcess(["fill", path], shell: "trap '' XFSZ; ulimit -f 2048; exec")
            let lines = try await filler.waitForExit(seconds: 60, status: 3)
            #expect(filler.process.terminationStatus == 3, "the writer stopped on an error, not a crash: \(lines.suffix(2))")
            let committed = lines.compactMap { line -> Int? in
                line.hasPrefix("committed ") ? Int(line.dropFirst("committed ".count)) : nil
            }
            let lastCommitted = try #require(committed.last)
            #expect(lastCommitted > 10, "the limit was reached after some commits")
            let failure = try #require(lines.last)
            // A code to switch on (SQLite reports the file-size limit as a full disk), naming the file.
            #expect(failure.hasPrefix("error diskFull") || failure.hasPrefix("error ioFailure"), "\(failure)")
            #expect(failure.contains(path), "\(failure)")

            // No limit now: every acknowledged commit is there, the file is sound, and writes work.
            let store = try CountdownStore(path: path)
            let keys = Set(try await store.list(.all, limit: 10_000).map(\.key))
            for index in 0...lastCommitted {
                #expect(keys.contains("fill-\(index)"), "fill-\(index) was acknowledged")
            }
            #expect(keys.count <= lastCommitted + 2, "nothing unacknowledged beyond the one in flight")
            #expect(try await store.diagnostics().integrity == ["ok"])
            try await store.start("after-the-limit", duration: .minutes(1), payload: .text(String(repeating: "y", count: 4096)))
            #expect(try await store.countdown("after-the-limit")?.state == .running)
            try await store.close()
        }
    }
}
