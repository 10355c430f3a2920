#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HeraldJSON

/// The cores this process may run on: on Linux its CPU affinity (so
/// `taskset -c 0` counts one), from `/proc/self/status`'s `Cpus_allowed`
/// mask (`sched_getaffinity` needs `_GNU_SOURCE`, which Swift's Glibc
/// module does not define); the online processors elsewhere. At least 1.
package enum Cores {
    package static let available: Int = affinity() ?? max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))

    static func affinity() -> Int? {
        #if os(Linux)
        guard let mask = try? readSmallFile("/proc/self/status", limit: 1 << 16) else { return nil }
        let key = Array("Cpus_allowed:".utf8)
        var n = 0, found = false
        mask.withUnsafeBytes { raw in
            forEachLine(in: raw) { _, line in
                guard !found, line.starts(with: key) else { return }
                found = true
                for c in line.dropFirst(key.count) {
                    if let v = Hex.nibble(c) { n += v.nonzeroBitCount }
                }
            }
        }
        return found && n > 0 ? n : nil
        #else
        return nil
        #endif
    }
}
