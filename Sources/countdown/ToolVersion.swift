import CountdownBuildInfo
import CountdownStore

/// What the tool says of its own version: the package's version and the commit it was built from.
enum ToolVersion {
    /// `countdown --version`: `countdown 0.2.0 (commit 0123abcd…)`.
    static let text = "countdown \(CountdownStore.version) (commit \(BuildInfo.commit))"

    /// The `application_name` PostgreSQL servers see for the tool, unless the connection string or
    /// `PGAPPNAME` names one: `countdown/0.2.0 (0123abcd4567)`, within PostgreSQL's 63 bytes.
    static let applicationName = "countdown/\(CountdownStore.version) (\(BuildInfo.shortCommit))"
}
