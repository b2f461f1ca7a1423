import Foundation
import PackagePlugin

/// Embeds the package's migrations for the target's engine (`Migrations/sqlite/*.sql`, or
/// `Migrations/postgres/*.sql` for a target whose name ends in `Postgres`) into the target as
/// Swift source, so the schema travels inside every binary and nothing is read from disk at run time.
@main
struct EmbedMigrations: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        let engine = target.name.hasSuffix("Postgres") ? "postgres" : "sqlite"
        let folder = context.package.directoryURL.appending(path: "Migrations").appending(path: engine)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".sql") }
            .sorted()
        let inputs = names.map { folder.appending(path: $0) }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedMigrations.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(names.count) migrations",
                executable: try context.tool(named: "EmbedMigrationsTool").url,
                arguments: [output.path, "--import", "CountdownStoreCore"] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}
