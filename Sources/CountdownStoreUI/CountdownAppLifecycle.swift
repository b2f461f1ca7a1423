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

    /// The phase of an app whose windows are in `phases`: `active` when one is, else `inactive`
    /// when one is, else `background` (SwiftUI's phase of an app as a whole).
    public static func ofScenes(_ phases: [AppPhase]) -> AppPhase {
        if phases.contains(.active) { return .active }
        if phases.contains(.inactive) { return .inactive }
        return .background
    }
}

/// An app's store, its ticker and its lifecycle in one place: the glue every app with
/// countdowns needs, free of SwiftUI so that it runs (and is tested) anywhere.
///
/// Create one at launch (``init(fileName:folder:configuration:)`` opens the store in the app's
/// own folder in Application Support), call ``start()``, hand it every phase change of the app's scene
/// (``phaseChanged(to:)``: the background suspends the store, so `active` countdowns stand still
/// and `wall` ones keep counting; the foreground resumes it), and ``stop()`` it when the app
/// ends. In SwiftUI, the `countdownLifecycle(_:)` view modifier forwards each window's scene
/// phase (``phaseChanged(to:scene:)``), and the app follows its most awake window.
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
    /// The phase of each window that handed one in, by the window's name.
    private var scenePhases: [AnyHashable: AppPhase] = [:]

    /// The lifecycle of `store`, with a ticker of its own.
    public init(store: CountdownStore) {
        self.store = store
        ticker = CountdownTicker(store: store)
    }

    /// Opens (creating if needed) the store `fileName` in `folder`, by default the app's own
    /// folder in Application Support (``defaultFolder()``).
    ///
    /// A store that an earlier version left straight in Application Support, where every
    /// non-sandboxed macOS app of the user would find the same file, is moved into the app's
    /// folder first (see ``defaultFolder()``).
    ///
    /// - Throws: ``CountdownError`` when the folder or the store cannot be opened.
    public convenience init(
        fileName: String = "countdowns.sqlite", folder: URL? = nil,
        configuration: CountdownStore.Configuration = CountdownStore.Configuration()
    ) throws(CountdownError) {
        let path: String
        if let folder {
            path = folder.appendingPathComponent(fileName).path
        } else {
            path = try Self.defaultPath(fileName: fileName, configuration: configuration)
        }
        self.init(store: try CountdownStore(path: path, configuration: configuration))
    }

    /// The folder an app's store goes in by default: one named by the app's bundle identifier
    /// (a program without one: its process name) inside the user's Application Support folder
    /// (on Linux, `$XDG_DATA_HOME`, else `~/.local/share`), created if missing.
    ///
    /// A sandboxed app's Application Support folder is its own already; a non-sandboxed macOS
    /// app's is the user's, shared by every app, so the store goes one level down.
    ///
    /// - Throws: ``CountdownError`` when the folder cannot be found or created.
    public static func defaultFolder() throws(CountdownError) -> URL {
        let support: URL
        do {
            support = try FileManager.default.url(
                for: .applicationSupportDirectory, in: .userDomainMask, appropriateFor: nil, create: true)
        } catch {
            throw CountdownError(
                .ioFailure, "cannot open the Application Support folder: \(error.localizedDescription)")
        }
        let folder = support.appendingPathComponent(appFolderName, isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw CountdownError(
                .ioFailure, "cannot create the folder \(quoted(folder.path)): \(error.localizedDescription)")
        }
        return folder
    }

    /// The name of the app's folder: its bundle identifier, else its process name, made safe as
    /// one path component.
    static var appFolderName: String {
        let name = Bundle.main.bundleIdentifier ?? ProcessInfo.processInfo.processName
        let safe = name.map { $0 == "/" || $0 == "\\" || $0 == ":" ? "_" : $0 }
        let text = String(safe).trimmingCharacters(in: .whitespaces)
        return text.isEmpty || text.hasPrefix(".") ? "CountdownStore" : text
    }

    /// Where the store `fileName` goes by default, after moving one that an earlier version left
    /// straight in Application Support.
    ///
    /// Only a store whose write-ahead log is empty moves (closing a store folds its log into the
    /// file): then the file holds all of it and one rename moves it whole, whatever happens
    /// around it. A store with a log (the app ended without closing it, or another process has
    /// it open) is used where it is, and moves at a later launch.
    static func defaultPath(fileName: String, configuration: CountdownStore.Configuration) throws(CountdownError)
        -> String
    {
        let folder = try defaultFolder()
        let path = folder.appendingPathComponent(fileName).path
        let legacy = folder.deletingLastPathComponent().appendingPathComponent(fileName).path
        let files = FileManager.default
        guard !files.fileExists(atPath: path), files.fileExists(atPath: legacy) else { return path }
        let log = (try? files.attributesOfItem(atPath: legacy + "-wal"))?[.size] as? NSNumber
        guard (log?.intValue ?? 0) == 0 else {
            configuration.logger.notice(
                """
                the store in Application Support has a write-ahead log; \
                using it where it is, to be moved into the app's folder once closed
                """,
                metadata: ["path": "\(legacy)"])
            return legacy
        }
        do {
            try files.moveItem(atPath: legacy, toPath: path)
        } catch {
            configuration.logger.notice(
                "could not move the store from Application Support into the app's folder; using it where it is",
                metadata: ["path": "\(legacy)", "error": "\(error.localizedDescription)"])
            return legacy
        }
        // What is left of the old store's log and index describes nothing any more.
        for suffix in ["-wal", "-shm"] { try? files.removeItem(atPath: legacy + suffix) }
        configuration.logger.info(
            "moved the store from Application Support into the app's folder",
            metadata: ["from": "\(legacy)", "to": "\(path)"])
        return path
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
                try await store.enterBackground()
            case .active:
                try await store.enterForeground()
                start()
            case .inactive:
                break
            }
        } catch {
            lastError = error
        }
    }

    /// Hands one window's new phase to the store: the app's phase is that of its most awake
    /// window (``AppPhase/ofScenes(_:)``), so a window sent to the background while another is
    /// on screen suspends nothing. `scene` names the window (any value unique to it, for as long
    /// as it lives); the SwiftUI modifier `countdownLifecycle(_:)` hands each window's own.
    public func phaseChanged(to phase: AppPhase, scene: AnyHashable) async {
        scenePhases[scene] = phase
        await phaseChanged(to: AppPhase.ofScenes(Array(scenePhases.values)))
    }

    /// The window `scene` is gone: the app's phase is its other windows'. When it was the last,
    /// the phase stays what it was (an app whose last window closed is ending, or, on macOS,
    /// still running without a window).
    public func sceneEnded(_ scene: AnyHashable) async {
        guard scenePhases.removeValue(forKey: scene) != nil, !scenePhases.isEmpty else { return }
        await phaseChanged(to: AppPhase.ofScenes(Array(scenePhases.values)))
    }

    /// A model of `selection` in this lifecycle's store, on this lifecycle's ticker, with beats
    /// every `beat` when one is given.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    public func model(_ selection: CountdownSelection = .active, beat: Duration? = nil, limit: Int = 500)
        -> CountdownListModel
    {
        CountdownListModel(store: store, ticker: ticker, selection: selection, beat: beat, limit: limit)
    }
}
