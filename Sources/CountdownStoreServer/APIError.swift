import CountdownStoreCore
import Hummingbird

/// A refusal of the HTTP API: a status and the `{"error": {"code", "message"}}` body.
struct APIError: Error, Sendable {
    var status: HTTPResponse.Status
    var code: String
    var message: String

    init(_ status: HTTPResponse.Status, code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
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
        self.init(status, code: error.code.name, error.message)
    }

    static func invalid(_ message: String) -> APIError {
        APIError(.badRequest, code: CountdownError.Code.invalidArgument.name, message)
    }

    static let unauthorized = APIError(
        .unauthorized, code: "unauthorized", "this request changes the store: it needs Authorization: Bearer TOKEN with the server's token")

    static let readOnly = APIError(
        .unauthorized, code: "readOnly", "this server is read-only: start it with a token (--token or $COUNTDOWN_TOKEN) to allow changes")

    /// Any error a handler threw, as the API answers it.
    static func from(_ error: any Error) -> APIError {
        switch error {
        case let error as APIError: error
        case let error as CountdownError: APIError(error)
        case let error as any HTTPResponseError where error.status == .contentTooLarge:
            APIError(.contentTooLarge, code: "bodyTooLarge", "the request body is larger than \(APILimits.maximumBody) bytes")
        case let error as any HTTPResponseError:
            APIError(error.status, code: "httpError", "\(error.status.reasonPhrase)")
        default:
            APIError(.internalServerError, code: "internalError", "the request failed: \(error)")
        }
    }
}
