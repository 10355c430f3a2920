import HeraldBinary
import HeraldCore
import Testing

@Suite struct InFlightWindowTests {
    func filled(_ n: Int, first: UInt32 = 1) -> InFlightWindow<Int> {
        var w = InFlightWindow<Int>(firstIdentifier: first)
        for i in 0..<n { #expect(w.append(i) == first &+ UInt32(i)) }
        return w
    }

    @Test func errorSplitsTheWindow() {
        var w = filled(10)
        let r = w.resolve(ErrorResponse(status: .invalidToken, identifier: 5))
        #expect(r.identifierMatched)
        #expect(r.accepted == [0, 1, 2, 3])
        #expect(r.rejected?.item == 4 && r.rejected?.status == .invalidToken)
        #expect(r.resend == [5, 6, 7, 8, 9])
        #expect(w.isEmpty)
    }

    @Test func shutdownNamesTheLastGoodOne() {
        var w = filled(10)
        let r = w.resolve(ErrorResponse(status: .shutdown, identifier: 5))
        #expect(r.accepted == [0, 1, 2, 3, 4] && r.rejected == nil && r.resend == [5, 6, 7, 8, 9])
        var all = filled(3)
        let last = all.resolve(ErrorResponse(status: .shutdown, identifier: 3))
        #expect(last.accepted == [0, 1, 2] && last.resend.isEmpty)
    }

    @Test func unknownIdentifierIsAmbiguous() {
        var w = filled(4)
        let r = w.resolve(ErrorResponse(status: .processingError, identifier: 0))
        #expect(!r.identifierMatched && r.accepted.isEmpty && r.rejected == nil && r.resend == [0, 1, 2, 3])
    }

    @Test func identifiersWrap() {
        var w = filled(6, first: UInt32.max - 2)
        #expect(w.nextIdentifier == 3)
        #expect(w.item(withIdentifier: UInt32.max) == 2)
        #expect(w.item(withIdentifier: 0) == 3)
        let r = w.resolve(ErrorResponse(status: .missingPayload, identifier: 1))
        #expect(r.accepted == [0, 1, 2, 3] && r.rejected?.item == 4 && r.resend == [5])
    }

    @Test func acceptanceAndLossAndReset() {
        var w = filled(5)
        #expect(w.accept(through: 2) == [0, 1])
        #expect(w.item(withIdentifier: 1) == nil && w.item(withIdentifier: 3) == 2)
        #expect(w.accept(through: 99).isEmpty)
        #expect(w.connectionLost() == [2, 3, 4])
        #expect(w.append(7) == 6)
        #expect(w.acceptAll() == [7])
        #expect(w.reset().isEmpty)
        #expect(w.append(8) == 1)
    }

    @Test func largeWindowsStayConsistent() {
        var w = filled(20_000)
        #expect(w.accept(through: 15_000).count == 15_000)
        #expect(w.count == 5_000 && w.item(withIdentifier: 15_001) == 15_000)
        let r = w.resolve(ErrorResponse(status: .invalidToken, identifier: 19_000))
        #expect(r.accepted.first == 15_000 && r.accepted.count == 3_999 && r.rejected?.item == 18_999 && r.resend.count == 1_000)
    }
}
