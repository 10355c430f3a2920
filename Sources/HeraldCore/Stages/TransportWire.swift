/// What a transport puts on the wire: it decides the frame stage (binary
/// frames, or none: an HTTP/2 transport builds each request itself) and the
/// payload limit when the configuration names none.
public enum TransportWire: Sendable, Hashable {
    /// The binary interface's frames: `gateway`, `simulator`, `recorder`.
    case binary
    /// The HTTP/2 provider API: `http2`, `http2-simulator`; 4096 bytes (5120 for VoIP).
    case http2
}

/// A transport that says which wire it speaks (one that does not is taken as
/// binary). A transport handed to `HeraldAssembly.makePipeline` in code is
/// asked; one made from configuration is known by its registry entry.
public protocol WireDescribing {
    var wire: TransportWire { get }
}
