import HeraldCore

/// Lines for standard output, written 64 KiB at a time. A write that fails is
/// kept (the first one) and nothing more is written; ``finish()`` writes the
/// rest and throws it, so a closed pipe or a full disk is never silent.
struct OutputBuffer {
    var bytes: [UInt8] = []
    var failure: IOError?

    init() { bytes.reserveCapacity(1 << 16) }

    /// Appends `line` and a newline; writes when 64 KiB have gathered.
    mutating func appendLine(_ line: [UInt8]) {
        bytes += line
        bytes.append(0x0A)
        if bytes.count >= 1 << 16 { write() }
    }

    mutating func write() {
        guard failure == nil else {
            bytes.removeAll(keepingCapacity: true)
            return
        }
        do throws(IOError) { try writeAll(1, &bytes, to: "standard output") } catch { failure = error }
    }

    /// Writes what is left; throws the first write that failed.
    mutating func finish() throws {
        write()
        if let failure { throw SetupError("cannot write: \(failure)") }
    }
}
