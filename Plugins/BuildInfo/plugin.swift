import Foundation
import PackagePlugin

/// Writes the git commit the package is built from into the target as Swift source
/// (`generatedCommit`), so that a binary names the sources it came from.
///
/// The command runs again whenever git's record of the checkout moves (`HEAD`, the branch, the
/// index: a commit, a checkout, a reset) or a file of `Sources/` or the manifest changes, and
/// adds `-modified` when tracked files differ from the commit. It rewrites the file only when
/// its text changes, so that an unchanged commit costs no compilation. Outside a git checkout
/// (a source archive) the commit is empty.
@main
struct BuildInfo: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        let root = context.package.directoryURL
        let output = context.pluginWorkDirectoryURL.appending(path: "GeneratedCommit.swift")
        // Read-only git commands that take no lock, so that a build beside another git command
        // neither waits for it nor disturbs it.
        let script = #"""
            root=$1 file=$2
            commit=$(git --no-optional-locks -C "$root" rev-parse HEAD 2>/dev/null) || commit=""
            if [ -n "$commit" ] && [ -n "$(git --no-optional-locks -C "$root" status --porcelain \
                --untracked-files=no 2>/dev/null)" ]; then
                commit="$commit-modified"
            fi
            text="// Generated at build time: the git commit of the sources.
            let generatedCommit = \"$commit\""
            if [ ! -f "$file" ] || [ "$(cat "$file")" != "$text" ]; then
                printf '%s\n' "$text" > "$file"
            fi
            """#
        return [
            .buildCommand(
                displayName: "Reading the git commit of the sources",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "sh", root.path, output.path],
                inputFiles: Self.gitRecords(root) + Self.sources(root),
                outputFiles: [output])
        ]
    }

    /// The files git rewrites when the checkout moves to another commit or its index changes:
    /// `HEAD`, `index`, the current branch's ref and `packed-refs` (in a worktree, its own git
    /// folder and the repository's common one).
    static func gitRecords(_ root: URL) -> [URL] {
        let manager = FileManager.default
        var gitDirectory = root.appending(path: ".git")
        var isFolder: ObjCBool = false
        guard manager.fileExists(atPath: gitDirectory.path, isDirectory: &isFolder) else { return [] }
        if !isFolder.boolValue {
            // A worktree: `.git` is a file saying `gitdir: PATH`.
            guard let text = try? String(contentsOf: gitDirectory, encoding: .utf8),
                let line = text.split(separator: "\n").first, line.hasPrefix("gitdir: ")
            else { return [] }
            let path = String(line.dropFirst(8)).trimmingCharacters(in: .whitespaces)
            gitDirectory = path.hasPrefix("/") ? URL(fileURLWithPath: path) : root.appending(path: path)
        }
        var common = gitDirectory
        if let text = try? String(contentsOf: gitDirectory.appending(path: "commondir"), encoding: .utf8) {
            let path = text.trimmingCharacters(in: .whitespacesAndNewlines)
            common = path.hasPrefix("/") ? URL(fileURLWithPath: path) : gitDirectory.appending(path: path)
        }
        var records = [gitDirectory.appending(path: "HEAD"), gitDirectory.appending(path: "index")]
        if let head = try? String(contentsOf: records[0], encoding: .utf8), head.hasPrefix("ref: ") {
            let ref = head.dropFirst(5).trimmingCharacters(in: .whitespacesAndNewlines)
            records.append(common.appending(path: ref))
        }
        records.append(common.appending(path: "packed-refs"))
        return records.filter { manager.fileExists(atPath: $0.path) }
    }

    /// The manifest and every file under `Sources/`: a change to any of them may make the
    /// checkout differ from its commit.
    static func sources(_ root: URL) -> [URL] {
        var files = [root.appending(path: "Package.swift")]
        let folder = root.appending(path: "Sources")
        guard let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else {
            return files
        }
        for case let file as URL in walker where !file.hasDirectoryPath {
            files.append(file)
        }
        return files.sorted { $0.path < $1.path }
    }
}
