import HeraldCore
import HeraldJSON
import Hummingbird

/// Any method a path of the API does not answer gets 405 with `Allow` (the
/// router alone would answer 404, as for a path it does not know).
/// `{"error":"…"}` with `message` escaped by the one JSON writer: the body of every error
/// answer whose text is made at run time (a header value, a path, an error's description).
func errorBody(_ message: String) -> [UInt8] {
    var w = JSONWriter(capacity: message.utf8.count + 16)
    w.raw(#"{"error":"#)
    w.string(message)
    w.raw("}")
    return w.bytes
}

struct MethodGuard: RouterMiddleware {
    typealias Context = BasicRequestContext

    /// The API's path pattern for `path` (`/v1/notifications/{notification}`), or `nil` for a path not in the API.
    static func route(of path: String) -> String? {
        switch path {
        case "/", "/v1/notifications", "/v1/status", "/healthz", "/readyz", "/metrics", "/openapi.yaml": return path
        default:
            let rest = path.dropFirst("/v1/notifications/".count)
            return path.hasPrefix("/v1/notifications/") && !rest.isEmpty && !rest.contains("/") ? "/v1/notifications/{notification}" : nil
        }
    }

    /// The methods `path` answers, or `nil` for a path not in the API.
    static func allowed(_ path: String) -> [HTTPRequest.Method]? {
        switch route(of: path) {
        case nil: return nil
        case "/v1/notifications": return [.post]
        case "/v1/notifications/{notification}": return [.get, .head, .delete]
        default: return [.get, .head]
        }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let allowed = Self.allowed(request.uri.path) else {
            // Not a path of the API: 404 with an error text, as every 4xx has.
            let message = "no such endpoint: \(request.uri.path) (the API is /v1/notifications and /v1/status; probes /healthz, /readyz; /metrics, /openapi.yaml; the operator's page /)"
            return Response(status: .notFound, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: errorBody(message))))
        }
        if request.method == .head, allowed.contains(.get) {
            // HEAD wherever GET is (RFC 9110, 9.3.2; the routes register GET's handler for HEAD):
            // the GET answer's status and headers, its length, no body.
            let response = try await next(request, context)
            var headers = response.headers
            if headers[.contentLength] == nil, let length = response.body.contentLength { headers[.contentLength] = String(length) }
            return Response(status: response.status, headers: headers, body: ResponseBody())
        }
        if !allowed.contains(request.method) {
            return Response(
                status: .methodNotAllowed,
                headers: [.allow: allowed.map(\.rawValue).joined(separator: ", "), .contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: #"{"error":"method not allowed"}"#)))
        }
        return try await next(request, context)
    }
}

/// A `POST` body read into requests: a JSON array of request objects, or JSON
/// Lines (one object is one line). Each bad element is reported with its
/// position and reason; the good ones go on.
struct RequestBatch {
    var requests: [(line: Int, request: NotificationRequest)] = []
    var errors: [(line: Int, reason: String)] = []

    /// Each valid request's JSON text (kept with `keepingText`, for the PostgreSQL queue's rows).
    var texts: [String] = []

    /// A body's request lines as ``parse(_:keepingText:)`` reads them (blank ones skipped), without
    /// decoding any: a JSON Lines body's most requests; a JSON array counts as one. What a full
    /// queue is asked about before the body is parsed.
    static func lines(in body: [UInt8]) -> Int {
        if isArray(body) { return 1 }
        var count = 0
        body.withUnsafeBytes { raw in
            forEachLine(in: raw) { _, slice in
                if !isBlank(slice) { count += 1 }
            }
        }
        return count
    }

    /// The most request lines a body of its size can hold, without reading it (an array: one):
    /// each non-blank line has a byte other than white space, and lines are a byte apart.
    static func mostLines(in body: [UInt8]) -> Int {
        isArray(body) ? 1 : (body.count + 1) / 2
    }

    /// Whether the body is a JSON array (its first byte but white space is `[`).
    static func isArray(_ body: [UInt8]) -> Bool {
        body.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 } == UInt8(ascii: "[")
    }

    /// A line of spaces and tabs only: skipped.
    static func isBlank(_ line: UnsafeRawBufferPointer) -> Bool {
        line.allSatisfy { $0 == 0x20 || $0 == 0x09 }
    }

    static func parse(_ body: [UInt8], keepingText: Bool = false) -> RequestBatch {
        var batch = RequestBatch()
        let decoder = RequestDecoder()
        if isArray(body) {
            let value: JSONValue
            do { value = try JSONParser.parse(body) } catch {
                batch.errors.append((1, "the body is not valid JSON: \(error)"))
                return batch
            }
            guard case .array(let items) = value else { return batch }
            if items.isEmpty { batch.errors.append((1, "the body holds no request: the array is empty")) }
            for (i, item) in items.enumerated() {
                do {
                    batch.requests.append((i + 1, try decoder.decode(item)))
                    if keepingText {
                        var w = JSONWriter(capacity: 256)
                        w.value(item)
                        batch.texts.append(String(decoding: w.bytes, as: UTF8.self))
                    }
                } catch { batch.errors.append((i + 1, error.message)) }
            }
            return batch
        }
        body.withUnsafeBytes { raw in
            forEachLine(in: raw) { line, slice in
                guard !isBlank(slice) else { return }
                do throws(RequestError) {
                    batch.requests.append((line, try decoder.decode(line: slice)))
                    if keepingText { batch.texts.append(String(decoding: slice, as: UTF8.self)) }
                } catch {
                    batch.errors.append((line, error.message))
                }
            }
        }
        if batch.requests.isEmpty && batch.errors.isEmpty { batch.errors.append((1, "the body holds no request")) }
        return batch
    }

    /// `{"accepted":N,"results":[{"line":1,"notification":17},{"line":2,"error":"…"}]}`, in line order;
    /// with `error`, an `"error"` member first (every 4xx answer has one).
    func report(ids: Range<UInt64>?, error: String? = nil) -> [UInt8] {
        report(id: ids.map { range in { Int(range.lowerBound) + $0 } }, error: error)
    }

    /// Why no request of the body was taken, for the 400 answer.
    var refusal: String {
        errors.count == 1 ? errors[0].reason : "none of the \(errors.count) requests in the body is valid: each one's error is in results"
    }

    /// The same, with the `r`th valid request's id from `id`.
    func report(id: ((Int) -> Int)?, error: String? = nil) -> [UInt8] {
        var w = JSONWriter(capacity: 64 + requests.count * 24 + errors.count * 80)
        w.byte(UInt8(ascii: "{"))
        if let error {
            w.raw("\"error\":")
            w.string(error)
            w.byte(UInt8(ascii: ","))
        }
        w.raw("\"accepted\":")
        w.int(id == nil ? 0 : requests.count)
        w.raw(",\"results\":[")
        var r = 0, e = 0, first = true
        while r < requests.count || e < errors.count {
            w.separator(&first)
            if e >= errors.count || (r < requests.count && requests[r].line < errors[e].line) {
                w.raw("{\"line\":")
                w.int(requests[r].line)
                if let id {
                    w.raw(",\"notification\":")
                    w.int(id(r))
                }
                w.raw("}")
                r += 1
            } else {
                w.raw("{\"line\":")
                w.int(errors[e].line)
                w.raw(",\"error\":")
                w.string(errors[e].reason)
                w.raw("}")
                e += 1
            }
        }
        w.raw("]}")
        return w.bytes
    }
}
