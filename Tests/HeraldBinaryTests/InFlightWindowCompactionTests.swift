import HeraldBinary
import HeraldCore
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
