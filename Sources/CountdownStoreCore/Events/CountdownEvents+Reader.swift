import Foundation
import Logging

extension CountdownEvents {
    /// A reader of a named consumer. When its iterator goes away (the loop ended: it finished,
    /// threw or broke off), what it claimed and did not hand out goes to other readers at once;
    /// what it handed out stays its own, to acknowledge, until its claim runs out.
    final class Reader: Sendable {
        let store: CountdownStore
        let consumer: String
        let name: String
        /// Started when the reading task is cancelled: giving up the claims waits until then.
        let stop: StopDeadline
        private let released = Locked(false)
        /// The id of the last event handed out: the reader keeps its claim on it when it stops.
        private let handedThrough = Locked<Int64?>(nil)

        init(store: CountdownStore, consumer: String) {
            self.store = store
            self.consumer = consumer
            name = store.newReaderName()
            stop = StopDeadline(bound: store.stopBound)
        }

        /// Notes that the event `id` was handed out.
        func handedOut(_ id: Int64) {
            handedThrough.withLock { $0 = Swift.max($0 ?? id, id) }
        }

        /// Releases the claims now (in a task of its own: the reading task is cancelled),
        /// waiting for it until the stop's deadline; what it could not give up is logged as a
        /// warning and goes to other readers when the claims run out.
        func release() async {
            let first = released.withLock { released in
                defer { released = true }
                return !released
            }
            // A reader of an instance that never claimed events of its consumer has none to give up.
            guard first, store.claimedConsumers().contains(consumer) else { return }
            stop.start()
            let (store, consumer, name, kept) = (store, consumer, name, handedThrough.withLock { $0 })
            let releasing = Task {
                try await store.releaseClaims(consumer: consumer, reader: name, keepingThrough: kept)
            }
            let why: String
            var metadata: Logger.Metadata = ["consumer": "\(consumer)", "reader": "\(name)"]
            switch await BoundedWait.result(of: releasing, by: stop, passingCancellation: false) {
            case .success?:
                return
            case .failure(let error as CountdownError)? where error.code == .wrongState:
                return  // the store closed, which gave them up
            case .failure(let error)?:
                why = "the database cannot be reached"
                metadata["error"] = "\(error)"
            case nil:
                why = "no answer from the database within \(stop.bound)"
            }
            metadata["claim_timeout"] = "\(store.configuration.claimTimeout)"
            store.configuration.logger.warning(
                """
                could not give up the claims of a reader of consumer \(consumer) (\(why)); \
                they go to other readers when they run out
                """,
                metadata: metadata)
        }

        deinit {
            let (store, consumer, name, kept) = (store, consumer, name, handedThrough.withLock { $0 })
            guard !released.withLock({ $0 }), store.claimedConsumers().contains(consumer) else { return }
            Task { try? await store.releaseClaims(consumer: consumer, reader: name, keepingThrough: kept) }
        }
    }
}
