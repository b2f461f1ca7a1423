import Foundation
import Hummingbird
import Prometheus
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreServer
@testable import CountdownStoreUI
@testable import countdown

/// The item actions are listed once, by ``CountdownAction``: the store accepts each one exactly
/// where the enum says, and every front end (the tool, the HTTP routes and their contract, the
/// dashboard, the app model) lists the same actions, so that none can drift from the others.
@Suite("Item actions: one list for every front end")
struct ItemActionListsTests {
    /// An item of each state and kind an action can meet, made under `key`.
    static let situations: [(name: String, make: @Sendable (CountdownStore, String) async throws -> Void)] = [
        ("running countdown", { store, key in try await store.start(key, duration: .seconds(600)) }),
        (
            "paused countdown",
            { store, key in
                try await store.start(key, duration: .seconds(600))
                try await store.pause(key)
            }
        ),
        (
            "expired countdown",
            { store, key in
                try await store.start(key, duration: .seconds(600))
                try await store.shorten(key, by: .seconds(3600))
            }
        ),
        (
            "cancelled countdown",
            { store, key in
                try await store.start(key, duration: .seconds(600))
                try await store.cancel(key)
            }
        ),
        ("running stopwatch", { store, key in try await store.startStopwatch(key) }),
        (
            "paused stopwatch",
            { store, key in
                try await store.startStopwatch(key)
                try await store.pause(key)
            }
        ),
        (
            "cancelled stopwatch",
            { store, key in
                try await store.startStopwatch(key)
                try await store.cancel(key)
            }
        ),
    ]

    @Test("The store accepts each action exactly on the items it applies to, and refuses it on the others as wrongState")
    func storeAgreesWithTheEnum() async throws {
        let fixture = try Fixture()
        let store = try await fixture.openTicking()
        var index = 0
        for action in CountdownAction.allCases {
            for situation in Self.situations {
                index += 1
                let key = "item-\(index)"
                try await situation.make(store, key)
                let item = try #require(try await store.countdown(key))
                let amount: Duration? = action.takesDuration ? .seconds(30) : nil
                do throws(CountdownError) {
                    let after = try await action.perform(on: store, key: key, by: amount)
                    #expect(action.applies(to: item), "\(action.name) on a \(situation.name) was accepted")
                    #expect(after.key == key)
                } catch {
                    #expect(!action.applies(to: item), "\(action.name) on a \(situation.name): \(error.message)")
                    #expect(error.code == .wrongState, "\(action.name) on a \(situation.name): \(error.message)")
                }
            }
        }
        try await store.close()
    }

    @Test("perform(on:key:by:) runs the store's operation: the event of each action is recorded")
    func performDispatches() async throws {
        let fixture = try Fixture()
        let store = try await fixture.openTicking()
        let expected: [CountdownAction: String] = [
            .pause: "paused", .resume: "resumed", .cancel: "cancelled", .restart: "restarted", .remove: "removed",
            .extend: "extended", .shorten: "shortened",
        ]
        for action in CountdownAction.allCases {
            let key = "dispatch-\(action.name)"
            try await store.start(key, duration: .seconds(600))
            if action == .resume { try await store.pause(key) }
            try await action.perform(on: store, key: key, by: action.takesDuration ? .seconds(5) : nil)
            let kinds = try await events(store, key: key).map(\.kind)
            #expect(kinds.last == expected[action], "\(action.name): \(kinds)")
        }
        let missing = await expectError(.invalidDuration) {
            try await CountdownAction.extend.perform(on: store, key: "dispatch-extend")
        }
        #expect(missing?.message.contains("extend") == true)
        await expectError(.invalidArgument) {
            try await CountdownAction.pause.perform(on: store, key: "dispatch-extend", by: .seconds(1))
        }
        try await store.close()
    }

    @Test("The tool has one command per action, named as it, with a duration argument exactly when it takes one")
    func toolCommands() throws {
        let commands = CountdownCommand.itemActionCommands
        #expect(commands.map { $0.action } == CountdownAction.allCases)
        let subcommands = CountdownCommand.configuration.subcommands.map { $0._commandName }
        for command in commands {
            let action = command.action
            #expect(command._commandName == action.name)
            #expect(subcommands.contains(action.name), "countdown \(action.name) is a command of the tool")
            let withDuration = (try? command.parse(["some-key", "5s"])) != nil
            let withoutDuration = (try? command.parse(["some-key"])) != nil
            #expect(withDuration == action.takesDuration, "countdown \(action.name) KEY DURATION")
            #expect(withoutDuration == !action.takesDuration, "countdown \(action.name) KEY")
        }
    }

    @Test("The HTTP API takes every action at POST …/{action}, and openapi.json documents each, with a body of a duration where it takes one")
    func httpActions() throws {
        let actions = APIRoutes<BasicRequestContext>.actions
        #expect(actions == CountdownAction.allCases.map(\.name) + APIRoutes<BasicRequestContext>.ruleActions)
        let paths = try #require(Self.openAPI["paths"] as? [String: [String: Any]])
        for prefix in ["/api/countdowns/{key}/", "/api/item/"] {
            let documented = paths.keys.filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
            #expect(Set(documented).subtracting(["events"]) == Set(actions), "\(prefix)…")
            for action in CountdownAction.allCases {
                let post = paths[prefix + action.name]?["post"] as? [String: Any]
                let body = ((post?["requestBody"] as? [String: Any])?["content"] as? [String: Any])?["application/json"]
                let schema = ((body as? [String: Any])?["schema"] as? [String: Any])?["$ref"] as? String
                #expect(
                    (schema == "#/components/schemas/AmountBody") == action.takesDuration,
                    "\(prefix)\(action.name) documents a duration body exactly when the action takes one")
            }
        }
    }

    @Test("Every route is one entry of the route list, and the list is the paths and methods of openapi.json")
    func routeList() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let dashboard = CountdownDashboard(store: store, metricsRegistry: PrometheusCollectorRegistry())
        let routes = APIRoutes<BasicRequestContext>(dashboard: dashboard).routes
        let pageFiles: Set<String> = ["/", "/dashboard.js", "/dashboard-actions.js", "/dashboard.css"]
        let listed = routes.map { "\($0.method.rawValue) \($0.path.description)" }
        #expect(Set(listed).count == listed.count, "each path and method once: \(listed)")
        let api = Set(routes.filter { !pageFiles.contains($0.path.description) }.map {
            "\($0.method.rawValue) \($0.path.description)"
        })
        let paths = try #require(Self.openAPI["paths"] as? [String: [String: Any]])
        let actions = Set(APIRoutes<BasicRequestContext>.actions)
        var documented = Set<String>()
        for (path, operations) in paths {
            var segments = path.split(separator: "/").map(String.init)
            if let last = segments.last, actions.contains(last) { segments[segments.count - 1] = "{action}" }
            for method in operations.keys {
                documented.insert("\(method.uppercased()) /\(segments.joined(separator: "/"))")
            }
        }
        #expect(api == documented)
        let table = APIRoutes<BasicRequestContext>.methodsByPath(routes)
        #expect(table.count == Set(routes.map(\.path.description)).count)
        #expect(
            table.first { $0.path.description == "/api/countdowns" }?.methods.map(\.rawValue) == ["GET", "POST"],
            "the methods of a path, in the order of the list, for its 405 answers")
        try await store.close()
    }

    @Test("The dashboard takes its actions from the server's list of the enum, and labels none the enum lacks")
    func dashboardActions() throws {
        let script = DashboardAssets.actions
        let json = try #require(
            script.firstRange(of: "Object.freeze(").map { script[$0.upperBound...] }?.split(separator: ");").first)
        let served = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
        #expect(served.compactMap { $0["name"] as? String } == CountdownAction.allCases.map(\.name))
        for (entry, action) in zip(served, CountdownAction.allCases) {
            let states = Set((entry["states"] as? [String] ?? []).compactMap(CountdownState.init(rawValue:)))
            #expect(states == action.acceptedStates, "\(action.name)")
            #expect(entry["takes_duration"] as? Bool == action.takesDuration, "\(action.name)")
            #expect(entry["countdowns_only"] as? Bool == action.countdownsOnly, "\(action.name)")
        }
        // The page's labels: a button for an action the server does not list would never work.
        let page = DashboardAssets.script
        let labels = try #require(
            page.firstRange(of: "const LABELS = new Map([").map { page[$0.upperBound...] }?.split(separator: "]);").first)
        let named = labels.matches(of: /\['([a-z]+)',/).map { String($0.output.1) }
        #expect(!named.isEmpty && Set(named).isSubset(of: CountdownAction.allCases.map(\.name)), "\(named)")
        #expect(page.contains("self.countdownItemActions") && script.contains("self.countdownItemActions = "))
        // The list is loaded before the page's script.
        let html = DashboardAssets.html
        let list = try #require(html.range(of: "src=\"dashboard-actions.js\""))
        let own = try #require(html.range(of: "src=\"dashboard.js\""))
        #expect(list.lowerBound < own.lowerBound)
    }

    @Test("The app model performs every action, and a refusal names it")
    @MainActor
    func appModel() async throws {
        for action in CountdownAction.allCases {
            #expect(CountdownActionFailure.Action(action).rawValue == action.name)
        }
        guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
        let fixture = try Fixture()
        let store = try await fixture.openTicking()
        let model = CountdownListModel(store: store)
        for action in CountdownAction.allCases {
            let key = "model-\(action.name)"
            try await store.start(key, duration: .seconds(600))
            if action == .resume { try await store.pause(key) }
            let after = await model.perform(action, key, by: action.takesDuration ? .seconds(5) : nil)
            #expect(after?.key == key && model.failure == nil, "\(action.name)")
        }
        #expect(await model.perform(.resume, "model-pause") != nil)
        #expect(await model.perform(.resume, "model-pause") == nil)
        #expect(model.failure?.action == .resume && model.failure?.error.code == .wrongState)
        try await store.close()
    }

    @Test("A refusal's hint is rendered in each front end's words: the library's, the tool's option, the API's field")
    func hints() async throws {
        let fixture = try Fixture()
        let store = try await fixture.openTicking()
        try await store.start("taken", duration: .seconds(60))
        let active = try #require(await expectError(.alreadyActive) { try await store.start("taken", duration: .seconds(60)) })
        #expect(active.hint == .startWhenActive(.replace))
        #expect(active.message == "countdown 'taken' is already running; start it with whenActive: .replace to start it again")
        #expect(Main.toolMessage(active) == "countdown 'taken' is already running; use countdown start --replace to start it again")
        #expect(
            APIError(active).message
                == "countdown 'taken' is already running; start it with \"when_active\": \"replace\" to start it again")
        let behind = try #require(
            await expectError(.calibrationNeedsForce) { try await store.calibrate(serverTime: Date(timeIntervalSince1970: 1)) })
        #expect(behind.hint == .calibrateWithForce)
        #expect(behind.message.hasSuffix("; calibrate with force to accept that"))
        #expect(Main.toolMessage(behind) == behind.message.replacing("calibrate with force", with: "calibrate with --force"))
        #expect(APIError(behind).message == behind.message)
        // An error without a hint reads the same everywhere.
        let missing = try #require(await expectError(.notFound) { try await store.pause("nothing") })
        #expect(missing.hint == nil && Main.toolMessage(missing) == missing.message)
        try await store.close()
    }

    @Test("A consumer name is refused by its own name, whatever it holds")
    func consumerNames() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let empty = await expectError(.invalidArgument) { try await store.consumer("") }
        #expect(empty?.message == "invalid consumer name '': a consumer name must not be empty")
        let long = String(repeating: "keys", count: 70)
        let tooLong = await expectError(.invalidArgument) { try await store.consumer(long) }
        #expect(tooLong?.message.hasPrefix("invalid consumer name 'keyskeys") == true, "\(tooLong?.message ?? "")")
        try await store.close()
    }

    static var openAPI: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json.utf8)) as? [String: Any]) ?? [:]
    }
}
