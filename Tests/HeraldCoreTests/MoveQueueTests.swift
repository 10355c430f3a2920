import HeraldCore
import PropertyBased
import Testing

/// The delivery machines' queue (``MoveQueue``: a ring of slots, elements
/// moved in and out) against an array doing the same, over many seeds,
/// through its growth and wrap-around.
@Suite struct MoveQueueTests {
    @Test("appends, prepends, takes, inserts, maps and empties agree with an array, over many seeds")
    func agreesWithAnArray() async {
        await propertyCheck(count: 200, input: Gen.uint64()) { seed in
            var g = SeededGenerator(seed: seed)
            var queue = MoveQueue<[String]>()  // elements with references: a move or copy gone wrong shows
            var model: [[String]] = []
            var next = 0
            func make() -> [String] {
                next += 1
                return [String(repeating: "v", count: 20) + String(next)]
            }
            for _ in 0..<400 {
                switch Int.random(in: 0..<12, using: &g) {
                case 0..<4:
                    let e = make()
                    model.append(e)
                    queue.append(e)
                case 4:
                    let e = make()
                    model.insert(e, at: 0)
                    queue.prepend(e)
                case 5..<8:
                    #expect(queue.popFirst() == (model.isEmpty ? nil : model.removeFirst()))
                case 8:
                    let items = (0..<Int.random(in: 0...5, using: &g)).map { _ in make() }
                    let at = Int.random(in: 0...model.count, using: &g)
                    model.insert(contentsOf: items, at: at)
                    queue.insert(contentsOf: items, at: at)
                case 9:
                    #expect(queue.map { $0 } == model)
                case 10:
                    #expect(queue.first == model.first)
                default:
                    if Int.random(in: 0..<10, using: &g) == 0 {
                        #expect(queue.removeAll() == model)
                        model = []
                    }
                }
                #expect(queue.count == model.count && queue.isEmpty == model.isEmpty)
            }
            #expect(queue.removeAll() == model)
        }
    }
}
