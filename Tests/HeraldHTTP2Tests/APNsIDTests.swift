import HeraldCore
@testable import HeraldHTTP2
import Testing

@Suite("apns-id generator")
struct APNsIDTests {
    @Test("SplitMix64 gives the reference outputs (seed 0: e220a8397b1dcdaf, 6e789e6aa1b965f4, 06c45d188009454f)")
    func splitMixVector() {
        var g = SeededGenerator(seed: 0)
        #expect([g.next(), g.next(), g.next()] == [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F])
    }

    @Test("ids made on several tasks at once are all distinct")
    func concurrentIDs() async {
        let ids = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<4 { group.addTask { (0..<20_000).map { _ in APNsID.random() } } }
            var all: [String] = []
            for await part in group { all += part }
            return all
        }
        #expect(Set(ids).count == 80_000)
    }
}
