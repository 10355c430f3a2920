import HeraldJSON
import Testing

@testable import HeraldHTTP2

@Suite("HTTP/2 answers: every documented status and reason, and what Herald does with it")
struct ResponseTests {
    @Test("the table", arguments: [
        (200, nil, APNsDisposition.accepted),
        (400, "BadDeviceToken", .rejected), (400, "DeviceTokenNotForTopic", .rejected),
        (400, "BadCollapseId", .rejected), (400, "BadExpirationDate", .rejected), (400, "BadMessageId", .rejected),
        (400, "BadPriority", .rejected), (400, "BadTopic", .rejected), (400, "DuplicateHeaders", .rejected),
        (400, "InvalidPushType", .rejected), (400, "MissingDeviceToken", .rejected), (400, "MissingTopic", .rejected),
        (400, "PayloadEmpty", .rejected), (400, "TopicDisallowed", .rejected), (404, "BadPath", .rejected),
        (405, "MethodNotAllowed", .rejected), (413, "PayloadTooLarge", .rejected),
        (400, "IdleTimeout", .retryElsewhere),
        (403, "BadCertificate", .credentialRejected), (403, "BadCertificateEnvironment", .credentialRejected),
        (403, "InvalidProviderToken", .credentialRejected), (403, "MissingProviderToken", .credentialRejected),
        (403, "BadEnvironmentKeyIdInToken", .credentialRejected), (403, "Forbidden", .credentialRejected),
        (403, "ExpiredProviderToken", .refreshToken), (403, "UnrelatedKeyIdInToken", .newConnection),
        (410, "Unregistered", .unregistered), (410, "ExpiredToken", .unregistered),
        (429, "TooManyProviderTokenUpdates", .tooManyTokenUpdates), (429, "TooManyRequests", .retryLater),
        (500, "InternalServerError", .retryElsewhere), (503, "ServiceUnavailable", .retryElsewhere),
        (503, "Shutdown", .retryElsewhere),
        // Reasons Apple adds later: the status decides.
        (400, "SomethingNew", .rejected), (403, "SomethingNew", .credentialRejected), (429, nil, .retryLater),
        (502, nil, .retryElsewhere), (410, nil, .unregistered),
    ] as [(Int, String?, APNsDisposition)])
    func table(status: Int, reason: String?, expected: APNsDisposition) {
        #expect(APNsDisposition(status: status, reason: reason) == expected)
        #expect(expected.resends == [.retryLater, .retryElsewhere, .refreshToken, .tooManyTokenUpdates, .newConnection].contains(expected))
    }

    @Test("headers and body: apns-id, apns-unique-id, reason, 410's timestamp")
    func parse() {
        let r = APNsResponse(
            status: 410, headers: [("apns-id", "abc"), ("Apns-Unique-Id", "u-1"), ("content-type", "application/json")],
            body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8))
        #expect(r == APNsResponse(status: 410, apnsID: "abc", uniqueID: "u-1", reason: "Unregistered", timestamp: 1_700_000_000_123))
        #expect(r.disposition == .unregistered)
        let ok = APNsResponse(status: 200, headers: [("apns-id", "abc")], body: [])
        #expect(ok.reason == nil && ok.disposition == .accepted)
    }

    @Test("a body that is not the documented JSON keeps the status and says what it was")
    func unreadable() {
        let r = APNsResponse(status: 503, headers: [], body: Array("<html>busy</html>".utf8))
        #expect(r.disposition == .retryElsewhere)
        #expect(r.reason?.contains("not JSON") == true)
    }
}
