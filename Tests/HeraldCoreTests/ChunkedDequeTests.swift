import DequeModule
import PropertyBased
import Testing

@testable import HeraldCore

/// ``ChunkedDeque``, the lanes' queue underneath ``LaneQueue``, against a plain `Deque`: bursts
/// of thousands, so chunks fill, empty and are made at both ends.
@Suite struct ChunkedDequeTests {
    @Test("appends, prepends, pops and takes of up to 3,000 at a time agree with a Deque, over many seeds; emptied, it holds no chunk")
    func agreesWithADeque() async {
        await propertyCheck(count: 60, input: Gen.uint64()) { seed in
            var g = SeededGenerator(seed: seed)
            var q = ChunkedDeque<String>()
            var model = Deque<String>()
            var next = 0
            for _ in 0..<200 {
                let n = Int.random(in: 0...3_000, using: &g)
                switch Int.random(in: 0..<5, using: &g) {
                case 0, 1:
                    for _ in 0..<n { q.append("e\(next)"); model.append("e\(next)"); next += 1 }
                case 2:
                    for _ in 0..<n / 10 { q.prepend("p\(next)"); model.prepend("p\(next)"); next += 1 }
                case 3:
                    for _ in 0..<n { #expect(q.popFirst() == model.popFirst()) }
                default:
                    let taken = q.removeFirst(upTo: n)
                    let k = min(n, model.count)
                    #expect(taken == Array(model.prefix(k)))
                    model.removeFirst(k)
                }
                #expect(q.count == model.count && q.isEmpty == model.isEmpty && q.first == model.first)
                #expect(q.chunks.allSatisfy { !$0.isEmpty && $0.count <= ChunkedDeque<String>.chunkSize }, "no empty or overfull chunk")
            }
            #expect(q.removeAll() == Array(model))
            #expect(q.isEmpty && q.chunks.isEmpty && q.popFirst() == nil)
        }
    }
}
