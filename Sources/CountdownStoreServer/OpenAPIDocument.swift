/// The OpenAPI document of the HTTP API, served at `api/openapi.json`: `openapi.json` at the
/// root of the repository, embedded into the binary at build time (see `embedded-files.json`).
/// Edit that file; a test checks that it is what the server serves, byte for byte.
enum OpenAPIDocument {
    /// The document, OpenAPI 3.1, as JSON text.
    static let json: String = {
        guard let file = OpenAPIFiles.files.first(where: { $0.name == "openapi.json" }) else {
            preconditionFailure("openapi.json was not embedded: see Sources/CountdownStoreServer/embedded-files.json")
        }
        return file.text
    }()
}
