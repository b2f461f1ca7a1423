import CountdownStoreCore
import Foundation

/// The dashboard's page, script and styles: the files of `Dashboard/` in this target's folder,
/// embedded into the binary at build time (see `embedded-files.json`), so a `countdown` copied
/// alone still serves them.
///
/// Served under a strict Content-Security-Policy: the page loads only `dashboard-actions.js`
/// (which the server makes, ``actions``), `dashboard.js` and `dashboard.css`, by relative URLs, so
/// it works under any path prefix. The script puts every piece of data into the DOM as text or as
/// a `data-*` attribute, never as markup. The files hold non-ASCII characters (—, …, “ ”): serve
/// them with `charset=utf-8`.
enum DashboardAssets {
    /// The page (`GET {base}/`).
    static let html = file("index.html")
    /// The page's script (`GET {base}/dashboard.js`).
    static let script = file("dashboard.js")
    /// The page's styles (`GET {base}/dashboard.css`).
    static let style = file("dashboard.css")
    /// The item actions the API takes, for the page's buttons (`GET {base}/dashboard-actions.js`):
    /// made from ``CountdownAction``, not a file, and loaded by the page before its script.
    static let actions = itemActionsScript()

    /// What the page knows of one ``CountdownAction``: its name, the states of the items it
    /// applies to, whether to countdowns only, and whether its body holds a `duration`.
    struct ItemActionJSON: Encodable, Equatable {
        var name: String
        var states: [String]
        var countdownsOnly: Bool
        var takesDuration: Bool

        init(_ action: CountdownAction) {
            name = action.name
            states = CountdownState.allCases.filter(action.acceptedStates.contains).map(\.rawValue)
            countdownsOnly = action.countdownsOnly
            takesDuration = action.takesDuration
        }

        enum CodingKeys: String, CodingKey {
            case name, states
            case countdownsOnly = "countdowns_only"
            case takesDuration = "takes_duration"
        }
    }

    /// The script that sets `countdownItemActions` to every ``CountdownAction`` as
    /// ``ItemActionJSON``, in the library's order.
    static func itemActionsScript() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let table = (try? encoder.encode(CountdownAction.allCases.map(ItemActionJSON.init))).map {
            String(decoding: $0, as: UTF8.self)
        }
        return """
            // The item actions of the API (CountdownStore's CountdownAction), made by the server.
            self.countdownItemActions = Object.freeze(\(table ?? "[]"));

            """
    }

    /// The text of the embedded file `name`; a build without it does not serve a page at all.
    private static func file(_ name: String) -> String {
        guard let file = DashboardFiles.files.first(where: { $0.name == name }) else {
            preconditionFailure(
                "the dashboard's \(name) was not embedded: see Sources/CountdownStoreServer/embedded-files.json")
        }
        return file.text
    }
}
