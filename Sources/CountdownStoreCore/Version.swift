extension CountdownStore {
    /// This package's version, `MAJOR.MINOR.PATCH`: the newest version CHANGELOG.md names.
    ///
    /// `countdown --version`, `countdown doctor` and the HTTP API's `api/status` report it.
    public static let version = "0.2.0"
}
