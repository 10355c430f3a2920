import HeraldCore
@testable import HeraldHTTP2
import PropertyBased
import Testing

/// The delivery machine's and the connection handler's table of open streams
/// (``StreamTable``) against a dictionary: opens in increasing order (now and
/// then skipping numbers), ends in any order, changes in place.
@Suite struct StreamTableTests {
    @Test("opens, ends, look-ups and changes agree with a dictionary, over many seeds")
    func agreesWithADictionary() async {
        await propertyCheck(count: 200, input: Gen.uint64()) { seed in
            var g = SeededGenerator(seed: seed)
            var table = StreamTable<String>()
            var model: [Int: String] = [:]
            var next = Int.random(in: 0...1_000, using: &g)
            for _ in 0..<300 {
                switch Int.random(in: 0..<10, using: &g) {
                case 0..<4:
                    // Now and then a gap (a number given out and never opened).
                    next += Int.random(in: 0..<6, using: &g) == 0 ? Int.random(in: 2...50, using: &g) : 1
                    table.insert("v\(next)", at: next)
                    model[next] = "v\(next)"
                case 4..<7:
                    // Mostly the oldest (answers come about in order), sometimes any, sometimes one not open.
                    let key: Int
                    switch Int.random(in: 0..<4, using: &g) {
                    case 0: key = model.keys.min() ?? next
                    case 1: key = next + Int.random(in: -60...5, using: &g)
                    default: key = model.keys.randomElement(using: &g) ?? next
                    }
                    #expect(table.remove(key) == model.removeValue(forKey: key))
                case 7:
                    guard let key = model.keys.randomElement(using: &g) else { continue }
                    #expect(table.update(key) { $0 += "+" } != nil)
                    model[key]! += "+"
                case 8:
                    let key = next + Int.random(in: -80...5, using: &g)
                    #expect(table.contains(key) == (model[key] != nil))
                    #expect(table.withValue(key) { $0 } == model[key])
                default:
                    if Int.random(in: 0..<20, using: &g) == 0 {
                        let all = table.removeAll()
                        #expect(all.map(\.key) == model.keys.sorted())
                        #expect(all.map(\.value) == model.keys.sorted().map { model[$0]! })
                        model = [:]
                    }
                }
                #expect(table.count == model.count)
                #expect(table.isEmpty == model.isEmpty)
                #expect(table.firstKey == model.keys.min())
                #expect(table.keys == model.keys.sorted())
            }
        }
    }

    @Test("a stream left open while thousands open and end after it keeps 4 bytes a number, and its value")
    func stragglerKeepsItsValue() {
        var table = StreamTable<[UInt8]>()
        table.insert([1, 2, 3], at: 1)
        for k in 2..<10_002 {
            table.insert([UInt8(truncatingIfNeeded: k)], at: k)
            #expect(table.remove(k) == [UInt8(truncatingIfNeeded: k)])
        }
        #expect(table.count == 1 && table.firstKey == 1)
        #expect(table.pool.count == 2, "the ended streams' slots are reused")
        #expect(table.remove(1) == [1, 2, 3])
        #expect(table.isEmpty && table.places.isEmpty && table.firstKey == nil)
        // Numbering may start anywhere once empty.
        table.insert([9], at: 500)
        #expect(table.firstKey == 500 && table.withValue(500) { $0 } == [9])
    }
}
