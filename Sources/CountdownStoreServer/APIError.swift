import CountdownStoreCore
import Hummingbird
import Logging

/// A refusal of the HTTP API: a status and the `{"error": {"code", "message"}}` body.
struct APIError: Error, Sendable {
    var status: HTTPResponse.Status
    var code: String
    var message: String
    /// Seconds after which the client may try again (`Retry-After`), for a refusal that passes.
    var retryAfter: Int?

    init(_ status: HTTPResponse.Status, code: String, _ message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    /// The library's error, with the status its category maps to: 400 for invalid input, 404
    /// for an unknown key, 409 for a conflict (the item's state refuses), 503 for storage.
    init(_ error: CountdownError) {
        let status: HTTPResponse.Status =
            switch error.code.category {
            case .invalidInput: .badRequest
            case .notFound: .notFound
            case .conflict: .conflict
            case .storage: .serviceUnavailable
            }
        self.init(status, code: error.code.name, Self.message(error))
    }

    /// The library's message, with its hint in the API's words: the field of the body to set.
    static func message(_ error: CountdownError) -> String {
        error.message(hint: { hint in
            switch hint {
            case .startWhenActive(let value): "start it with \"when_active\": \"\(value.rawValue)\""
            case .calibrateWithForce: nil
            }
        })
    }

    static func invalid(_ message: String) -> APIError {
        APIError(.badRequest, code: CountdownError.Code.invalidArgument.name, message)
    }

    static let unauthorized = APIError(
        .unauthorized, code: "unauthorized",
        "this request changes the store: it needs Authorization: Bearer TOKEN with the server's token")

    static let tokenTooShort = APIError(
        .unauthorized, code: "tokenTooShort",
        "this server's token is too short to be a secret (under \(CountdownDashboard.minimumTokenLength) characters): "
            + "it accepts no changes until it is given a longer one"
    )

    static let readOnly = APIError(
        .unauthorized, code: "readOnly",
        "this server is read-only: start it with a token (--token-file, --token or $COUNTDOWN_TOKEN) to allow changes")

    /// Any error a handler threw, as the API answers it.
    ///
    /// A client learns what it did wrong, in a message that names its own bad value, and nothing
    /// of the server: a storage failure (whose message may name the database, a path or a
    /// server) and any unexpected error answer with a generic message and a reference, which
    /// `logger` records beside the detail.
    static func from(_ error: any Error, logger: Logger) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as CountdownError where error.code.category == .storage:
            let reference = Self.reference()
            logger.error("a request failed on the store", metadata: ["reference": "\(reference)", "error": "\(error)"])
            return APIError(
                .serviceUnavailable, code: error.code.name,
                "the store could not answer this request; try again (reference \(reference) in the server's log)")
        case let error as CountdownError:
            return APIError(error)
        case let error as any HTTPResponseError where error.status == .contentTooLarge:
            return APIError(
                .contentTooLarge, code: "bodyTooLarge", "the request body is larger than \(APILimits.maximumBody) bytes"
            )
        case let error as any HTTPResponseError where (400..<500).contains(error.status.code):
            return APIError(error.status, code: "httpError", error.status.reasonPhrase)
        default:
            let reference = Self.reference()
            logger.error(
                "a request failed", metadata: ["reference": "\(reference)", "error": "\(String(reflecting: error))"])
            return APIError(
                .internalServerError, code: "internalError",
                "the request failed on the server (reference \(reference) in the server's log)")
        }
    }

    /// A short random reference that ties an answer to its line in the server's log.
    static func reference() -> String {
        String(UInt64.random(in: 0...UInt64.max) & 0xFFFF_FFFF_FFFF, radix: 16, uppercase: false)
    }
}
