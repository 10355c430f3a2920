import HeraldBinary
import HeraldCore
import PropertyBased
import Testing

/// Regression: resolving an error deep in a long window compacts the storage
/// between taking the accepted items and taking the failed one.
@Suite struct InFlightWindowCompactionTests {
    @Test(arguments: [4_097, 6_000, 9_000, 10_000])
    func errorAfterManyAccepted(_ failedAt: Int) {
        var w = InFlightWindow<Int>()
        for i in 0..<10_001 { _ = w.append(i) }
        let r = w.resolve(ErrorResponse(status: .invalidToken, identifier: UInt32(failedAt + 1)))
        #expect(r.identifierMatched)
        #expect(r.accepted == Array(0..<failedAt))
        #expect(r.rejected?.item == failedAt && r.rejected?.status == .invalidToken)
        #expect(r.resend == Array(failedAt + 1..<10_001))
        #expect(w.isEmpty)
    }

    @Test func errorAfterTimedAcceptance() {
        var w = InFlightWindow<Int>()
        for i in 0..<12_000 { _ = w.append(i) }
        #expect(w.accept(through: 3_000).count == 3_000)
        let r = w.resolve(ErrorResponse(status: .missingPayload, identifier: 11_000))
        #expect(r.accepted == Array(3_000..<10_999) && r.rejected?.item == 10_999 && r.resend == Array(11_000..<12_000))
    }
}

/// The window against a plain list of what is in flight, over runs of appends, timed
/// acceptances, error responses and lost connections: the window hands over most of itself
/// without copying (its array, the few after the cut copied back), compacts, and moves its head,
/// and whichever it does, each item is answered once, in order, under the identifier it was
/// written with.
@Suite struct InFlightWindowModelTests {
    @Test("appends, acceptances, answers and losses agree with a list, over many seeds")
    func agreesWithAList() async {
        await propertyCheck(count: 100, input: Gen.uint64()) { seed in
            var g = SeededGenerator(seed: seed)
            var window = InFlightWindow<Int>(firstIdentifier: UInt32.random(in: 0...UInt32.max, using: &g))
            var model: [(id: UInt32, item: Int)] = []
            var next = 0
            var answered: [Int] = []
            for _ in 0..<40 {
                switch Int.random(in: 0..<10, using: &g) {
                case 0..<5:
                    // Now and then past 4,096 (where the window compacts).
                    let n = Int.random(in: 0..<8, using: &g) == 0 ? Int.random(in: 1...5000, using: &g) : Int.random(in: 1...40, using: &g)
                    for _ in 0..<n {
                        let id = window.append(next)
                        if let last = model.last { #expect(id == last.id &+ 1) }
                        model.append((id, next))
                        next += 1
                    }
                case 5, 6:
                    guard !model.isEmpty else { continue }
                    let k = Int.random(in: 0..<model.count, using: &g)
                    let got = window.accept(through: model[k].id)
                    #expect(got == model[..<(k + 1)].map(\.item))
                    answered += got
                    model.removeFirst(k + 1)
                case 7, 8:
                    let k = Int.random(in: 0...model.count, using: &g)  // model.count: not in flight
                    let statuses: [Status] = [.invalidToken, .missingPayload, .shutdown, .processingError]
                    let status = statuses[Int.random(in: 0..<statuses.count, using: &g)]
                    let id = k < model.count ? model[k].id : (model.last?.id ?? 0) &+ 1
                    let r = window.resolve(ErrorResponse(status: status, identifier: id))
                    #expect(r.identifierMatched == (k < model.count))
                    #expect(r.accepted + (r.rejected.map { [$0.item] } ?? []) + r.resend == model.map(\.item))
                    if k < model.count {
                        #expect(r.accepted.count == (status == .shutdown ? k + 1 : k))
                    }
                    answered += r.accepted + (r.rejected.map { [$0.item] } ?? [])
                    // The resent are written again, under new identifiers.
                    model = []
                    for item in r.resend { model.append((window.append(item), item)) }
                default:
                    let lost = window.connectionLost()
                    #expect(lost == model.map(\.item))
                    model = []
                    for item in lost { model.append((window.append(item), item)) }
                }
                #expect(window.count == model.count)
                if let first = model.first { #expect(window.item(withIdentifier: first.id) == first.item) }
                if let last = model.last { #expect(window.item(withIdentifier: last.id) == last.item) }
            }
            // Nothing answered twice.
            #expect(Set(answered).count == answered.count)
        }
    }
}
