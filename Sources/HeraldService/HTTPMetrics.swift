import CoreMetrics
import HeraldCore
import HTTPTypes
import Hummingbird
import Synchronization

/// Counts every HTTP request the service answers and times it, by route, method and status:
/// `herald_http_requests_total{route,method,status}` and the histogram
/// `herald_http_request_duration_seconds{route,method,status}` (from the request's head, its body
/// read, to its answer made; the API's answers are small and made whole). Outermost, so 401s,
/// 404s and 405s count too.
///
/// Hummingbird's `MetricsMiddleware` records through the process-wide `MetricsSystem`; a
/// service records through its own factory (several services in one process, each with its own
/// `/metrics`), so this is the same idea on the service's factory, with labels that stay few
/// whatever a client sends: the route is the API's path pattern (``MethodGuard/route(of:)``, or
/// `unmatched`), and a method
/// the API does not use is `other`.
struct HTTPMetrics: RouterMiddleware {
    typealias Context = BasicRequestContext

    struct Key: Hashable {
        var route: String
        var method: String
        var status: Int
    }

    /// Each route's answer when it succeeds, made at start: the HTTP series are on `/metrics`
    /// from its first scrape, at 0, as Prometheus' guidance has it for label values known
    /// in advance (other statuses appear with their first answer).
    static let known: [Key] = [
        Key(route: "/v1/notifications", method: "POST", status: 202),
        Key(route: "/v1/notifications/{notification}", method: "GET", status: 200),
        Key(route: "/v1/notifications/{notification}", method: "DELETE", status: 200),
        Key(route: "/healthz", method: "GET", status: 200),
        Key(route: "/readyz", method: "GET", status: 200),
        Key(route: "/metrics", method: "GET", status: 200),
        Key(route: "/openapi.yaml", method: "GET", status: 200),
        Key(route: "/", method: "GET", status: 200),
        Key(route: "/v1/status", method: "GET", status: 200),
    ]

    final class Series: Sendable {
        let factory: any MetricsFactory
        let made = Mutex<[Key: (Counter, Timer)]>([:])
        init(factory: any MetricsFactory) {
            self.factory = factory
            for key in HTTPMetrics.known { _ = instruments(key) }
        }

        func record(_ key: Key, nanoseconds: Int64) {
            let (counter, timer) = instruments(key)
            counter.increment()
            timer.recordNanoseconds(nanoseconds)
        }

        func instruments(_ key: Key) -> (Counter, Timer) {
            made.withLock { made in
                if let m = made[key] { return m }
                let dimensions = [("route", key.route), ("method", key.method), ("status", String(key.status))]
                let m = (
                    Counter(label: "herald_http_requests_total", dimensions: dimensions, factory: factory),
                    Timer(label: "herald_http_request_duration_seconds", dimensions: dimensions, factory: factory)
                )
                made[key] = m
                return m
            }
        }
    }

    let series: Series

    init(factory: any MetricsFactory) { series = Series(factory: factory) }

    static func method(_ m: HTTPRequest.Method) -> String {
        switch m {
        case .get, .head, .post, .delete, .put, .patch, .options: return m.rawValue
        default: return "other"
        }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let route = MethodGuard.route(of: request.uri.path) ?? "unmatched", method = Self.method(request.method)
        let series = self.series
        func nanoseconds() -> Int64 { (ContinuousClock.now - start).inNanoseconds }
        do {
            let response = try await next(request, context)
            series.record(Key(route: route, method: method, status: Int(response.status.code)), nanoseconds: nanoseconds())
            return response
        } catch {
            let status = (error as? any HTTPResponseError).map { Int($0.status.code) } ?? 500
            series.record(Key(route: route, method: method, status: status), nanoseconds: nanoseconds())
            throw error
        }
    }
}
