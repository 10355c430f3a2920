import Foundation
import HeraldTestSupport
import Testing

/// What an operator's first hour with `herald serve` ran into (issue 34, items 3, 5 and 9), driven
/// over raw sockets: what the test sends is exactly what the service reads.
@Suite("herald serve: oversized batches, error texts, metrics that count what they say, the auth scheme's case", .serialized)
struct ServeFirstHourTests {
    static let token = "a-test-token-0123456789abcdef"

    static func request(_ method: String, _ path: String, body: String? = nil, auth: String? = "Bearer \(token)") -> String {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        if let auth { head += "Authorization: \(auth)\r\n" }
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        return head + "\r\n" + (body ?? "")
    }

    static func batch(_ n: Int) -> String {
        "[" + (0..<n).map { #"{"id":\#($0),"token":"\#(goodToken)","alert":"n"}"# }.joined(separator: ",") + "]"
    }

    static func errorText(_ exchange: RawExchange) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(exchange.body.utf8)) as? [String: Any])?["error"] as? String
    }

    @Test("a batch larger than serve.queue: 413 naming the limit, not 429 forever; POST [] and a body of bad lines: 400 with an error text; 'bearer' in lower case is accepted; herald_requests_total counts only requests taken; the transport's series are there before they count anything")
    func firstHour() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "\(Self.token)\n".write(toFile: dir + "/api-tokens", atomically: true, encoding: .utf8)
        try #"{"serve":{"apiTokensFile":"api-tokens","queue":5},"transport":{"type":"simulator"}}"#
            .write(toFile: dir + "/serve.json", atomically: true, encoding: .utf8)
        let server = try await ExternalServer.start(try heraldExecutable().path, ["serve", "--config", dir + "/serve.json", "--port", "0", "--log-level", "warning"])
        let port = server.ready["port"] as! Int
        defer { server.stopBlocking(interrupt: true) }

        // The transport's counters exist from the first scrape, at 0.
        let before = try await rawHTTP(port: port, Self.request("GET", "/metrics"))
        #expect(before.status == 200)
        for series in ["herald_transport_connect_failures_total", "herald_transport_possible_duplicates_total", "herald_transport_silent_closes_total",
                       "herald_transport_stalls_total", "herald_transport_shutdowns_total"] {
            #expect(before.body.contains(series), "\(series) missing")
        }

        let tooLarge = try await rawHTTP(port: port, Self.request("POST", "/v1/notifications", body: Self.batch(6)))
        #expect(tooLarge.status == 413, "\(tooLarge.text)")
        #expect(Self.errorText(tooLarge)?.contains("serve.queue is 5") == true, "\(tooLarge.body)")
        #expect(!tooLarge.text.lowercased().contains("retry-after"))

        let empty = try await rawHTTP(port: port, Self.request("POST", "/v1/notifications", body: "[]"))
        #expect(empty.status == 400 && Self.errorText(empty)?.contains("no request") == true, "\(empty.text)")
        let bad = try await rawHTTP(port: port, Self.request("POST", "/v1/notifications", body: "{\"token\":\"zz\"}\n{\"id\":1}\n"))
        #expect(bad.status == 400 && Self.errorText(bad)?.isEmpty == false, "\(bad.text)")

        let lowerCase = try await rawHTTP(port: port, Self.request("POST", "/v1/notifications", body: Self.batch(3), auth: "bearer \(Self.token)"))
        #expect(lowerCase.status == 202, "\(lowerCase.text)")
        let wrongScheme = try await rawHTTP(port: port, Self.request("POST", "/v1/notifications", body: Self.batch(1), auth: "Basic \(Self.token)"))
        #expect(wrongScheme.status == 401)

        let after = try await rawHTTP(port: port, Self.request("GET", "/metrics"))
        let requests = after.body.split(separator: "\n").first { $0.hasPrefix("herald_requests_total ") }
        #expect(requests == "herald_requests_total 3", "\(String(describing: requests))")
    }
}
