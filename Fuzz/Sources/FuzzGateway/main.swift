import HeraldBinary
import HeraldCore
import HeraldSimulator

/// libFuzzer entry: arbitrary bytes written to a simulated gateway connection,
/// in writes whose sizes the input's first byte chooses. Invariants: no crash;
/// every write is consumed; once closed, the connection stays closed; any
/// response is exactly one well-formed error-response packet; the simulator
/// accepted no more notifications than fit in the bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let step = 1 + Int(data[0])
    let bytes = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    let simulator = APNsSimulator(configuration: SimulatorConfiguration(payloadLimit: 256), clock: { 1_700_000_000 })
    let c = simulator.openConnection()
    var off = 0
    var closed = false
    while off < bytes.count {
        let n = min(step, bytes.count - off)
        let reply = c.receive(UnsafeRawBufferPointer(rebasing: bytes[off..<off + n]))
        precondition(reply.consumed == n, "a write was not consumed")
        precondition(!closed || (reply.closed && reply.response.isEmpty), "spoke after closing")
        if !reply.response.isEmpty {
            precondition(reply.response.count == ErrorResponse.length && reply.response[0] == ErrorResponse.command)
            precondition(reply.closed, "an error response without a close")
        }
        closed = closed || reply.closed
        off += n
    }
    _ = c.endOfInput()
    precondition(simulator.counters.accepted * 38 <= bytes.count, "accepted more than the bytes hold")
    return 0
}
