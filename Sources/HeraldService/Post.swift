import HeraldCore
import HeraldJSON
import HeraldTracing
import HTTPTypes
import Hummingbird
import NIOCore

extension HTTPField.Name {
    static let idempotencyKey = Self("Idempotency-Key")!
    static let idempotentReplayed = Self("Idempotent-Replayed")!
}

/// `POST /v1/notifications`: a batch in, an id per valid request out, into
/// the in-memory intake or the PostgreSQL queue; with an `Idempotency-Key`,
/// a retry of a batch already taken gets the first answer again and nothing
/// is queued twice.
extension HeraldService {
    func post(_ request: Request) async throws -> Response {
        if intakeClosed { return Self.shuttingDown }
        var request = request
        let body: ByteBuffer
        do { body = try await request.collectBody(upTo: configuration.maxBodyBytes) } catch is NIOTooManyBytesError {
            return Self.json(.contentTooLarge, "{\"error\":\"the body is over \(configuration.maxBodyBytes) bytes\"}")
        } catch {
            // Not a size: a body that cannot be read (a transfer coding other than chunked, broken chunks).
            return Self.json(.badRequest, errorBody("the body could not be read: \(error)"))
        }
        let bytes = Array(body.readableBytesView)
        let key: IdempotencyKey?
        do { key = try IdempotencyKey(header: request.headers[.idempotencyKey], body: bytes) } catch let e {
            return Self.json(.badRequest, errorBody(e.description))
        }
        // A full queue answers 429 before the batch is parsed (a thousand requests decoded for
        // a refusal, each time a client retries, was most of a busy service's work). Not with an
        // Idempotency-Key: a retry of a batch already taken gets its first answer, full or not.
        if key == nil {
            // Counted only when the queue's room is less than the body could hold.
            var counted: Int?
            func lines() -> Int {
                if let counted { return counted }
                let n = RequestBatch.lines(in: bytes)
                counted = n
                return n
            }
            if let refusal = intake.refusal(beforeParsing: RequestBatch.mostLines(in: bytes), lines: lines) {
                return Self.refused(refusal, count: lines())
            }
        }
        let parsed = RequestBatch.parse(bytes, keepingText: intake.keepsText)
        if parsed.requests.isEmpty {
            return Self.json(.badRequest, parsed.report(ids: nil, error: parsed.refusal))
        }
        var batch = IntakeBatch(requests: parsed.requests.map(\.request), texts: parsed.texts)
        // Traced: each notification carries this request's span (a child of the caller's
        // `traceparent`) unless it has a trace of its own. Only a sampled one: the notification's
        // spans follow its parent's choice, so an unsampled trace would be noted for nothing.
        if configuration.tracing, let trace = NotificationTrace.current(), trace.isSampled {
            batch.join(trace, enqueuedAt: Duration.sinceEpochMilliseconds)
        }
        switch await intake.submit(batch, key: key) {
        case .accepted(let ids, let replayed):
            if replayed { return Self.replayed(parsed.report { Int(clamping: ids[$0]) }) }
            requestsIn.increment(by: parsed.requests.count)
            requestsTaken.add(parsed.requests.count)
            return Self.json(.accepted, parsed.report { Int(clamping: ids[$0]) })
        case .refused(let refusal):
            return Self.refused(refusal, count: parsed.requests.count)
        case .keyConflict:
            return Self.keyConflict(key)
        case .keyInProgress:
            return Self.json(.conflict, errorBody("a request with this Idempotency-Key is still being answered: retry in a moment"), retryAfter: true)
        case .unavailable(let why):
            logger.error("\(why)")
            return Self.json(.serviceUnavailable, errorBody(why), retryAfter: true)
        }
    }

    static let shuttingDown = json(.serviceUnavailable, #"{"error":"shutting down: no new requests"}"#, retryAfter: true)

    static func refused(_ refusal: IntakeRefusal, count: Int) -> Response {
        switch refusal {
        case .tooLarge(let capacity):
            // The queue could never take the batch whole: retrying it as it is cannot succeed.
            return json(.contentTooLarge, errorBody("the batch holds \(count) requests, more than the queue can ever hold (serve.queue is \(capacity)): nothing of it was taken; split it into batches of at most \(capacity)"))
        case .full:
            return json(.tooManyRequests, #"{"error":"the queue is full: nothing of this batch was taken; retry later"}"#, retryAfter: true)
        case .closed:
            return shuttingDown
        case .scheduleFull(let capacity):
            return json(.tooManyRequests, errorBody("\(capacity) scheduled sends (send-at) already wait in memory, as many as serve.scheduledCapacity allows: nothing of this batch was taken; retry later, or give the service a queue section (the database holds scheduled sends)"), retryAfter: true)
        }
    }

    /// The first answer to a key's batch, again: `202`, marked `Idempotent-Replayed: true`.
    static func replayed(_ body: [UInt8]) -> Response {
        var response = json(.accepted, body)
        response.headers[.idempotentReplayed] = "true"
        return response
    }

    static func keyConflict(_ key: IdempotencyKey?) -> Response {
        json(.unprocessableContent, errorBody("Idempotency-Key \"\(key?.key ?? "")\" was used with another body: nothing of this batch was taken (a retry must send the same bytes; a new batch needs a new key)"))
    }

    static func json(_ status: HTTPResponse.Status, _ text: String, retryAfter: Bool = false) -> Response {
        json(status, Array(text.utf8), retryAfter: retryAfter)
    }

    static func json(_ status: HTTPResponse.Status, _ bytes: [UInt8], retryAfter: Bool = false) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if retryAfter { headers[.retryAfter] = "1" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
