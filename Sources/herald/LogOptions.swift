import ArgumentParser
import Foundation
import HeraldCore
import HeraldJSON
import Logging

/// `--log-level` and `--log-format`: the swift-log `Logger` a command passes
/// to what it runs (transports, the token store, the TLS layer, the service);
/// no global handler is installed.
struct LogOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .info

    @Option(help: "Log format on standard error: text or json.")
    var logFormat: LogFormat = .text

    enum LogFormat: String, ExpressibleByArgument { case text, json }

    /// A logger writing to standard error in the chosen format, at the chosen level.
    func logger(label: String = "herald") -> Logger {
        let format = logFormat
        // Traced (OTEL_TRACES_EXPORTER): a line written inside a span names its trace and span.
        let provider = TracingSetup.logMetadata()
        var logger = Logger(label: label) { label in
            format == .json
                ? JSONLogHandler(label: label, metadataProvider: provider) as any LogHandler
                : StreamLogHandler.standardError(label: label, metadataProvider: provider)
        }
        logger.logLevel = logLevel
        return logger
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// One JSON object per log line on standard error: time, level, label, message, metadata.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var w = JSONWriter(capacity: 160)
        w.raw("{\"time\":")
        w.string(ISO8601DateFormatter().string(from: Date()))
        w.raw(",\"level\":")
        w.string(event.level.rawValue)
        w.raw(",\"label\":")
        w.string(label)
        w.raw(",\"message\":")
        w.string(event.message.description)
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        all.merge(event.metadata ?? [:]) { $1 }
        if !all.isEmpty {
            w.raw(",\"metadata\":{")
            var first = true
            for (k, v) in all.sorted(by: { $0.key < $1.key }) {
                w.separator(&first)
                w.string(k)
                w.raw(":")
                w.string(v.description)
            }
            w.raw("}")
        }
        w.raw("}\n")
        writeToStandardError(String(decoding: w.bytes, as: UTF8.self))
    }
}
