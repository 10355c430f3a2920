import ArgumentParser
import Foundation
import HeraldBinary
import HeraldCore
import HeraldJSON
import HeraldRecorder

/// `herald bench record`: the recorder's throughput and compression, beside
/// the `gzip -6` command on the same bytes in the same run.
struct BenchRecord: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Framed notifications recorded per second (MB/s) and the compression ratio, beside gzip -6 on the same bytes.",
        discussion: """
            Records --count framed notifications (the payload mix of `herald bench frame`, a distinct \
            random device token each, frames included) in batches of --batch-size through the recorder \
            transport into a temporary directory, then decompresses the log and times the gzip command \
            (-6) on those same JSON Lines. Goal (issue 14): at least twice gzip -6's throughput, with \
            a compression ratio of at least 5.
            """
    )

    @Option(help: "Notifications to record.") var count = 500_000
    @Option(help: "Notifications per batch (one gzip member each).") var batchSize = 512
    @Option(help: "zlib level.") var level = 1
    @Flag(help: "Leave the frames out of the log (the recorder's frames: false).") var noFrames = false

    func run() async throws {
        let payloads = BenchFrame.payloads
        let framer = BinaryFramer()
        var batches: [[Envelope]] = []
        var framedBytes = 0
        var g = SeededGenerator(seed: 14)
        var batch: [Envelope] = []
        for i in 0..<count {
            var words = (g.next(), g.next(), g.next(), g.next())
            let token = withUnsafeBytes(of: &words) { DeviceToken(copying: $0) }
            var r = NotificationRequest(token: token, id: UInt32(i), topic: "com.example.app")
            r.expiry = 1_700_000_000 + UInt32(i % 3600)
            var e = Envelope(sequence: UInt64(i), request: r)
            e.payload = payloads[i % payloads.count]
            e.frame = try framer.frame(e)
            framedBytes += e.frame!.bytes.count
            batch.append(e)
            if batch.count == batchSize {
                batches.append(batch)
                batch = []
            }
        }
        if !batch.isEmpty { batches.append(batch) }

        let dir = NSTemporaryDirectory() + "herald-bench-record-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var options = RecorderOptions()
        options.level = Int32(level)
        options.includeFrames = !noFrames
        let transport = try RecorderTransport(directory: dir, options: options)
        let ledger = OutcomeLedger(tracksIdentity: false)
        let seconds = try await measure {
            for b in batches {
                ledger.enter(b.map(\.sequence), count: b.count)
                try await transport.send(b, outcomes: ledger)
            }
            await transport.finish(outcomes: ledger)
        }
        guard ledger.snapshot.accepted == UInt64(count) else { throw BenchError("recorded \(ledger.snapshot.accepted) of \(count)") }
        let stats = transport.statistics

        // The baseline: gzip -6 on the same JSON Lines, read back from the log.
        let plain = dir + "/plain.jsonl"
        var records = 0
        do {
            let reader = try LogReader(paths: [dir])
            guard FileManager.default.createFile(atPath: plain, contents: nil), let out = FileHandle(forWritingAtPath: plain) else {
                throw BenchError("cannot write \(plain)")
            }
            var w = JSONWriter(capacity: 1 << 20)
            while let r = reader.next() {
                records += 1
                w.value(.object(r.object))
                w.byte(0x0A)
                if w.bytes.count > 1 << 20 {
                    try out.write(contentsOf: w.bytes)
                    w.bytes.removeAll(keepingCapacity: true)
                }
            }
            try out.write(contentsOf: w.bytes)
            try out.close()
            guard reader.problems.isEmpty, records == count else { throw BenchError("read back \(records) records, problems: \(reader.problems)") }
        }
        let plainBytes = (try FileManager.default.attributesOfItem(atPath: plain)[.size] as? Int) ?? 0
        let gzipSeconds = try await measure {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = ["gzip", "-6", "-c", plain]
            p.standardOutput = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { throw BenchError("gzip exited \(p.terminationStatus)") }
        }

        let mb = 1_000_000.0
        let ours = Double(stats.bytesIn) / seconds / mb
        let gzip = Double(plainBytes) / gzipSeconds / mb
        let ratio = Double(stats.bytesIn) / Double(stats.bytesOut)
        var r = JSONLine()
        r.add("benchmark", "record")
        r.add("notifications", count)
        r.add("batch_size", batchSize)
        r.add("level", level)
        r.add("frames", !noFrames)
        r.add("segments", stats.segments.count)
        r.add("framed_mb", Double(framedBytes) / mb, places: 1)
        r.add("log_mb", Double(stats.bytesIn) / mb, places: 1)
        r.add("compressed_mb", Double(stats.bytesOut) / mb, places: 1)
        r.add("seconds", seconds, places: 3)
        r.add("notifications_per_s", Double(count) / seconds, places: 0)
        r.add("framed_mb_per_s", Double(framedBytes) / seconds / mb, places: 1)
        r.add("log_mb_per_s", ours, places: 1)
        r.add("compression_ratio", ratio, places: 2)
        r.add("gzip6_seconds", gzipSeconds, places: 3)
        r.add("gzip6_mb_per_s", gzip, places: 1)
        r.add("ratio_to_gzip6", ours / gzip, places: 2)
        r.add("goal_met", ours / gzip >= 2 && ratio >= 5)
        r.add("peak_rss_mib", peakResidentMiB(), places: 1)
        r.print()
    }
}
