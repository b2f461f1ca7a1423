import CountdownStore
import Foundation

/// Where an app is in its life, as a scene reports it.
public enum AppPhase: String, Sendable, Hashable {
    /// In the foreground and taking input.
    case active
    /// In the foreground but not taking input (a sheet of the system over it, the app switcher).
    case inactive
    /// In the background: the system may freeze the process at any moment.
    case background
}

/// An app's store, its ticker and its lifecycle in one place: the glue every app with
/// countdowns needs, free of SwiftUI so that it runs (and is tested) anywhere.
///
/// Create one at launch (``init(fileName:folder:configuration:)`` opens the store in the app's
/// Application Support folder), call ``start()``, hand it every phase change of the app's scene
/// (``phaseChanged(to:)``: the background suspends the store, so `active` countdowns stand still
/// and `wall` ones keep counting; the foreground resumes it), and ``stop()`` it when the app
/// ends. In SwiftUI, the `countdownLifecycle(_:)` view modifier forwards the scene phase.
@MainActor
public final class CountdownAppLifecycle {
    /// The app's store.
    public let store: CountdownStore
    /// The app's one ticker: it records expiries and gives the models their beats.
    public let ticker: CountdownTicker
    /// The phase last handed to ``phaseChanged(to:)``.
    public private(set) var phase: AppPhase = .active
    /// The last failure of the ticker or of a phase change, if any.
    public private(set) var lastError: CountdownError?
    private var running: Task<Void, Never>?

    /// The lifecycle of `store`, with a ticker of its own.
    public init(store: CountdownStore) {
        self.store = store
        ticker = CountdownTicker(store: store)
    }

    /// Opens (creating if needed) the store `fileName` in `folder`, by default the app's
    /// Application Support folder (on Linux, `$XDG_DATA_HOME`, else `~/.local/share`).
    ///
    /// - Throws: ``CountdownError`` when the folder or the store cannot be opened.
    public convenience init(
        fileName: String = "countdowns.sqlite", folder: URL? = nil,
        configuration: CountdownStore.Configuration = CountdownStore.Configuration()
    ) throws(CountdownError) {
        let directory: URL
        if let folder {
            directory = folder
        } else {
            do {
                directory = try FileManager.default.url(
                    for: .applicationSupportDirectory, in: .userDomainMask, appropriateFor: nil, create: true)
            } catch {
                throw CountdownError(.ioFailure, "cannot open the Application Support folder: \(error.localizedDescription)")
            }
        }
        let path = directory.appendingPathComponent(fileName).path
        self.init(store: try CountdownStore(path: path, configuration: configuration))
    }

    /// Whether the ticker runs.
    public var isRunning: Bool { running != nil }

    /// Starts the ticker, if it is not running: at launch. A store left suspended by an app the
    /// system ended in the background is resumed by the ticker's first heartbeat.
    public func start() {
        guard running == nil else { return }
        let ticker = ticker
        running = Task { [weak self] in
            do {
                try await ticker.run()
            } catch is CancellationError {
            } catch let error as CountdownError {
                self?.lastError = error
            } catch {
                self?.lastError = CountdownError(.storageFailure, "the ticker stopped: \(error)")
            }
            self?.running = nil
        }
    }

    /// Stops the ticker and waits until it has ended (it gives up its lease within the store's
    /// stop bound, whatever the database does): when the app ends.
    public func stop() async {
        guard let running else { return }
        running.cancel()
        await running.value
        self.running = nil
    }

    /// Stops the ticker and closes the store.
    public func close() async {
        await stop()
        do throws(CountdownError) {
            try await store.close()
        } catch {
            lastError = error
        }
    }

    /// Hands the app's new phase to the store: the background suspends it (time counts as
    /// background gap: `active` items stand still, `wall` items keep counting), the foreground
    /// resumes it and starts the ticker if it is not running. `inactive` changes nothing: the
    /// app is still on screen.
    public func phaseChanged(to phase: AppPhase) async {
        let previous = self.phase
        self.phase = phase
        guard phase != previous else { return }
        do throws(CountdownError) {
            switch phase {
            case .background:
                try await store.suspend()
            case .active:
                try await store.resume()
                start()
            case .inactive:
                break
            }
        } catch {
            lastError = error
        }
    }

    /// A model of `selection` in this lifecycle's store, on this lifecycle's ticker, with beats
    /// every `beat` when one is given.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    public func model(_ selection: CountdownSelection = .active, beat: Duration? = nil, limit: Int = 500) -> CountdownListModel {
        CountdownListModel(store: store, ticker: ticker, selection: selection, beat: beat, limit: limit)
    }
}
