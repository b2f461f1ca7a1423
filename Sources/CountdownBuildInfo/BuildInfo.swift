/// What the tool was built from, for `countdown --version` and `countdown doctor`.
package enum BuildInfo {
    /// The git commit the sources were checked out at when built (40 hex digits), followed by
    /// `-modified` when tracked files differed from it; `unknown` when built outside a git checkout.
    package static let commit = generatedCommit.isEmpty ? "unknown" : generatedCommit

    /// The commit in short form: its first 12 hex digits (and `-modified`), or `unknown`.
    package static var shortCommit: String {
        guard commit != "unknown" else { return commit }
        let hex = commit.prefix(while: \.isHexDigit)
        return String(hex.prefix(12)) + commit.dropFirst(hex.count)
    }
}
