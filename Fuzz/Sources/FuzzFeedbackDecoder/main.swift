import FuzzSupport
import HeraldBinary

/// libFuzzer entry: a byte stream for `FeedbackParser`, checked by ``fuzzDecoder(_:_:_:)``.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    fuzzDecoder(FeedbackParser.self, data, size)
}
