import HeraldCore
import MetricsTestKit
import Testing

@Suite("The pipeline's own metrics (swift-metrics, the factory passed in)")
struct PipelineMetricsTests {
    @Test("per stage: requests handed, requests decided, a time per batch; the transport's too; one latency per outcome the pipeline timed")
    func perStage() async throws {
        let metrics = TestMetrics()
        let pipeline = Pipeline(
            source: InMemorySource((0..<1000).map { request(UInt32($0)) }),
            stages: [NamedStage("drop3", PipelineTests.DropMultiples(n: 3)), NamedStage("touch", PipelineTests.Touch())],
            transport: RecordingTransport(), options: PipelineOptions(batchSize: 64), metrics: metrics)
        let s = try await pipeline.run()
        #expect(s.isBalanced && s.accepted == 666)
        #expect(try metrics.expectCounter("herald_stage_requests_total", [("stage", "drop3")]).totalValue == 1000)
        #expect(try metrics.expectCounter("herald_stage_decided_total", [("stage", "drop3")]).totalValue == 334)
        #expect(try metrics.expectCounter("herald_stage_requests_total", [("stage", "touch")]).totalValue == 666)
        #expect(try metrics.expectCounter("herald_stage_requests_total", [("stage", "transport")]).totalValue == 666)
        #expect(try metrics.expectTimer("herald_stage_duration_seconds", [("stage", "drop3")]).values.count == 16)  // ⌈1000/64⌉ batches
        #expect(try metrics.expectTimer("herald_stage_duration_seconds", [("stage", "transport")]).values.count == 16)
        #expect(try metrics.expectCounter("herald_transport_payload_bytes_total").totalValue == 0, "no payload stage here")
        let latencies = try metrics.expectTimer("herald_notification_latency_seconds").values
        #expect(latencies.count == 1000 && latencies.allSatisfy { $0 >= 0 })
    }
}
