import ArgumentParser
import Foundation
import HeraldBinary
import HeraldCore
import HeraldJSON
import HeraldSimulator

/// `herald bench frame`: binary frames encoded per second, and decoded and
/// validated per second by the simulator, each with a baseline in the same run.
struct BenchFrame: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frame",
        abstract: "Frames encoded (command 2) and frames decoded and validated by the simulator, per second, on one core."
    )

    @Option(help: "Frames to encode.")
    var encodeCount = 20_000_000

    @Option(help: "Frames to decode and validate.")
    var validateCount = 5_000_000

    @Option(help: "Bytes per write (the reused buffer is flushed at this size).")
    var writeSize = 65_536

    /// The payload mix, already built (compact JSON as the payload stage writes it):
    /// a plain alert, a titled alert with a category and a custom key, a localized
    /// alert, a badge, a background update with custom data, a sound, a long
    /// alert, and a larger payload with a media reference (about 380 bytes).
    static let payloads: [[UInt8]] = [
        #"{"aps":{"alert":"Hello from Herald","badge":1,"sound":"default"}}"#,
        #"{"aps":{"alert":{"title":"Game Request","subtitle":"Five Card Draw","body":"Bob wants to play poker"},"category":"GAME_INVITATION"},"gameID":"12345678"}"#,
        #"{"aps":{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Jenna","Frank"]},"sound":"chime.aiff"}}"#,
        #"{"aps":{"badge":9}}"#,
        #"{"aps":{"content-available":1},"acme1":"bar","acme2":[1,2]}"#,
        #"{"aps":{"alert":"You have mail","sound":"bingbong.aiff"},"acme":{"unread":12,"folder":"inbox"}}"#,
        "{\"aps\":{\"alert\":\"" + String(repeating: "Long message text. ", count: 12) + "\",\"badge\":3}}",
        "{\"aps\":{\"alert\":\"New photos\",\"mutable-content\":1},\"media\":\"" + String(repeating: "abcdefgh", count: 40) + "\"}",
    ].map { Array($0.utf8) }

    func run() async throws {
        let payloads = Self.payloads
        let tokens = (0..<64).map { i in DeviceToken(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) }) }
        let mask = payloads.count - 1
        // 5 for the background update (APNs refuses 10 for it), 10 for the rest.
        let priorities: [UInt8] = payloads.map { p in p.withUnsafeBytes { PayloadInspector.isContentAvailableOnly($0) } ? 5 : 10 }
        let averagePayload = Double(payloads.map(\.count).reduce(0, +)) / Double(payloads.count)

        // Contiguous storage, so the loops take no per-frame closure detours.
        let payloadBytes = payloads.flatMap { $0 }
        var payloadRanges: [Range<Int>] = []
        var o = 0
        for p in payloads { payloadRanges.append(o..<o + p.count); o += p.count }
        let tokenBytes = tokens.flatMap(\.bytes)

        // 1. Encode: command 2 into one reused buffer, flushed every `writeSize` bytes.
        var buffer = WriteBuffer(capacity: writeSize + 4096)
        var sink = 0
        var encodeCPU = threadCPUSeconds()
        let encodeSeconds = try await measure {
            try payloadBytes.withUnsafeBytes { pb in
                try tokenBytes.withUnsafeBytes { tb in
                    for i in 0..<encodeCount {
                        let r = payloadRanges[i & mask]
                        let t = UnsafeRawBufferPointer(rebasing: tb[(i & 63) * 32..<(i & 63) * 32 + 32])
                        try FrameEncoder.encode(
                            .frame, token: t, payload: UnsafeRawBufferPointer(rebasing: pb[r]),
                            identifier: UInt32(truncatingIfNeeded: i), expiry: 0, priority: priorities[i & mask], into: &buffer)
                        if buffer.count >= writeSize {
                            sink &+= buffer.count
                            buffer.clear()
                        }
                    }
                }
            }
        }
        encodeCPU = threadCPUSeconds() - encodeCPU
        let encodedBytes = sink + buffer.count

        // Baselines: a naive encoder (a new array per frame, appended byte by byte, as
        // the first framer did) and one on Foundation's Data (one reused Data per write).
        let baselineCount = min(encodeCount, 2_000_000)
        var naiveSink = 0
        let naiveSeconds = await measure {
            for i in 0..<baselineCount {
                let f = NaiveEncoder.frame(token: tokens[i & 63], payload: payloads[i & mask], id: UInt32(truncatingIfNeeded: i))
                naiveSink &+= f.count
            }
        }
        var data = Data(capacity: writeSize + 4096)
        let dataSeconds = await measure {
            for i in 0..<baselineCount {
                DataEncoder.append(token: tokenBytes, tokenOffset: (i & 63) * 32, payload: payloads[i & mask], id: UInt32(truncatingIfNeeded: i), to: &data)
                if data.count >= writeSize {
                    naiveSink &+= data.count
                    data.removeAll(keepingCapacity: true)
                }
            }
        }

        // 2. Decode and validate: the simulator reads a pre-encoded stream of the same mix.
        var stream = WriteBuffer(capacity: 1 << 24)
        let framesInStream = 65_536
        for i in 0..<framesInStream {
            try FrameEncoder.encode(.frame, token: tokens[i & 63], payload: payloads[i & mask], identifier: UInt32(i + 1), priority: priorities[i & mask], into: &stream)
        }
        let streamBytes = stream.bytes
        let passes = max(1, validateCount / framesInStream)
        let validated = passes * framesInStream
        let simulator = APNsSimulator(configuration: SimulatorConfiguration(recordsDeliveries: false))
        var closed = false
        var validateCPU = threadCPUSeconds()
        let validateSeconds = await measure {
            streamBytes.withUnsafeBytes { raw in
                for _ in 0..<passes {
                    let c = simulator.openConnection()
                    var off = 0
                    while off < raw.count {
                        let n = min(writeSize, raw.count - off)
                        let reply = c.receive(UnsafeRawBufferPointer(rebasing: raw[off..<off + n]))
                        off += reply.consumed
                        closed = closed || reply.closed
                    }
                }
            }
        }
        validateCPU = threadCPUSeconds() - validateCPU
        let acceptedBySimulator = simulator.counters.accepted

        // With every accepted notification recorded (what tests use), on a smaller run.
        let recording = APNsSimulator()
        let recordingSeconds = await measure {
            streamBytes.withUnsafeBytes { raw in
                let c = recording.openConnection()
                var off = 0
                while off < raw.count {
                    let n = min(writeSize, raw.count - off)
                    off += c.receive(UnsafeRawBufferPointer(rebasing: raw[off..<off + n])).consumed
                }
            }
        }

        // Baseline: decode each frame into arrays and check the payload with Foundation's JSONSerialization.
        let foundationCount = min(validated, 200_000)
        var foundationOK = 0
        let foundationSeconds = await measure {
            var i = 0
            var seen = 0
            while seen < foundationCount {
                if i >= streamBytes.count { i = 0 }
                let (token, payload, length) = NaiveDecoder.frame(streamBytes, at: i)
                i += length
                seen += 1
                if token.count == 32, !payload.isEmpty, payload.count <= 2048,
                   let o = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any], o["aps"] is [String: Any] {
                    foundationOK += 1
                }
            }
        }

        var report = JSONLine()
        report.add("benchmark", "frame")
        report.add("payload_mix", payloads.count)
        report.add("average_payload_bytes", averagePayload, places: 1)
        report.add("write_bytes", writeSize)
        report.add("encoded_frames", encodeCount)
        report.add("encoded_bytes", encodedBytes)
        report.add("encode_seconds", encodeSeconds, places: 3)
        report.add("encoded_frames_per_second", Double(encodeCount) / encodeSeconds, places: 0)
        report.add("encoded_frames_per_cpu_second", Double(encodeCount) / encodeCPU, places: 0)
        report.add("baseline_naive_array_frames_per_second", Double(baselineCount) / naiveSeconds, places: 0)
        report.add("baseline_foundation_data_frames_per_second", Double(baselineCount) / dataSeconds, places: 0)
        report.add("speedup_vs_naive", (Double(encodeCount) / encodeSeconds) / (Double(baselineCount) / naiveSeconds), places: 2)
        report.add("validated_frames", validated)
        report.add("validate_seconds", validateSeconds, places: 3)
        report.add("validated_frames_per_second", Double(validated) / validateSeconds, places: 0)
        report.add("validated_frames_per_cpu_second", Double(validated) / validateCPU, places: 0)
        report.add("validated_recording_frames_per_second", Double(framesInStream) / recordingSeconds, places: 0)
        report.add("baseline_foundation_json_frames_per_second", Double(foundationCount) / foundationSeconds, places: 0)
        report.add("all_accepted", acceptedBySimulator == validated && !closed && recording.counters.accepted == framesInStream && foundationOK == foundationCount)
        report.add("peak_rss_mib", peakResidentMiB(), places: 1)
        report.add("goal_encoded_frames_per_second", 10_000_000)
        report.add("goal_validated_frames_per_second", 3_000_000)
        if naiveSink == -1 { report.add("sink", naiveSink) }
        report.print()
    }
}

// `threadCPUSeconds()` (Bench+Localize.swift): CPU time of the calling thread. The measured
// loops have no suspension point, so they stay on one thread.

/// The baseline encoder: a fresh array per frame, appended a byte at a time.
enum NaiveEncoder {
    static func frame(token: DeviceToken, payload: [UInt8], id: UInt32) -> [UInt8] {
        var out: [UInt8] = []
        let t = token.bytes
        out.append(2)
        append32(UInt32(3 + t.count + 3 + payload.count + 7 + 7 + 4), &out)
        out.append(1); append16(UInt16(t.count), &out); for b in t { out.append(b) }
        out.append(2); append16(UInt16(payload.count), &out); for b in payload { out.append(b) }
        out.append(3); append16(4, &out); append32(id, &out)
        out.append(4); append16(4, &out); append32(0, &out)
        out.append(5); append16(1, &out); out.append(10)
        return out
    }
    static func append16(_ v: UInt16, _ out: inout [UInt8]) { out.append(UInt8(v >> 8)); out.append(UInt8(v & 0xFF)) }
    static func append32(_ v: UInt32, _ out: inout [UInt8]) { append16(UInt16(v >> 16), &out); append16(UInt16(v & 0xFFFF), &out) }
}

/// The Foundation baseline: frames appended to a reused `Data`, integers through `withUnsafeBytes(of:)`.
enum DataEncoder {
    static func append(token: [UInt8], tokenOffset: Int, payload: [UInt8], id: UInt32, to d: inout Data) {
        d.append(2)
        withUnsafeBytes(of: UInt32(3 + 32 + 3 + payload.count + 7 + 7 + 4).bigEndian) { d.append(contentsOf: $0) }
        d.append(1)
        withUnsafeBytes(of: UInt16(32).bigEndian) { d.append(contentsOf: $0) }
        d.append(contentsOf: token[tokenOffset..<tokenOffset + 32])
        d.append(2)
        withUnsafeBytes(of: UInt16(payload.count).bigEndian) { d.append(contentsOf: $0) }
        d.append(contentsOf: payload)
        d.append(3)
        withUnsafeBytes(of: UInt16(4).bigEndian) { d.append(contentsOf: $0) }
        withUnsafeBytes(of: id.bigEndian) { d.append(contentsOf: $0) }
        d.append(4)
        withUnsafeBytes(of: UInt16(4).bigEndian) { d.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(0).bigEndian) { d.append(contentsOf: $0) }
        d.append(5)
        withUnsafeBytes(of: UInt16(1).bigEndian) { d.append(contentsOf: $0) }
        d.append(10)
    }
}

/// The baseline decoder: copies a command-2 frame's token and payload into arrays.
enum NaiveDecoder {
    static func frame(_ b: [UInt8], at i: Int) -> (token: [UInt8], payload: [UInt8], length: Int) {
        let frameLength = Int(b[i + 1]) << 24 | Int(b[i + 2]) << 16 | Int(b[i + 3]) << 8 | Int(b[i + 4])
        var token: [UInt8] = []
        var payload: [UInt8] = []
        var o = i + 5
        while o < i + 5 + frameLength {
            let id = b[o]
            let n = Int(b[o + 1]) << 8 | Int(b[o + 2])
            if id == 1 { token = Array(b[o + 3..<o + 3 + n]) }
            if id == 2 { payload = Array(b[o + 3..<o + 3 + n]) }
            o += 3 + n
        }
        return (token, payload, 5 + frameLength)
    }
}
