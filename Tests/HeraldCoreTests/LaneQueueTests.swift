import HeraldCore
import Testing

/// The lanes' queue (issue 30): fast first, the bulk lane's share kept, each lane in order, nothing lost.
@Suite("LaneQueue: fast first, bulk never starved")
struct LaneQueueTests {
    struct Item: LaneCarrying, Equatable {
        var lane: Lane
        var n: Int
    }

    @Test("take(max:bulk:) gives what popFirst() would, popFast() once the bulk quota is used: 200 seeds of random lanes, sizes and quotas", arguments: 0..<200)
    func takeMatchesPops(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var a = LaneQueue<Item>()
        var n = 0
        for _ in 0..<50 {
            for _ in 0..<Int(random.next() % 40) {
                a.append(Item(lane: random.next() % 3 == 0 ? .fast : .bulk, n: n))
                n += 1
            }
            var b = a
            let max = Int(random.next() % 30) + 1, bulk = Int(random.next() % 12)
            let taken = a.take(max: max, bulk: bulk)
            var popped: [Item] = [], bulkLeft = bulk
            while popped.count < max, let item = bulkLeft > 0 ? b.popFirst() : b.popFast() {
                if item.lane == .bulk { bulkLeft -= 1 }
                popped.append(item)
            }
            #expect(taken == popped, "seed \(seed): max \(max), bulk \(bulk)")
            #expect(a.count == b.count)
            // The share's count carries on alike: the next pop agrees.
            #expect(a.popFirst() == b.popFirst())
        }
    }

    @Test("random appends, retries and takes over 200 seeds: each lane first in, first out (a retry at its front); while both wait, exactly one take in 10 is bulk; every item comes out once", arguments: 0..<200)
    func invariants(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var q = LaneQueue<Item>()
        var next = 0
        // The queue written plainly: each lane an array.
        var model: [Lane: [Item]] = [.fast: [], .bulk: []]
        var taken: [Item] = []
        var fastInARow = 0
        for _ in 0..<2_000 {
            switch random.next() % 10 {
            case 0..<4:
                let item = Item(lane: random.next() % 3 == 0 ? .fast : .bulk, n: next)
                next += 1
                q.append(item)
                model[item.lane]!.append(item)
            case 4:
                // A retry: an item taken goes back to the front of its lane.
                guard let item = taken.popLast() else { continue }
                q.prepend(item)
                model[item.lane]!.insert(item, at: 0)
            default:
                let bulkWaited = !model[.bulk]!.isEmpty, fastWaited = !model[.fast]!.isEmpty
                guard let item = q.popFirst() else {
                    #expect(!bulkWaited && !fastWaited)
                    continue
                }
                #expect(item == model[item.lane]!.first, "each lane in order")
                model[item.lane]!.removeFirst()
                taken.append(item)
                if bulkWaited && fastWaited {
                    if item.lane == .fast {
                        fastInARow += 1
                        #expect(fastInARow <= LaneQueue<Item>.bulkShareEvery - 1, "bulk waited for more than 9 fast takes")
                    } else {
                        #expect(fastInARow == LaneQueue<Item>.bulkShareEvery - 1, "bulk taken while the fast lane had turns left")
                        fastInARow = 0
                    }
                } else {
                    #expect(item.lane == (fastWaited ? .fast : .bulk))
                    fastInARow = 0
                }
            }
        }
        #expect(q.count == model[.fast]!.count + model[.bulk]!.count)
        #expect(q.removeAll() == model[.fast]! + model[.bulk]!)
        #expect(q.isEmpty)
    }

    @Test("the default lane: the request's own; else priority 5 and 1, and background pushes, bulk; priority 10 and time-sensitive or critical alerts fast")
    func defaults() throws {
        func lane(_ line: String) throws -> Lane {
            try Array(line.utf8).withUnsafeBytes { try RequestDecoder().decode(line: $0) }.effectiveLane
        }
        let t = String(repeating: "ab", count: 32)
        #expect(try lane(#"{"token":"\#(t)","alert":"hi"}"#) == .fast)
        #expect(try lane(#"{"token":"\#(t)","alert":"hi","priority":10}"#) == .fast)
        #expect(try lane(#"{"token":"\#(t)","alert":"hi","priority":5}"#) == .bulk)
        #expect(try lane(#"{"token":"\#(t)","alert":"hi","priority":1}"#) == .bulk)
        #expect(try lane(#"{"token":"\#(t)","alert":"hi","priority":5,"interruption-level":"time-sensitive"}"#) == .fast)
        #expect(try lane(#"{"token":"\#(t)","content-available":1,"push-type":"background"}"#) == .bulk)
        #expect(try lane(#"{"token":"\#(t)","alert":"hi","lane":"bulk"}"#) == .bulk)
        #expect(try lane(#"{"token":"\#(t)","alert":"hi","priority":1,"lane":"fast"}"#) == .fast)
        #expect(throws: RequestError.self) { try lane(#"{"token":"\#(t)","alert":"hi","lane":"express"}"#) }
    }
}
