import Foundation
import PackagePlugin

/// Embeds files into a target as Swift source, so they travel inside every binary and nothing is
/// read from disk at run time.
///
/// What to embed is the target's own say, in `embedded-files.json` in its folder (a build tool
/// plugin takes no arguments from the manifest), nothing is guessed from the target's name:
///
/// ```json
/// { "type": "EmbeddedMigrations", "folder": "Migrations/sqlite", "extensions": ["sql"] }
/// ```
///
/// `type`: the enum the target gets (`TYPE.files`: each file's name and text, in name order);
/// `folder`: where the files are, from the package's root; `extensions`: which files of it. The
/// target excludes `embedded-files.json` (and a folder of its own it embeds) in the manifest.
@main
struct EmbedFiles: BuildToolPlugin {
    /// The contents of `embedded-files.json`.
    struct Settings: Decodable {
        var type: String
        var folder: String
        var extensions: [String]
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
        let settings: Settings
        do {
            settings = try JSONDecoder().decode(Settings.self, from: data)
        } catch {
            throw Failure(description: "\(settingsFile.path) is not valid: \(error)")
        }
        let folder = context.package.directoryURL.appending(path: settings.folder)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { name in settings.extensions.contains { name.hasSuffix("." + $0) } }
            .sorted()
        let inputs = names.map { folder.appending(path: $0) }
        let output = context.pluginWorkDirectoryURL.appending(path: "\(settings.type).swift")
        return [
            .buildCommand(
                displayName: "Embedding \(names.count) files of \(settings.folder) as \(settings.type)",
                executable: try context.tool(named: "EmbedFilesTool").url,
                arguments: [output.path, settings.type] + inputs.map(\.path),
                inputFiles: inputs + [settingsFile],
                outputFiles: [output]
            )
        ]
    }
}
