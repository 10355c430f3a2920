import Foundation
import HeraldCore
import HeraldTracing
import Logging
import OTel
import ServiceLifecycle
import Tracing

/// Traces (issue 31), set up from the standard OpenTelemetry variables: off unless
/// `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, or `console` to print spans), and
/// `OTEL_SDK_DISABLED=true` turns them off again. swift-otel reads the rest: the collector
/// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, OTLP over HTTP with
/// protobuf by default: `OTEL_EXPORTER_OTLP_PROTOCOL` may say `http/json`), the sampler
/// (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`: a parent-based ratio by default, every
/// trace), the service's name (`OTEL_SERVICE_NAME`, `herald` by default) and the batching
/// (`OTEL_BSP_*`). docs/service.md, "Tracing".
struct TracingSetup {
    /// The exporters' services: in the command's service group, first (they stop last, once the
    /// pipeline's last spans are made, and export what they hold as they stop).
    let services: [any Service]
    /// Herald's own exporter for the notifications' spans (docs/architecture.md, "Notification
    /// spans"), when it can do what the variables ask (OTLP/HTTP with protobuf, uncompressed);
    /// otherwise they are made on swift-otel's tracer too.
    let spanExporter: OTLPTraceExporter?

    /// Whether `environment` asks for traces.
    static func requested(_ environment: [String: String]) -> Bool {
        if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return false }
        guard let exporter = environment["OTEL_TRACES_EXPORTER"]?.trimmingCharacters(in: .whitespaces).lowercased() else { return false }
        return !exporter.isEmpty && exporter != "none"
    }

    /// swift-otel's tracer made the process's (`InstrumentationSystem`), when the environment asks
    /// for traces; nil when it does not. Call once per process.
    static func fromEnvironment(logger: Logger) throws -> TracingSetup? {
        guard requested(ProcessInfo.processInfo.environment) else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "herald"
        configuration.logs.enabled = false
        // /metrics is Prometheus' (docs/service.md): OTLP carries the traces only.
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        // The HTTP exporter is the one built (the gRPC trait is off: Package.swift).
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        // The requests' spans batched by Herald's defaults; the OTEL_BSP_* variables still win.
        configuration.traces.batchSpanProcessor.maxQueueSize = OTLPExportConfiguration.requestSpansQueue
        configuration.traces.batchSpanProcessor.maxExportBatchSize = OTLPExportConfiguration.requestSpansBatch
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            InstrumentationSystem.bootstrap(backend.factory)
            let own = try OTLPExportConfiguration.fromEnvironment(ProcessInfo.processInfo.environment)
                .map { OTLPTraceExporter(configuration: $0, logger: logger) }
            return TracingSetup(services: [backend.service] + (own.map { [$0] } ?? []), spanExporter: own)
        } catch let error as OTLPConfigurationError {
            throw SetupError("tracing: \(error)")
        } catch {
            throw SetupError("tracing (OTEL_TRACES_EXPORTER): \(error)")
        }
    }

    /// Log lines written inside a span carry its `trace_id` and `span_id` (swift-otel's provider).
    static func logMetadata(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Logger.MetadataProvider? {
        requested(environment) ? OTel.makeLoggingMetadataProvider() : nil
    }
}
