import Foundation
import HeraldClient
import Hummingbird
import Logging
import ServiceLifecycle

/// A shop's notifier: `POST /orders/{id}/shipped` with `{"device":"<hex token>"}`
/// sends the buyer an alert through `HeraldClient` and answers with the
/// outcome: `{"order":"42","outcome":"accepted","apnsId":"…"}`, or, for a
/// device APNs says is gone, `"forget":true` (the shop would delete it).
///
///     ShopNotifier HERALD_CONFIG PORT
///
/// Prints `{"port":N}` once listening; SIGTERM drains the notifications in
/// flight, then exits.
@main
struct ShopNotifier {
    static func main() async throws {
        let arguments = CommandLine.arguments
        guard arguments.count == 3, let port = Int(arguments[2]) else {
            FileHandle.standardError.write(Data("usage: ShopNotifier HERALD_CONFIG PORT\n".utf8))
            exit(2)
        }
        LoggingSystem.bootstrap(StreamLogHandler.standardError)  // standard output carries the port line
        var logger = Logger(label: "shop")
        logger.logLevel = .warning

        // The one line that makes Herald: the same configuration file `herald send` reads.
        let client = try HeraldClient(configuration: .load(path: arguments[1]), logger: logger)

        let router = Router()
        router.post("/orders/:id/shipped") { request, context -> Response in
            let order = context.parameters.get("id") ?? "?"
            struct Body: Decodable { let device: String }
            let device: DeviceToken
            do { device = try DeviceToken(hex: try await request.decode(as: Body.self, context: context).device) } catch {
                return Self.json(.badRequest, ["error": "a JSON body with the device's token in hex, as {\"device\":\"…\"}: \(error)"])
            }
            let outcome = try await client.send(.alert(to: device, title: "Order shipped", body: "Order \(order) is on its way", sound: "default"))
            var answer: [String: String] = ["order": order, "outcome": outcome.kind.rawValue]
            if let id = outcome.apnsID { answer["apnsId"] = id }
            if let reason = outcome.reason { answer["reason"] = reason }
            if outcome.isTokenDead { answer["forget"] = "true" }
            return Self.json(.ok, answer)
        }
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in
                // Written at once: print() holds its line in a buffer when standard output is a pipe.
                FileHandle.standardOutput.write(Data("{\"port\":\(channel.localAddress?.port ?? 0)}\n".utf8))
            },
            logger: logger)
        // Herald and the HTTP server in one group: SIGTERM stops the server, then drains Herald.
        let group = ServiceGroup(configuration: .init(services: [client, app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    static func json(_ status: HTTPResponse.Status, _ fields: [String: String]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
