import Foundation

/// A serial queue of its own for the transactions of a store's groups, where writers take turns:
/// a group's transaction begins at once, on a thread of its own, and takes in the callers of the
/// group before as they write again, instead of beginning only after every one of them has run
/// on the cooperative pool ahead of it.
final class GroupCommitQueue: Sendable {
    let queue = DispatchQueue(label: "CountdownStore.group-commit", qos: .userInitiated)
}

@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
extension GroupCommitQueue: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

