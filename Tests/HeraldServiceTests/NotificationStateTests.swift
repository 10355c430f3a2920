import HeraldCore
import Testing

@testable import HeraldPostgres
@testable import HeraldService

/// `GET /v1/notifications/{id}` answers in one shape whatever the intake: the
/// in-memory one keeps the ledger's records, the queue rebuilds them from its
/// rows; both are written by the one outcome encoder.
@Suite("GET's one shape: NotificationState as the API writes it, from memory and from a queue row")
struct NotificationStateTests {
    static func text(_ id: UInt64, _ state: NotificationState) -> (Int, String) {
        let (status, body) = HeraldService.answer(id, state)
        return (status.code, String(decoding: body, as: UTF8.self))
    }

    static func row(_ outcome: String, status: Int? = nil, code: String? = nil, reason: String? = nil, apnsID: String? = nil, duplicate: Bool = false) -> PostgresQueue.Row {
        PostgresQueue.Row(
            state: "done", outcome: outcome, status: status, reasonCode: code, reason: reason, apnsID: apnsID, possibleDuplicate: duplicate, attempts: 1)
    }

    @Test("each state's status and body, byte for byte")
    func states() {
        var accepted = OutcomeRecord(sequence: 3, line: nil, id: 7, token: nil, outcome: .accepted, apnsID: "A1")
        #expect(Self.text(3, .decided(accepted))
            == (200, #"{"notification":3,"state":"decided","outcome":{"id":7,"outcome":"accepted","apnsId":"A1"}}"#))
        accepted.possibleDuplicate = true
        #expect(Self.text(3, .decided(accepted))
            == (200, #"{"notification":3,"state":"decided","outcome":{"id":7,"outcome":"accepted","apnsId":"A1","possibleDuplicate":true}}"#))
        #expect(Self.text(4, .pending) == (200, #"{"notification":4,"state":"pending"}"#))
        #expect(Self.text(5, .forgotten) == (404, #"{"notification":5,"error":"expired: its outcome is no longer kept"}"#))
        #expect(Self.text(6, .unknown) == (404, #"{"notification":6,"error":"no such notification"}"#))
        #expect(Self.text(7, .unavailable("connection refused \"db\"")) == (503, #"{"notification":7,"error":"connection refused \"db\""}"#))
    }

    @Test("a queue row's outcome is the record it was written from: the same outcome line as in memory")
    func rowsRoundTrip() {
        let records: [(Outcome, String?)] = [
            (.accepted, "A1"),
            (.suppressed, nil),
            (.rejected(Status(http: 410, reason: "Unregistered")), "B2"),
            (.rejected(.invalidToken), nil),
            (.dropped(OutcomeReason(.payloadTooLarge, "payload is 4,200 bytes")), nil),
            (.failed(OutcomeReason(.abandoned, "abandoned: a second signal came")), nil),
            (.failed("the service stopped before sending it"), nil),
            (.cancelled(OutcomeReason(.cancelled, "cancelled by DELETE /v1/notifications/12")), nil),
        ]
        for (outcome, apnsID) in records {
            let record = OutcomeRecord(sequence: 12, line: nil, id: nil, token: nil, outcome: outcome, apnsID: apnsID)
            // What the queue's writer stores of it (PostgresQueue+Finish: status, code, reason, apns id).
            var status: Int?, code: String?, reason: String?
            switch outcome {
            case .rejected(let s): status = s.rawValue; reason = s.description
            case .dropped(let r), .failed(let r), .cancelled(let r): code = r.code == .unspecified ? nil : r.code.name; reason = r.message
            case .accepted, .suppressed: break
            }
            for duplicate in [false, true] {
                let row = Self.row(outcome.kind.rawValue, status: status, code: code, reason: reason, apnsID: apnsID, duplicate: duplicate)
                let rebuilt = row.record(outcome: outcome.kind.rawValue, id: 12)
                var expected = record
                expected.possibleDuplicate = duplicate
                #expect(rebuilt == expected, "\(outcome)")
                #expect(Self.text(12, .decided(rebuilt)) == Self.text(12, .decided(expected)))
            }
        }
    }
}
