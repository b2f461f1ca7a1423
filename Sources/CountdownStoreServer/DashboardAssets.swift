/// The dashboard's page, script and styles: the files of `Dashboard/` in this target's folder,
/// embedded into the binary at build time (see `embedded-files.json`), so a `countdown` copied
/// alone still serves them.
///
/// Served under a strict Content-Security-Policy: the page loads only `dashboard.js` and
/// `dashboard.css`, by relative URLs, so it works under any path prefix. The script puts every
/// piece of data into the DOM as text or as a `data-*` attribute, never as markup. The files hold
/// non-ASCII characters (—, …, “ ”): serve them with `charset=utf-8`.
enum DashboardAssets {
    /// The page (`GET {base}/`).
    static let html = file("index.html")
    /// The page's script (`GET {base}/dashboard.js`).
    static let script = file("dashboard.js")
    /// The page's styles (`GET {base}/dashboard.css`).
    static let style = file("dashboard.css")

    /// The text of the embedded file `name`; a build without it does not serve a page at all.
    private static func file(_ name: String) -> String {
        guard let file = DashboardFiles.files.first(where: { $0.name == name }) else {
            preconditionFailure(
                "the dashboard's \(name) was not embedded: see Sources/CountdownStoreServer/embedded-files.json")
        }
        return file.text
    }
}
