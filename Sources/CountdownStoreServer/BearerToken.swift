/// The token a write must present as `Authorization: Bearer TOKEN`, compared in constant time.
struct BearerToken: Sendable {
    private let bytes: [UInt8]

    init(_ token: String) {
        bytes = Array(token.utf8)
    }

    /// Whether `header` (the whole `Authorization` value) presents this token. It takes as long
    /// for every header of one length, whichever of its bytes differ.
    func accepts(_ header: String?) -> Bool {
        guard let header else { return false }
        let prefix = Array("Bearer ".utf8)
        let given = Array(header.utf8)
        guard given.count >= prefix.count, given[..<prefix.count].elementsEqual(prefix) else { return false }
        let presented = given[prefix.count...]
        var difference = UInt8(truncatingIfNeeded: presented.count ^ bytes.count)
        for index in 0..<max(presented.count, bytes.count) {
            let left = index < presented.count ? presented[presented.startIndex + index] : 0
            let right = index < bytes.count ? bytes[index] : 0
            difference |= left ^ right
        }
        return difference == 0 && !bytes.isEmpty
    }
}
