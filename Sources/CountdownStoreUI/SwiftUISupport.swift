// The SwiftUI side, kept thin: everything it calls is plain code that runs and is tested anywhere.
#if canImport(SwiftUI)
    import SwiftUI

    extension AppPhase {
        /// The app phase of a SwiftUI scene phase.
        public init(_ phase: ScenePhase) {
            switch phase {
            case .active: self = .active
            case .background: self = .background
            default: self = .inactive
            }
        }
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    extension View {
        /// Hands every change of this window's scene phase to `lifecycle`, which follows the app's
        /// most awake window: the store is suspended once every window that carries the modifier is
        /// in the background, and resumed when one comes to the foreground. Put it on each window's
        /// root view (inside the `WindowGroup`), so that each window reports its own phase.
        public func countdownLifecycle(_ lifecycle: CountdownAppLifecycle) -> some View {
            modifier(CountdownLifecycleModifier(lifecycle: lifecycle))
        }
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    private struct CountdownLifecycleModifier: ViewModifier {
        @Environment(\.scenePhase) private var scenePhase
        /// This window's name for the lifecycle, for as long as the view lives.
        @State private var scene = UUID()
        let lifecycle: CountdownAppLifecycle

        func body(content: Content) -> some View {
            content
                .onChange(of: scenePhase, initial: true) { _, phase in
                    Task { await lifecycle.phaseChanged(to: AppPhase(phase), scene: scene) }
                }
                .onDisappear {
                    Task { await lifecycle.sceneEnded(scene) }
                }
        }
    }

    @available(macOS 13, iOS 16, tvOS 16, watchOS 9, *)
    extension Text {
        /// A label that counts `row` down (a countdown) or up (a stopwatch) by itself, and stands
        /// still while the row does not count: no update per second.
        public init(timerOf row: CountdownRow) {
            self.init(
                timerInterval: row.timerInterval, pauseTime: row.pauseTime, countsDown: row.countsDown,
                showsHours: row.showsHours)
        }
    }
#endif
