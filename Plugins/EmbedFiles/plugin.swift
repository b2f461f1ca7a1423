import Foundation
import PackagePlugin

/// Embeds files into a target as Swift source, so they travel inside every binary and nothing is
/// read from disk at run time.
///
/// What to embed is the target's own say, in `embedded-files.json` in its folder (a build tool
/// plugin takes no arguments from the manifest), nothing is guessed from the target's name:
///
/// ```json
/// [{ "type": "EmbeddedMigrations", "folder": "Migrations/sqlite", "extensions": ["sql"] }]
/// ```
///
/// Each entry: `type`, the enum the target gets (`TYPE.files`: each file's name and text, in
/// name order); `folder`, where the files are, from the package's root; `extensions` and
/// `names`, which files of it (either or both; a file matches when it has one of the extensions
/// or one of the names). The target excludes `embedded-files.json` (and a folder of its own it
/// embeds) in the manifest.
@main
struct EmbedFiles: BuildToolPlugin {
    /// The contents of `embedded-files.json`.
    struct Settings: Decodable {
        var type: String
        var folder: String
        var extensions: [String]?
        var names: [String]?

        /// Whether the file `name` is one to embed.
        func takes(_ name: String) -> Bool {
            (names ?? []).contains(name) || (extensions ?? []).contains { name.hasSuffix("." + $0) }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        let settingsFile = target.directoryURL.appending(path: "embedded-files.json")
        guard let data = FileManager.default.contents(atPath: settingsFile.path) else {
            throw Failure(description: "\(target.name) uses EmbedFiles but has no \(settingsFile.path)")
        }
        let entries: [Settings]
        do {
            entries = try JSONDecoder().decode([Settings].self, from: data)
        } catch {
            throw Failure(description: "\(settingsFile.path) is not valid: \(error)")
        }
        return try entries.map { settings in
            let folder = context.package.directoryURL.appending(path: settings.folder)
            let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter(settings.takes).sorted()
            guard !names.isEmpty else {
                throw Failure(description: "\(settingsFile.path): nothing to embed as \(settings.type) in \(settings.folder)")
            }
            let inputs = names.map { folder.appending(path: $0) }
            let output = context.pluginWorkDirectoryURL.appending(path: "\(settings.type).swift")
            return .buildCommand(
                displayName: "Embedding \(names.count) files of \(settings.folder) as \(settings.type)",
                executable: try context.tool(named: "EmbedFilesTool").url,
                arguments: [output.path, settings.type] + inputs.map(\.path),
                inputFiles: inputs + [settingsFile],
                outputFiles: [output]
            )
        }
    }
}
