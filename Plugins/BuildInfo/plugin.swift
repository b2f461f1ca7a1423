import Foundation
import PackagePlugin

/// Writes the git commit the package is built from into the target as Swift source
/// (`generatedCommit`), before every build, so that a binary names the sources it came from.
///
/// The file is rewritten only when its text changes, so that an unchanged commit costs no
/// compilation. Outside a git checkout (a source archive) the commit is empty.
@main
struct BuildInfo: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let file = output.appending(path: "GeneratedCommit.swift")
        // Read-only git commands that take no lock, so that a build beside another git command
        // neither waits for it nor disturbs it.
        let script = #"""
            root=$1 file=$2
            commit=$(git --no-optional-locks -C "$root" rev-parse HEAD 2>/dev/null) || commit=""
            if [ -n "$commit" ] && [ -n "$(git --no-optional-locks -C "$root" status --porcelain \
                --untracked-files=no 2>/dev/null)" ]; then
                commit="$commit-modified"
            fi
            text="// Generated before each build: the git commit of the sources.
            let generatedCommit = \"$commit\""
            mkdir -p "$(dirname "$file")"
            if [ ! -f "$file" ] || [ "$(cat "$file")" != "$text" ]; then
                printf '%s\n' "$text" > "$file"
            fi
            """#
        return [
            .prebuildCommand(
                displayName: "Reading the git commit of the sources",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "sh", context.package.directoryURL.path, file.path],
                outputFilesDirectory: output)
        ]
    }
}
