import Hummingbird

/// The API's authentication, as middleware on the routes that want it
/// (`/v1/…` and `/metrics`): an `Authorization: Bearer <token>` header whose
/// token is one of `tokens` (compared in constant time), else `401` with
/// `WWW-Authenticate: Bearer`. Tokens are never logged.
struct BearerAuthentication: RouterMiddleware {
    typealias Context = BasicRequestContext
    let tokens: [[UInt8]]

    init(tokens: [String]) { self.tokens = tokens.map { Array($0.utf8) } }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let given = Self.bearerToken(request.headers[.authorization]) {
            var ok = false
            // Every token is compared, whichever matches.
            for token in tokens where Self.constantTimeEqual(given, token) { ok = true }
            if ok { return try await next(request, context) }
        }
        return Response(
            status: .unauthorized, headers: [.contentType: "application/json", .wwwAuthenticate: "Bearer"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"error":"a bearer token is required"}"#)))
    }

    /// The credentials of an `Authorization` header with the Bearer scheme: the scheme
    /// compared without regard to case and followed by one or more spaces (RFC 9110, 11.4).
    static func bearerToken(_ header: String?) -> [UInt8]? {
        guard let header else { return nil }
        let bytes = Array(header.utf8)
        guard bytes.count > 7, String(decoding: bytes[0..<6], as: UTF8.self).lowercased() == "bearer", bytes[6] == 0x20 else { return nil }
        let token = bytes[7...].drop { $0 == 0x20 }
        return token.isEmpty ? nil : Array(token)
    }

    /// Compares every byte whatever the first difference (the length is not secret).
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var d: UInt8 = 0
        for i in 0..<a.count { d |= a[i] ^ b[i] }
        return d == 0
    }
}
