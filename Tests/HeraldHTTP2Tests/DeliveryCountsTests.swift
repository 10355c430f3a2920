import Foundation
import HeraldCore
import PropertyBased
import Testing

@testable import HeraldSimulator

/// The HTTP/2 simulator's deliveries per `apns-id` (``DeliveryCounts``): 256 tables, so that a
/// campaign's ids never double one table of them all at once under the simulator's lock.
@Suite struct DeliveryCountsTests {
    /// An `apns-id` as clients send them: a UUID, lower or upper case.
    static func apnsID(_ g: inout SeededGenerator) -> String {
        let id = UUID(uuid: (0..<16).reduce(into: [UInt8]()) { b, _ in b.append(UInt8.random(in: 0...255, using: &g)) }
            .withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }).uuidString
        return Bool.random(using: &g) ? id.lowercased() : id
    }

    @Test("counts, distinct ids, duplicated ids and duplicates agree with one dictionary, over many seeds (ids re-sent, any case, and a few not UUIDs)")
    func agreesWithADictionary() async {
        await propertyCheck(count: 100, input: Gen.uint64()) { seed in
            var g = SeededGenerator(seed: seed)
            var counts = DeliveryCounts()
            var model: [String: Int] = [:]
            var sent: [String] = []
            for _ in 0..<400 {
                let id: String
                switch Int.random(in: 0..<10, using: &g) {
                case 0..<2 where !sent.isEmpty: id = sent.randomElement(using: &g)!  // delivered again
                case 2: id = ["", "x", "-", "not a uuid", "0"].randomElement(using: &g)!
                default: id = Self.apnsID(&g)
                }
                sent.append(id)
                counts.add(id)
                model[id, default: 0] += 1
            }
            for id in sent { #expect(counts[id] == model[id]) }
            #expect(counts[Self.apnsID(&g)] == 0)
            #expect(counts.count == model.count)
            #expect(counts.duplicated == Set(model.filter { $0.value > 1 }.keys))
            #expect(counts.duplicates == model.values.reduce(0) { $0 + $1 - 1 })
        }
    }

    @Test("random apns-ids fill every one of the 256 tables evenly (within 0.75-1.25 of the mean over 256,000 ids), so no table holds most of a campaign")
    func idsSpreadOverTheTables() {
        var g = SeededGenerator(seed: 30)
        var filled = [Int](repeating: 0, count: 256)
        for _ in 0..<256_000 { filled[Int(DeliveryCounts.table(Self.apnsID(&g)))] += 1 }
        #expect(filled.min()! >= 750 && filled.max()! <= 1_250, "tables hold \(filled.min()!)-\(filled.max()!) ids")
        // Ids that differ only in their last two characters (a client numbering its own) go to different tables.
        let numbered = (0..<256).map { String(format: "00000000-0000-0000-0000-0000000000%02x", $0) }
        #expect(Set(numbered.map(DeliveryCounts.table)).count == 256)
    }
}
