import HeraldCore
import HeraldJSON
@testable import HeraldService
import Testing

@Suite("The outcome webhook's rules: retry verdicts, configuration, the body")
struct WebhookRuleTests {
    @Test("2xx delivers; 408, 429, 5xx and no answer retry with growing backoff (or Retry-After); other statuses give up at once; the last attempt gives up")
    func verdicts() {
        #expect(WebhookVerdict.after(status: 200, retryAfterSeconds: nil, attempt: 1, attempts: 3) == .delivered)
        #expect(WebhookVerdict.after(status: 204, retryAfterSeconds: nil, attempt: 3, attempts: 3) == .delivered)
        #expect(WebhookVerdict.after(status: 503, retryAfterSeconds: nil, attempt: 1, attempts: 8) == .retry(after: .milliseconds(500)))
        #expect(WebhookVerdict.after(status: nil, retryAfterSeconds: nil, attempt: 2, attempts: 8) == .retry(after: .seconds(1)))
        #expect(WebhookVerdict.after(status: 500, retryAfterSeconds: nil, attempt: 7, attempts: 8) == .retry(after: .seconds(30)))
        #expect(WebhookVerdict.after(status: 429, retryAfterSeconds: 7, attempt: 1, attempts: 8) == .retry(after: .seconds(7)))
        #expect(WebhookVerdict.after(status: 408, retryAfterSeconds: 9999, attempt: 1, attempts: 8) == .retry(after: .seconds(300)))
        guard case .giveUp(let why) = WebhookVerdict.after(status: 404, retryAfterSeconds: nil, attempt: 1, attempts: 8) else {
            Issue.record("404 must give up")
            return
        }
        #expect(why.contains("HTTP 404"))
        guard case .giveUp(let last) = WebhookVerdict.after(status: 502, retryAfterSeconds: nil, attempt: 3, attempts: 3) else {
            Issue.record("the last attempt must give up")
            return
        }
        #expect(last.contains("3 attempts") && last.contains("HTTP 502"))
    }

    func load(_ json: String) throws -> WebhookConfiguration {
        guard case .object(let o) = try JSONParser.parse(json) else { throw ConfigError(file: "t", key: "", message: "not an object") }
        return try WebhookConfiguration.load(ConfigNode(file: "herald.json", path: "outcomes.webhook", object: o))
    }

    @Test("configuration: defaults, every key, and errors that name the key")
    func configuration() throws {
        let d = try load(#"{"url":"https://hooks.example.com/apns"}"#)
        #expect(d.kinds == [.rejected, .failed] && d.batchSize == 500 && d.attempts == 8 && d.bearerToken == nil)
        let c = try load(#"{"url":"http://127.0.0.1:9/x","kinds":["failed","dropped"],"batch":10,"flushMilliseconds":0,"attempts":2,"timeoutSeconds":3,"drainSeconds":0,"maxQueued":5}"#)
        #expect(c.kinds == [.failed, .dropped] && c.batchSize == 10 && c.flushInterval == .zero && c.attempts == 2)
        #expect(c.timeout == .seconds(3) && c.drainTimeout == .zero && c.maxQueued == 5)
        for (json, key, words) in [
            (#"{}"#, "outcomes.webhook.url", "required"),
            (#"{"url":"ftp://x/"}"#, "outcomes.webhook.url", "http"),
            (#"{"url":"http:///nohost"}"#, "outcomes.webhook.url", "host"),
            (#"{"url":"http://h/","kinds":["lost"]}"#, "outcomes.webhook.kinds", "unknown outcome"),
            (#"{"url":"http://h/","batch":0}"#, "outcomes.webhook.batch", "from 1"),
            (#"{"url":"http://h/","tokenEnv":"HERALD_TEST_UNSET_WEBHOOK_TOKEN"}"#, "outcomes.webhook.tokenEnv", "not set"),
        ] {
            #expect(throws: ConfigError.self, "\(json)") { try load(json) }
            do { _ = try load(json) } catch let e as ConfigError {
                #expect(e.key == key && e.message.contains(words), "\(json): \(e)")
            }
        }
    }

    @Test("the body: the batch id and each outcome beside its notification number, byte for byte")
    func body() {
        let token = try! DeviceToken(hex: String(repeating: "ab", count: 32))
        let records = [
            OutcomeRecord(sequence: 4, line: nil, id: 9, token: token, outcome: .rejected(Status(rawValue: 8))),
            OutcomeRecord(sequence: 5, line: nil, id: nil, token: nil, outcome: .failed(OutcomeReason(.abandoned, "a \"quoted\" reason"))),
        ]
        let text = String(decoding: OutcomeWebhook.body(records, id: "12-34-1"), as: UTF8.self)
        #expect(text == #"{"batch":"12-34-1","outcomes":[{"notification":4,"outcome":{"id":9,"token":""# + String(repeating: "ab", count: 32)
            + #"","outcome":"rejected","status":8,"reason":"invalid token"}},{"notification":5,"outcome":{"outcome":"failed","reason":"a \"quoted\" reason","code":"abandoned"}}]}"#)
    }
}
