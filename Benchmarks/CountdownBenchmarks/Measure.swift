import Foundation

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// Seconds `body` takes on the continuous clock.
func timed(_ body: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    return (ContinuousClock.now - start).seconds
}

/// Runs ours and raw in alternating rounds (so drift of the machine affects both alike) and
/// returns the median of each.
func alternating(rounds: Int, ours: () async throws -> Double, raw: () async throws -> Double) async rethrows -> (ours: Double, raw: Double) {
    var oursFigures: [Double] = []
    var rawFigures: [Double] = []
    for round in 0..<rounds {
        if round % 2 == 0 {
            oursFigures.append(try await ours())
            rawFigures.append(try await raw())
        } else {
            rawFigures.append(try await raw())
            oursFigures.append(try await ours())
        }
    }
    return (median(oursFigures), median(rawFigures))
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// The value below which `fraction` of `sorted` lies (nearest rank).
func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let rank = Int((fraction * Double(sorted.count)).rounded(.up))
    return sorted[min(sorted.count, max(1, rank)) - 1]
}

/// Nanoseconds on the boot clock, the clock the store sleeps on.
func bootNanoseconds() -> Int64 {
    var spec = timespec()
    #if os(Linux)
    clock_gettime(CLOCK_BOOTTIME, &spec)
    #else
    clock_gettime(CLOCK_MONOTONIC, &spec)
    #endif
    return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
}

/// CPU time (user + system) this process has used, in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    #if os(Linux)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Resident and peak resident memory of this process, in KiB (Linux `/proc/self/status`).
func residentMemoryKiB() -> (current: Int, peak: Int) {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
    func field(_ name: String) -> Int {
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            return Int(line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") ?? 0
        }
        return 0
    }
    return (field("VmRSS"), field("VmHWM"))
}

/// How late the machine itself wakes a thread: a plain thread sleeps 1 ms again and again while
/// a case runs, and counts how late each wake-up is. When the virtual machine's processors are
/// not scheduled, every thread stalls, this one included; the count tells a stall of the
/// machine from one of the code under measurement.
final class WakeProbe: @unchecked Sendable {
    // `@unchecked Sendable`: `running` and `lateness` are read and written under `lock` only; the
    // probe thread keeps its samples in a local array until it stops.
    private let lock = NSLock()
    private var running = true
    private var lateness: [Double] = []

    init() {
        Thread.detachNewThread { [self] in
            var spec = timespec(tv_sec: 0, tv_nsec: 1_000_000)
            var late: [Double] = []
            while lock.withLock({ running }) {
                let before = bootNanoseconds()
                nanosleep(&spec, nil)
                late.append(Double(bootNanoseconds() - before - 1_000_000) / 1e6)
            }
            lock.withLock { lateness = late }
        }
    }

    /// Stops the probe and describes what it saw.
    func stop() -> String {
        lock.withLock { running = false }
        while lock.withLock({ lateness.isEmpty }) { usleep(2_000) }
        let late = lock.withLock { lateness }
        return String(
            format: "%d wake-ups of a 1 ms sleep on a plain thread: %d over 2 ms late, %d over 10 ms, max %.1f ms",
            late.count, late.filter { $0 > 2 }.count, late.filter { $0 > 10 }.count, late.max() ?? 0)
    }
}
